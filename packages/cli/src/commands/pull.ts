// `fastpull pull REF...`: pull images into the store and say where they landed.
import { existsSync } from 'node:fs';
import { Command } from 'commander';
import { dockerConfigCredentials, FastpullError, inflaterFromEnv, type CredentialsProvider, openStore, parseInflaterChoice, pull, type PullEvent, type PullResult } from '@fastpull/core';
import { formatBytes, shortDigest, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption } from '../options.js';

interface PullFlags {
  root: string;
  platform?: string;
  plainHttp?: boolean;
  json?: boolean;
  quiet?: boolean;
  inflater?: string;
  unpackConcurrency?: string;
  hostsDir?: string;
}

/** Where containerd nodes keep registry host configuration (Spegel and Dragonfly write there). */
const CONTAINERD_HOSTS_DIR = '/etc/containerd/certs.d';

export function pullCommand(io: CliIO, signal: AbortSignal): Command {
  return new Command('pull')
    .description('pull images and unpack them into overlay snapshots')
    .argument('<ref...>', 'image references, e.g. ubuntu:24.04 or 127.0.0.1:5000/app@sha256:...')
    .addOption(rootOption(io.env))
    .option('--platform <os/arch[/variant]>', 'platform to pull from a multi-platform image (default: this host)')
    .option('--plain-http', 'talk to registries over plain HTTP (loopback registries always may)')
    .option('-q, --quiet', 'print only the image name and digest')
    .option('--inflater <auto|igzip|pigz|zlib>', 'gzip decoder; auto uses igzip when installed (env FASTPULL_INFLATER)')
    .option('--unpack-concurrency <n>', 'layers unpacked at once (default: one per core)')
    .option('--hosts-dir <dir>', `registry mirrors as containerd's hosts.toml files (env FASTPULL_HOSTS_DIR; default ${CONTAINERD_HOSTS_DIR} when it exists)`)
    .addOption(jsonOption())
    .action(async (refs: string[], flags: PullFlags) => {
      const results: PullResult[] = [];
      const inflater = flags.inflater !== undefined ? parseInflaterChoice(flags.inflater, '--inflater') : inflaterFromEnv(io.env);
      const unpackConcurrency = flags.unpackConcurrency !== undefined ? positiveInt(flags.unpackConcurrency, '--unpack-concurrency') : undefined;
      // FASTPULL_THREADS=0 keeps unpacking on the main thread (for comparison and debugging).
      const threads = io.env.FASTPULL_THREADS !== '0';
      const credentials = cliCredentials(io);
      const hostsDir = flags.hostsDir ?? (io.env.FASTPULL_HOSTS_DIR || (existsSync(CONTAINERD_HOSTS_DIR) ? CONTAINERD_HOSTS_DIR : undefined));
      for (const ref of refs) {
        const onProgress = flags.json || flags.quiet ? undefined : (e: PullEvent) => renderEvent(io, e);
        const r = await pull(ref, {
          root: flags.root,
          signal,
          ...(flags.platform ? { platform: flags.platform } : {}),
          ...(flags.plainHttp ? { plainHttp: true } : {}),
          credentials,
          ...(hostsDir ? { hostsDir } : {}),
          ...(inflater ? { inflater } : {}),
          ...(unpackConcurrency !== undefined ? { unpackConcurrency } : {}),
          ...(threads ? {} : { threads: false }),
          ...(onProgress ? { onProgress } : {}),
        });
        results.push(r);
        if (flags.quiet) writeLine(io.stdout, `${r.image.name}@${r.image.manifest.digest}`);
      }
      if (flags.json) {
        const store = openStore(flags.root);
        writeJSON(
          io.stdout,
          await Promise.all(
            results.map(async (r) => ({
              ...r.image,
              root: store.root,
              snapshots: r.image.layers.map((l) => store.snapshots.fsPath(l.chainID)),
              mounts: await store.snapshots.mounts(r.image.layers.map((l) => l.chainID)),
              timings: r.timings,
            })),
          ),
        );
      } else if (!flags.quiet) {
        const store = openStore(flags.root);
        for (const r of results) {
          const top = r.image.layers[r.image.layers.length - 1]!;
          writeLine(io.stdout, `pulled ${r.image.name} (${r.image.manifest.digest}) in ${(r.timings.totalMs / 1000).toFixed(2)}s`);
          writeLine(io.stdout, `  top snapshot ${store.snapshots.fsPath(top.chainID)}`);
          writeLine(io.stdout, `  mount with: fastpull mounts --root ${store.root} ${r.image.name}`);
        }
      }
    });
}

function renderEvent(io: CliIO, e: PullEvent): void {
  switch (e.type) {
    case 'resolved':
      writeLine(io.stderr, `${e.name}: resolved ${e.manifest} (${e.platform.os}/${e.platform.architecture}${e.platform.variant ? `/${e.platform.variant}` : ''}), ${e.layers.length} layers`);
      break;
    case 'layer':
      if (e.state === 'committed' || e.state === 'exists') {
        writeLine(io.stderr, `  ${shortDigest(e.digest)}: ${e.state === 'exists' ? 'already exists' : 'unpacked'} (${formatBytes(e.total)})`);
      }
      break;
    case 'done':
      break;
  }
}

function positiveInt(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new FastpullError('INVALID_ARGUMENT', `${flag} ${JSON.stringify(value)}: want a positive integer`);
  return n;
}

/**
 * Credentials from Docker's config.json (auths, credsStore, credHelpers), as `docker pull` finds
 * them. Like the Docker CLI, a credential helper that fails does not stop a pull: it goes on
 * anonymously after one warning (which never holds a secret).
 */
function cliCredentials(io: CliIO): CredentialsProvider {
  const provider = dockerConfigCredentials({ env: io.env });
  const warned = new Set<string>();
  return async (registry) => {
    try {
      return await provider(registry);
    } catch (e) {
      if (!warned.has(registry)) {
        warned.add(registry);
        writeLine(io.stderr, `fastpull: warning: no credentials for ${registry}: ${e instanceof Error ? e.message : String(e)}`);
      }
      return undefined;
    }
  };
}
