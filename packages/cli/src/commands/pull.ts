// `fastpull pull REF...`: pull images into the store, showing progress, and say where they landed.
import { existsSync } from 'node:fs';
import { Command } from 'commander';
import {
  dockerConfigCredentials,
  inflaterFromEnv,
  isFastpullError,
  openStore,
  parseInflaterChoice,
  parsePlatform,
  parseReference,
  pull,
  type Credentials,
  type CredentialsProvider,
  type Mount,
  type PullEvent,
  type PullResult,
} from '@fastpull/core';
import { doing, UsageError } from '../errors.js';
import { colorEnabled, parsePositiveInt, parseSize, writeJSONLine, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { LiveProgress, LogProgress } from '../progress.js';
import { addressOption, daemonAddress, withDaemon } from '../remote.js';
import { canonicalName } from '../refs.js';
import { timingsLines } from '../timings.js';

interface PullFlags {
  root: string;
  platform?: string;
  plainHttp?: boolean;
  json?: boolean;
  quiet?: boolean;
  timings?: boolean;
  creds?: string;
  concurrency?: string;
  chunkSize?: string;
  inflater?: string;
  unpackConcurrency?: string;
  hostsDir?: string;
  keepBlobs?: boolean;
  sync?: boolean;
  address?: string;
}

/** Where a pulled image lies: the store root, its snapshot directories, its mounts. */
interface Placement {
  readonly root: string;
  readonly snapshots: readonly string[];
  readonly mounts: readonly Mount[];
}

/** Flags that tune the puller itself: with a daemon, its configuration decides them. */
const DAEMON_TUNED = ['hostsDir', 'concurrency', 'chunkSize', 'unpackConcurrency', 'inflater'] as const;

/** Where containerd nodes keep registry host configuration (Spegel and Dragonfly write there). */
const CONTAINERD_HOSTS_DIR = '/etc/containerd/certs.d';
/** Milliseconds between redraws of the live view when no event comes (rates and ETAs keep moving). */
const LIVE_TICK_MS = 100;

export function pullCommand(io: CliIO, signal: AbortSignal): Command {
  const command = new Command('pull')
    .description('pull images and unpack them into overlay snapshots')
    .argument('<ref...>', 'image references, e.g. ubuntu:24.04 or 127.0.0.1:5000/app@sha256:...')
    .addOption(rootOption(io.env))
    .option('--platform <os/arch[/variant]>', 'platform to pull from a multi-platform image (default: this host)')
    .option('--plain-http', 'talk to registries over plain HTTP (loopback registries always may)')
    .option('--creds <user:password>', 'credentials for the registry of the references (only that host; before Docker config)')
    .option('--hosts-dir <dir>', `registry mirrors as containerd's certs.d hosts.toml files (env FASTPULL_HOSTS_DIR; default ${CONTAINERD_HOSTS_DIR} when it exists)`)
    .option('--concurrency <n>', 'range requests in flight for this pull (default: the shared scheduler)')
    .option('--chunk-size <size>', 'bytes per range request, e.g. 16MiB, 8M, 1048576 (default 16MiB; at least 64KiB)')
    .option('--unpack-concurrency <n>', 'layers unpacked at once (default: one per core)')
    .option('--inflater <auto|igzip|pigz|zlib>', 'gzip decoder; auto uses igzip when installed (env FASTPULL_INFLATER)')
    .option('-q, --quiet', 'print only the manifest digest of each image, one per line')
    .addOption(jsonOption('print one JSON event per line; the last line of each image is {"type":"done",...}'))
    .option('--timings', 'print how long each phase took, per layer and in all')
    .option('--keep-blobs', 'keep the compressed layer blobs after unpacking (default: drop them, so an image takes its unpacked size only; env FASTPULL_KEEP_BLOBS=1)')
    .option('--no-sync', 'UNSAFE: commit snapshots without flushing their files to disk; a power cut may leave them short (env FASTPULL_NO_SYNC=1)')
    .addOption(addressOption());
  return withExample(command, ['fastpull pull ubuntu:24.04', 'fastpull pull --plain-http --root /tmp/store 127.0.0.1:5000/app:1', 'fastpull pull --json --platform linux/arm64 app:1 > events.jsonl']).action(
    async (refs: string[], flags: PullFlags) => {
      const options = pullOptions(io, refs, flags);
      // The default socket is used only when nothing asks for a pull of this process's own.
      const tuned = DAEMON_TUNED.some((k) => flags[k] !== undefined) || flags.sync === false;
      const address = daemonAddress(io, flags, tuned ? undefined : command);
      if (address) {
        if (flags.sync === false) throw new UsageError('--no-sync is fastpulld\'s configuration (sync = false); it does not go with --address');
        for (const k of DAEMON_TUNED) {
          if (flags[k] !== undefined) throw new UsageError(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is fastpulld's configuration; it does not go with --address`);
        }
        const creds = remoteCredentials(flags.creds);
        await withDaemon(address, async (client) => {
          for (const ref of refs) {
            await doing(`pulling ${canonicalName(ref)}`, async () => {
              const r = await pullOne(io, ref, flags, (onProgress) =>
                client.pull(ref, {
                  ...(flags.platform ? { platform: flags.platform } : {}),
                  ...(flags.plainHttp ? { plainHttp: true } : {}),
                  ...(options.keepBlobs ? { keepBlobs: true } : {}),
                  ...(creds ? { credentials: creds } : {}),
                  signal,
                  ...(onProgress ? { onProgress } : {}),
                }),
              );
              await report(io, ref, r, r, flags);
            });
          }
        });
        return;
      }
      for (const ref of refs) {
        await doing(`pulling ${canonicalName(ref)}`, async () => {
          const r = await pullOne(io, ref, flags, (onProgress) => pull(ref, { ...options, signal, ...(onProgress ? { onProgress } : {}) }));
          await report(io, ref, r, await localPlacement(flags.root, r), flags);
        });
      }
    },
  );
}

type CommonOptions = Omit<Parameters<typeof pull>[1], 'signal' | 'onProgress'>;

/** Every flag checked and turned into pull options before anything is fetched. */
function pullOptions(io: CliIO, refs: readonly string[], flags: PullFlags): CommonOptions {
  if (flags.json && flags.quiet) throw new UsageError('--json and --quiet do not go together');
  if (flags.platform !== undefined) {
    try {
      parsePlatform(flags.platform);
    } catch (e) {
      throw new UsageError(`--platform: ${isFastpullError(e) ? e.message : String(e)}`);
    }
  }
  let inflater = undefined;
  try {
    inflater = flags.inflater !== undefined ? parseInflaterChoice(flags.inflater, '--inflater') : inflaterFromEnv(io.env);
  } catch (e) {
    throw new UsageError(isFastpullError(e) ? e.message : String(e));
  }
  const unpackConcurrency = flags.unpackConcurrency !== undefined ? parsePositiveInt(flags.unpackConcurrency, '--unpack-concurrency') : undefined;
  const maxConnections = flags.concurrency !== undefined ? parsePositiveInt(flags.concurrency, '--concurrency') : undefined;
  const chunkSize = flags.chunkSize !== undefined ? parseSize(flags.chunkSize, '--chunk-size') : undefined;
  if (chunkSize !== undefined && chunkSize < 64 * 1024) throw new UsageError(`--chunk-size ${JSON.stringify(flags.chunkSize)}: want at least 64KiB`);
  const hostsDir = flags.hostsDir ?? (io.env.FASTPULL_HOSTS_DIR || (existsSync(CONTAINERD_HOSTS_DIR) ? CONTAINERD_HOSTS_DIR : undefined));
  return {
    root: flags.root,
    ...(flags.platform ? { platform: flags.platform } : {}),
    ...(flags.plainHttp ? { plainHttp: true } : {}),
    credentials: cliCredentials(io, refs, flags.creds),
    ...(hostsDir ? { hostsDir } : {}),
    ...(inflater ? { inflater } : {}),
    ...(unpackConcurrency !== undefined ? { unpackConcurrency } : {}),
    ...(maxConnections !== undefined ? { maxConnections } : {}),
    ...(chunkSize !== undefined ? { chunkSize } : {}),
    ...(flags.keepBlobs === true || io.env.FASTPULL_KEEP_BLOBS === '1' ? { keepBlobs: true } : {}),
    ...(flags.sync === false || io.env.FASTPULL_NO_SYNC === '1' ? { sync: false } : {}),
    // FASTPULL_THREADS=0 keeps unpacking on the main thread (for comparison and debugging).
    ...(io.env.FASTPULL_THREADS === '0' ? { threads: false } : {}),
  };
}

/** --creds for the daemon to use with the references' registry (it has its own Docker config for the rest). */
function remoteCredentials(creds: string | undefined): Credentials | undefined {
  if (creds === undefined) return undefined;
  const colon = creds.indexOf(':');
  if (colon <= 0) throw new UsageError('--creds: want user:password (the user name may not be empty)');
  return { username: creds.slice(0, colon), password: creds.slice(colon + 1) };
}

async function pullOne<R extends PullResult>(io: CliIO, ref: string, flags: PullFlags, run: (onProgress: ((e: PullEvent) => void) | undefined) => Promise<R>): Promise<R> {
  const now = () => performance.now();
  let onProgress: ((e: PullEvent) => void) | undefined;
  let live: LiveProgress | undefined;
  let timer: NodeJS.Timeout | undefined;
  if (flags.json) {
    // The final event is written by report(), with where the image landed.
    onProgress = (e) => {
      if (e.type !== 'done') writeJSONLine(io.stdout, { ...e, ref });
    };
  } else if (!flags.quiet && io.stderr.isTTY) {
    live = new LiveProgress({ out: io.stderr, now, color: colorEnabled(io, io.stderr), ...(io.stderr.columns ? { columns: io.stderr.columns } : {}) });
    onProgress = (e) => live!.event(e);
    timer = setInterval(() => live!.tick(), LIVE_TICK_MS);
    timer.unref();
  } else if (!flags.quiet) {
    const log = new LogProgress(io.stderr, now);
    onProgress = (e) => log.event(e);
  }
  try {
    return await run(onProgress);
  } catch (e) {
    if (flags.json) {
      const fe = isFastpullError(e) ? e.toJSON() : { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e), details: {} };
      writeJSONLine(io.stdout, { type: 'error', ref, ...fe });
    }
    throw e;
  } finally {
    if (timer) clearInterval(timer);
    live?.finish();
  }
}

async function localPlacement(root: string, r: PullResult): Promise<Placement> {
  const store = openStore(root);
  const chain = r.image.layers.map((l) => l.chainID);
  return { root: store.root, snapshots: chain.map((id) => store.snapshots.fsPath(id)), mounts: await store.snapshots.mounts(chain) };
}

async function report(io: CliIO, ref: string, r: PullResult, where: Placement, flags: PullFlags): Promise<void> {
  if (flags.quiet) {
    writeLine(io.stdout, r.image.manifest.digest);
    return;
  }
  const { root, snapshots, mounts } = where;
  if (flags.json) {
    writeJSONLine(io.stdout, { type: 'done', ref, image: r.image, root, snapshots, mounts, timings: r.timings });
    return;
  }
  writeLine(io.stdout, `pulled ${r.image.name} (${r.image.manifest.digest}) in ${(r.timings.totalMs / 1000).toFixed(2)}s`);
  writeLine(io.stdout, `  top snapshot ${snapshots[snapshots.length - 1]}`);
  writeLine(io.stdout, `  mount with: fastpull mounts --root ${root} ${r.image.name}`);
  if (flags.timings) for (const line of timingsLines(r.timings)) writeLine(io.stdout, `  ${line}`);
}

/**
 * `--creds user:password` for the registries of the references being pulled, and nothing else (a
 * mirror is asked about under its own host name, so it never gets them); every other registry gets
 * what Docker's config.json holds for it. The password is never printed, not even in an error.
 */
export function cliCredentials(io: CliIO, refs: readonly string[], creds: string | undefined): CredentialsProvider {
  const docker = dockerConfigProvider(io);
  if (creds === undefined) return docker;
  const colon = creds.indexOf(':');
  if (colon <= 0) throw new UsageError('--creds: want user:password (the user name may not be empty)');
  const given: Credentials = { username: creds.slice(0, colon), password: creds.slice(colon + 1) };
  const registries = new Set<string>();
  for (const ref of refs) {
    try {
      registries.add(parseReference(ref).registry);
    } catch {
      // The pull of this reference fails on its own.
    }
  }
  return (registry) => (registries.has(registry) ? given : docker(registry));
}

/**
 * Credentials from Docker's config.json (auths, credsStore, credHelpers), as `docker pull` finds
 * them. Like the Docker CLI, a credential helper that fails does not stop a pull: it goes on
 * anonymously after one warning (which never holds a secret).
 */
function dockerConfigProvider(io: CliIO): CredentialsProvider {
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
