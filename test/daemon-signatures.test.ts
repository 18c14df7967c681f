// fastpulld's signature policies (signature_policy, notation_config): read and checked at start (a
// policy it cannot use stops the start, naming the file), applied to every fastpull.v1 Pull, read
// again on SIGHUP (a broken one is refused and the running policy stays). Images are signed by the
// real cosign (key pair, cosign's tag scheme) in the loopback distribution registry.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { openStore, type Digest, type FastpullError } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { EXIT_CONFIG, FastpullClient } from '@fastpull/daemon';
import { cosignMissing, cosignSign, generateKeyPair } from './cosign.js';
import { failure, runCliAsync, serveDaemon, startDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const missing = findDistributionBinary() === undefined ? 'docker-registry is not installed (scripts/bootstrap.sh installs it)' : cosignMissing();
if (missing) throw new Error(`fastpulld's signature tests need their peers: ${missing}`);

describe('fastpulld signature policies', () => {
  const work = tempDir('daemon-sig');
  let reg: DistributionRegistry;
  let signed: Digest;
  let unsigned: Digest;
  let seed = 300;
  const policy = join(work.dir, 'policy.json');
  const writePolicy = (file: string, key: string): void =>
    writeFileSync(
      file,
      JSON.stringify({
        default: [{ type: 'insecureAcceptAnything' }],
        transports: {
          docker: { [`${reg.host}/signed`]: [{ type: 'sigstoreSigned', keyPath: join(work.dir, key), signedIdentity: { type: 'matchRepository' } }] },
        },
      }),
    );

  beforeAll(async () => {
    reg = await startDistribution();
    await generateKeyPair(work.dir, 'good');
    await generateKeyPair(work.dir, 'other');
    signed = await pushImage(reg.url, 'signed/app', '1', await sampleImage(seed++, { layers: 2 }));
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/app@${signed}`, 'tag');
    unsigned = await pushImage(reg.url, 'signed/bare', '1', await sampleImage(seed++, { layers: 2 }));
    writePolicy(policy, 'good.pub');
  });
  afterAll(async () => {
    await reg?.stop();
    work.cleanup();
  });

  it('a policy it cannot use stops the start with EXIT_CONFIG, naming the key and the file; so does a notation directory that is not one', async () => {
    const broken = join(work.dir, 'broken.json');
    writeFileSync(broken, '{"default": [{"type": "sigstoreSigned"}');
    const a = startDaemon(['--socket', join(work.dir, 'a.sock'), '--root', join(work.dir, 'a-root'), '--signature-policy', broken]);
    expect((await a.exited).code).toBe(EXIT_CONFIG);
    expect(a.stderr()).toMatch(new RegExp(`^fastpulld: signature policy ${broken}: .* \\(INVALID_ARGUMENT\\)\\n$`));
    const config = join(work.dir, 'b.toml');
    writeFileSync(config, `notation_config = "${join(work.dir, 'no-such-dir')}"\n`);
    const b = startDaemon(['--config', config, '--socket', join(work.dir, 'b.sock'), '--root', join(work.dir, 'b-root')]);
    expect((await b.exited).code).toBe(EXIT_CONFIG);
    expect(b.stderr()).toContain('no-such-dir');
    expect(b.stderr()).toContain('(INVALID_ARGUMENT)');
    // From the environment, as the CLI reads it.
    const c = startDaemon(['--socket', join(work.dir, 'c.sock'), '--root', join(work.dir, 'c-root')], { env: { FASTPULL_SIGNATURE_POLICY: broken } });
    expect((await c.exited).code).toBe(EXIT_CONFIG);
    expect(c.stderr()).toContain(`signature policy ${broken}`);
  });

  it('gates every Pull; SIGHUP reads the policy again, and keeps the running one when the new one is broken', async () => {
    const config = join(work.dir, 'fastpulld.toml');
    const root = join(work.dir, 'root');
    const socket = join(work.dir, 'fastpulld.sock');
    writeFileSync(config, `root = "${root}"\nsignature_policy = "${policy}"\n`);
    let d: RunningDaemon | undefined;
    const client = new FastpullClient(socket);
    try {
      d = await serveDaemon(['--config', config, '--socket', socket, '--metrics-address', '127.0.0.1:0']);
      const serving = d.logs.find((l) => l.msg === 'fastpulld serving')!;
      expect(serving).toMatchObject({ signaturePolicy: policy, notationConfig: null });
      const verdictCount = async (outcome: string): Promise<number> => {
        const text = await (await fetch(String(serving.metrics))).text();
        return Number(new RegExp(`^fastpull_signature_verdicts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      };

      const refused = await failure(client.pull(`${reg.host}/signed/bare:1`));
      expect(refused.code).toBe('SIGNATURE_MISSING');
      expect(grpcCode(refused)).toBe(grpc.status.FAILED_PRECONDITION);
      expect(refused.message).toMatch(/signature check of .*signed\/bare:1 .* refused it: sigstore: no cosign signature/);
      expect(await openStore(root).images.list()).toEqual([]);
      const ok = await client.pull(`${reg.host}/signed/app:1`);
      expect(ok.image.manifest.digest).toBe(signed);

      // The verdict: in the Image message (Pull, List, the CLI through the daemon) as the store keeps it.
      const stored = (await openStore(root).images.list())[0]!;
      expect(stored.signatures?.outcome).toBe('verified');
      expect(ok.image.signatures).toEqual(stored.signatures);
      expect((await client.listImages())[0]!.signatures).toEqual(stored.signatures);
      expect(ok.image.signatures!.verdicts[0]).toMatchObject({ kind: 'sigstore', level: 'strict', outcome: 'verified', scope: `${reg.host}/signed` });
      const listed = await runCliAsync(['images', '--address', socket, '--json']);
      expect(listed.status, listed.stderr).toBe(0);
      expect(JSON.stringify(JSON.parse(listed.stdout))).toContain(JSON.stringify(stored.signatures));
      const inspected = await runCliAsync(['inspect', '--address', socket, `${reg.host}/signed/app:1`]);
      expect(inspected.status, inspected.stderr).toBe(0);
      expect(JSON.stringify(JSON.parse(inspected.stdout))).toContain(JSON.stringify(stored.signatures));

      // Counted by outcome, logged once per image.
      expect(await verdictCount('missing')).toBe(1);
      expect(await verdictCount('verified')).toBe(1);
      const checked = d.logs.filter((l) => l.msg === 'image signatures checked');
      expect(checked).toEqual([expect.objectContaining({ event: 'signature', image: `${reg.host}/signed/app:1`, manifest: signed, outcome: 'verified' })]);
      expect(checked[0]!.verdicts).toEqual([expect.stringMatching(/^sigstore verified by sha256:[0-9a-f]{64}$/)]);
      const refusedLines = d.logs.filter((l) => l.msg === 'image refused by its signature policy');
      expect(refusedLines).toEqual([expect.objectContaining({ image: `${reg.host}/signed/bare:1`, outcome: 'missing' })]);
      expect(d.logs.find((l) => l.msg === 'pull finished')).toMatchObject({ image: `${reg.host}/signed/app:1`, signatures: 'verified' });

      // The key changes: the signed image is now signed by an untrusted key.
      writePolicy(policy, 'other.pub');
      d.proc.kill('SIGHUP');
      expect(await d.waitLog((l) => l.msg === 'configuration reloaded')).toMatchObject({ signaturePolicy: policy, notationConfig: null });
      await client.removeImage(`${reg.host}/signed/app:1`);
      expect((await failure(client.pull(`${reg.host}/signed/app:1`))).code).toBe('SIGNATURE_INVALID');
      expect(await verdictCount('invalid')).toBe(1);

      // A broken policy is not taken: the running one (other.pub) still refuses.
      writeFileSync(policy, '{"default": []}');
      d.proc.kill('SIGHUP');
      const failed = await d.waitLog((l) => l.msg === 'reload failed; keeping the running configuration');
      expect(failed).toMatchObject({ signaturePolicy: policy });
      expect(failed.err).toContain(`signature policy ${policy}`);
      expect((await failure(client.pull(`${reg.host}/signed/app:1`))).code).toBe('SIGNATURE_INVALID');

      // signature_policy = "" turns verification off, even with the environment's.
      writeFileSync(config, `root = "${root}"\nsignature_policy = ""\n`);
      d.proc.kill('SIGHUP');
      await d.waitLog((l) => l.msg === 'configuration reloaded' && l.signaturePolicy === null);
      const open = await client.pull(`${reg.host}/signed/bare:1`);
      expect(open.image.manifest.digest).toBe(unsigned);
      expect(open.image.signatures).toBeUndefined();
    } finally {
      await client.close();
      await stopDaemon(d);
    }
  });
});

/** The gRPC status code a rebuilt error came from. */
function grpcCode(e: FastpullError): number | undefined {
  return (e.cause as { code?: number } | undefined)?.code;
}
