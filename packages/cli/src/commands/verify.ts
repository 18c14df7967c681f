// `fastpull verify REF`: checks an image's signatures against the signature policies, as a pull
// would, without pulling it; prints the verdict (or, with --json, the verdict as one JSON object).
import { Command } from 'commander';
import {
  CONTAINERD_HOSTS_DIR,
  defaultHostsDir,
  dockerCredentialsWithWarning,
  proxyEnvironment,
  loadSignatureVerifiers,
  parseReference,
  scopedCredentials,
  SIGNATURE_ENV,
  verdictLine,
  verifyImageSignatures,
  type ImageVerification,
} from '@fastpull/core';
import { CommandFailure, doing, UsageError } from '../errors.js';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { checkedPlatform, jsonOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { signatureSettings } from '../service.js';
import { givenCredentials, nonEmpty } from './pull.js';

interface VerifyFlags {
  platform?: string;
  plainHttp?: boolean;
  creds?: string;
  hostsDir?: string;
  signaturePolicy?: string;
  notationConfig?: string;
  json?: boolean;
}

export function verifyCommand(io: CliIO, signal: AbortSignal): Command {
  const command = new Command('verify')
    .description("check an image's signatures against the signature policies without pulling it; exit 1 when the policy refuses it")
    .argument('<ref>', 'an image reference, e.g. registry.example.com/app:1')
    .option('--signature-policy <file>', `a containers policy.json whose sigstoreSigned requirements apply (env ${SIGNATURE_ENV.signaturePolicy})`)
    .option('--notation-config <dir>', `a notation configuration directory: trustpolicy.json and truststore/ (env ${SIGNATURE_ENV.notationConfig})`)
    .option('--platform <os/arch[/variant]>', 'platform of a multi-platform image (the signature is checked on what the name resolves to)')
    .option('--plain-http', 'talk to registries over plain HTTP (loopback registries always may)')
    .option('--creds <user:password>', 'credentials for the registry of the reference (before Docker config)')
    .option(
      '--hosts-dir <dir>',
      `registry mirrors as containerd's certs.d hosts.toml files (env FASTPULL_HOSTS_DIR; default ${CONTAINERD_HOSTS_DIR} when it exists)`,
    )
    .addOption(jsonOption('print the verdict as one JSON object'));
  return withExample(command, [
    'fastpull verify --signature-policy /etc/containers/policy.json registry.example.com/app:1',
    'fastpull verify --json app:1 | jq .outcome',
  ]).action(async (ref: string, flags: VerifyFlags) => {
    const platform = checkedPlatform(flags.platform);
    const settings = signatureSettings(io, {
      ...(flags.signaturePolicy !== undefined ? { signaturePolicy: nonEmpty(flags.signaturePolicy, '--signature-policy') } : {}),
      ...(flags.notationConfig !== undefined ? { notationConfig: nonEmpty(flags.notationConfig, '--notation-config') } : {}),
    });
    if (settings.signaturePolicy === undefined && settings.notationConfig === undefined) {
      throw new UsageError(
        `want a policy to verify against: --signature-policy, --notation-config, ${SIGNATURE_ENV.signaturePolicy} or ${SIGNATURE_ENV.notationConfig}`,
      );
    }
    const verifiers = await doing('loading the signature policies', () => loadSignatureVerifiers(settings));
    const given = givenCredentials(flags.creds);
    const docker = dockerCredentialsWithWarning(io.env, (registry, message) =>
      writeLine(io.stderr, `fastpull: warning: no credentials for ${registry}: ${message}`),
    );
    const name = canonicalName(ref);
    const hostsDir = flags.hostsDir ?? defaultHostsDir(io.env);
    const result = await doing(`verifying ${name}`, () =>
      verifyImageSignatures(ref, {
        gate: { verifiers },
        ...(platform ? { platform } : {}),
        ...(flags.plainHttp ? { plainHttp: true } : {}),
        credentials: given ? scopedCredentials(given, [parseReference(ref).registry], docker) : docker,
        ...(hostsDir ? { hostsDir } : {}),
        // As a pull in this process: HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
        proxy: proxyEnvironment(io.env),
        signal,
      }),
    );
    report(io, result, flags.json === true);
    if (result.error) throw new CommandFailure(`verifying ${name}`, result.error);
  });
}

/** The verdict, for people (one line per verifier, then each check) or as JSON. */
function report(io: CliIO, r: ImageVerification, json: boolean): void {
  if (json) {
    writeJSON(io.stdout, { ref: r.name, digest: r.subject.digest, outcome: r.outcome, verdicts: r.verdicts, ...(r.error ? { error: r.error.toJSON() } : {}) });
    return;
  }
  writeLine(io.stdout, `${r.name} (${r.subject.digest}): ${r.outcome === 'uncovered' ? 'no signature policy covers it' : r.outcome}`);
  for (const v of r.verdicts) {
    writeLine(io.stdout, `  ${verdictLine(v)}`);
    for (const c of v.checks) writeLine(io.stdout, `    ${c.ok ? 'ok  ' : 'FAIL'} ${c.check}${c.signature ? ` ${c.signature}` : ''}: ${c.message}`);
  }
}
