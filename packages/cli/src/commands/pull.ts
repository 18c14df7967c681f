// `fastpull pull REF...`: pull images into the store, showing progress, and say where they landed.
import { writeFile } from 'node:fs/promises';
import { Command } from 'commander';
import {
  asFastpullError,
  DEFAULT_CHUNK_SIZE,
  DEFAULT_CONCURRENCY,
  enterBackground,
  inflaterFromEnv,
  isFastpullError,
  LocalService,
  parseChunkSize,
  parseInflaterChoice,
  parsePlatform,
  parseCpuBudget,
  parsePositiveDuration,
  parsePositiveInt,
  parsePullPriority,
  parseRateLimit,
  CONTAINERD_HOSTS_DIR,
  SIGNATURE_ENV,
  verdictLine,
  type Credentials,
  type FastpullService,
  type PulledImage,
  type PullEvent,
  type ServicePullOptions,
  type TraceDocument,
} from '@fastpull/core';
import { doing, UsageError } from '../errors.js';
import { asUsageError, colorEnabled, writeJSONLine, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { LiveProgress, LogProgress } from '../progress.js';
import { addressOption } from '../remote.js';
import { canonicalName } from '../refs.js';
import { signatureSettings, withService, type LocalTuning } from '../service.js';
import { jsonTimings, timingsLines } from '../timings.js';

/** `fastpull pull`'s flags as commander gives them. */
export interface PullFlags {
  root: string;
  platform?: string;
  plainHttp?: boolean;
  json?: boolean;
  quiet?: boolean;
  timings?: boolean;
  creds?: string;
  concurrency?: string;
  chunkSize?: string;
  metadataTimeout?: string;
  inflater?: string;
  unpackConcurrency?: string;
  cpuBudget?: string;
  hostsDir?: string;
  keepBlobs?: boolean;
  sync?: boolean;
  address?: string;
  trace?: string;
  signaturePolicy?: string;
  notationConfig?: string;
  priority?: string;
  background?: boolean;
  rateLimit?: string;
}

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
    .option(
      '--hosts-dir <dir>',
      `registry mirrors as containerd's certs.d hosts.toml files (env FASTPULL_HOSTS_DIR; default ${CONTAINERD_HOSTS_DIR} when it exists)`,
    )
    .option('--concurrency <n>', `range requests in flight for this pull (default: the shared scheduler, ${DEFAULT_CONCURRENCY})`)
    .option('--chunk-size <size>', `bytes per range request, e.g. 16MiB, 8M, 1048576 (default ${DEFAULT_CHUNK_SIZE / 1024 ** 2}MiB; at least 64KiB)`)
    .option(
      '--metadata-timeout <duration>',
      'fail when a manifest, index, config or referrers list is not read whole within this long, retries included, e.g. 30s, 2m (default 2m)',
    )
    .option('--unpack-concurrency <n>', 'layers unpacked at once (default: one per two cores, at most 4; a layer waiting for its download lends its slot)')
    .option(
      '--cpu-budget <cores>',
      'whole cores this pull may keep busy: every thread of the process is confined to that many of its CPUs (default: all it may use, bounded by its cgroup CPU quota and cpuset)',
    )
    .option(
      '--inflater <auto|isal|zlib|igzip|pigz|parallel>',
      'gzip decoder; auto is isal (ISA-L in process) where built, else zlib; igzip and pigz run as programs; parallel spreads one layer over several threads (env FASTPULL_INFLATER)',
    )
    .option('-q, --quiet', 'print only the manifest digest of each image, one per line')
    .addOption(jsonOption('print one JSON event per line; the last line of each image is {"type":"done",...}'))
    .option('--timings', 'print how long each phase took, per layer and in all')
    .option(
      '--trace <file>',
      'write the pull as a Chrome trace-event JSON file (open it in Perfetto or chrome://tracing): a track per layer with its range requests, one per unpack worker, byte, network and memory counters (with --address, recorded by fastpulld)',
    )
    .option(
      '--keep-blobs',
      'keep the compressed layer blobs after unpacking (default: drop them, so an image takes its unpacked size only; env FASTPULL_KEEP_BLOBS=1)',
    )
    .option(
      '--signature-policy <file>',
      `verify signatures before recording the image, by a containers policy.json's sigstoreSigned requirements (env ${SIGNATURE_ENV.signaturePolicy}; default: off)`,
    )
    .option(
      '--notation-config <dir>',
      `verify Notary Project signatures by the trustpolicy.json and truststore/ in DIR (env ${SIGNATURE_ENV.notationConfig}; default: off)`,
    )
    .option(
      '--priority <high|normal|low>',
      "how urgent the pull is among fastpulld's pulls: waiting range requests and unpack passes of a higher priority go first, and a low pull starts no layer while a pull above it runs (default normal)",
    )
    .option(
      '--background',
      "pull at low priority (--priority low); in this process (no fastpulld), also at nice 19 and in the idle I/O class, so the node's other work goes first",
    )
    .option(
      '--rate-limit <rate>',
      "bytes per second this pull may read from registries, e.g. 50MiB, 1.5GB, 800KiB (0 or none: no limit; default none); with fastpulld, it only lowers the daemon's rate_limit",
    )
    .option('--no-sync', 'UNSAFE: commit snapshots without flushing their files to disk; a power cut may leave them short (env FASTPULL_NO_SYNC=1)')
    .addOption(addressOption());
  return withExample(command, [
    'fastpull pull ubuntu:24.04',
    'fastpull pull --plain-http --root /tmp/store 127.0.0.1:5000/app:1',
    'fastpull pull --json --platform linux/arm64 app:1 > events.jsonl',
  ]).action((refs: string[], flags: PullFlags) => pullAll(io, signal, command, refs, flags));
}

/** `fastpull pull REF...`: each reference in turn, through one service. */
async function pullAll(io: CliIO, signal: AbortSignal, command: Command, refs: string[], flags: PullFlags): Promise<void> {
  if (flags.trace !== undefined && refs.length > 1) throw new UsageError('--trace: one reference at a time (the file holds one pull)');
  const { tuning, options } = pullSettings(io, flags);
  await withService(
    io,
    flags,
    command,
    async (service) => {
      // Pulled here, the whole process steps back; fastpulld orders its pulls by the priority sent.
      if (options.priority === 'low' && service instanceof LocalService) enterBackground();
      for (const ref of refs) {
        await doing(`pulling ${canonicalName(ref)}`, async () => {
          const r = await pullOne(io, ref, flags, service, { ...options, signal });
          report(io, ref, r, flags);
        });
      }
    },
    tuning,
  );
}

/** Every flag checked and turned into the service's settings and the pull's options before anything is fetched. */
export function pullSettings(io: CliIO, flags: PullFlags): { tuning: LocalTuning; options: ServicePullOptions } {
  if (flags.json && flags.quiet) throw new UsageError('--json and --quiet do not go together');
  if (flags.trace !== undefined && flags.trace === '') throw new UsageError('--trace: want a file name');
  if (flags.platform !== undefined) {
    try {
      parsePlatform(flags.platform);
    } catch (e) {
      throw new UsageError(`--platform: ${isFastpullError(e) ? e.message : String(e)}`);
    }
  }
  const inflater = asUsageError(() => (flags.inflater !== undefined ? parseInflaterChoice(flags.inflater, '--inflater') : undefined));
  // FASTPULL_INFLATER is read by openService for a pull in this process; checked here, before any work.
  asUsageError(() => inflaterFromEnv(io.env));
  const tuning: LocalTuning = {
    ...(flags.hostsDir !== undefined ? { hostsDir: flags.hostsDir } : {}),
    ...(flags.concurrency !== undefined ? { concurrency: asUsageError(() => parsePositiveInt(flags.concurrency, '--concurrency')) } : {}),
    ...(flags.chunkSize !== undefined ? { chunkSize: asUsageError(() => parseChunkSize(flags.chunkSize, '--chunk-size')) } : {}),
    ...(flags.metadataTimeout !== undefined
      ? { metadataTimeoutMs: asUsageError(() => parsePositiveDuration(flags.metadataTimeout, '--metadata-timeout')) }
      : {}),
    ...(flags.unpackConcurrency !== undefined
      ? { unpackConcurrency: asUsageError(() => parsePositiveInt(flags.unpackConcurrency, '--unpack-concurrency')) }
      : {}),
    ...(inflater ? { inflater } : {}),
    ...(flags.cpuBudget !== undefined ? { cpuBudget: asUsageError(() => parseCpuBudget(flags.cpuBudget, '--cpu-budget')) } : {}),
    ...(flags.sync === false ? { sync: false } : {}),
    // From the environment too: a policy asked for must never be dropped by a pull that goes to fastpulld.
    ...signatureSettings(io, {
      ...(flags.signaturePolicy !== undefined ? { signaturePolicy: nonEmpty(flags.signaturePolicy, '--signature-policy') } : {}),
      ...(flags.notationConfig !== undefined ? { notationConfig: nonEmpty(flags.notationConfig, '--notation-config') } : {}),
    }),
  };
  const credentials = givenCredentials(flags.creds);
  const priority = pullPriority(flags);
  const rateLimit = flags.rateLimit !== undefined ? asUsageError(() => parseRateLimit(flags.rateLimit, '--rate-limit')) : 0;
  const options: ServicePullOptions = {
    ...(priority ? { priority } : {}),
    // Here the whole process is held to it (tuning); fastpulld holds this pull's unpack work to it.
    ...(tuning.cpuBudget !== undefined ? { cpuBudget: tuning.cpuBudget } : {}),
    ...(rateLimit > 0 ? { rateLimit } : {}),
    ...(flags.platform ? { platform: flags.platform } : {}),
    ...(flags.plainHttp ? { plainHttp: true } : {}),
    ...(flags.keepBlobs === true || io.env.FASTPULL_KEEP_BLOBS === '1' ? { keepBlobs: true } : {}),
    ...(credentials ? { credentials } : {}),
  };
  return { tuning, options };
}

/** --priority, or --background (low); both only when they agree. */
function pullPriority(flags: Pick<PullFlags, 'priority' | 'background'>): ServicePullOptions['priority'] {
  const named = flags.priority !== undefined ? asUsageError(() => parsePullPriority(flags.priority, '--priority')) : undefined;
  if (flags.background === true && named !== undefined && named !== 'low')
    throw new UsageError(`--background is --priority low; it does not go with --priority ${named}`);
  return flags.background === true ? 'low' : named;
}

/** A path flag's value, refused when empty (an empty policy path would silently mean no verification). */
export function nonEmpty(value: string, flag: string): string {
  if (value === '') throw new UsageError(`${flag}: want a path`);
  return value;
}

/**
 * `--creds user:password`, for the registry of each reference pulled and nothing else (a mirror is
 * asked about under its own host name, so it never gets them). The password is never printed.
 */
export function givenCredentials(creds: string | undefined): Credentials | undefined {
  if (creds === undefined) return undefined;
  const colon = creds.indexOf(':');
  if (colon <= 0) throw new UsageError('--creds: want user:password (the user name may not be empty)');
  return { username: creds.slice(0, colon), password: creds.slice(colon + 1) };
}

async function pullOne(io: CliIO, ref: string, flags: PullFlags, service: FastpullService, options: ServicePullOptions): Promise<PulledImage> {
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
  // Recorded where the pull runs (this process, or fastpulld, which sends it back): written here.
  let trace: TraceDocument | undefined;
  const onTrace = flags.trace !== undefined ? (t: TraceDocument) => void (trace = t) : undefined;
  try {
    return await service.pull(ref, { ...options, ...(onProgress ? { onProgress } : {}), ...(onTrace ? { onTrace } : {}) });
  } catch (e) {
    if (flags.json) {
      const fe = asFastpullError(e).toJSON();
      writeJSONLine(io.stdout, { type: 'error', ref, ...fe });
    }
    throw e;
  } finally {
    if (timer) clearInterval(timer);
    live?.finish();
    // Written for a failed pull too: its spans show where it stopped.
    const doc = trace;
    if (doc) await doing(`writing the trace to ${flags.trace}`, () => writeFile(flags.trace!, JSON.stringify(doc) + '\n'));
  }
}

function report(io: CliIO, ref: string, r: PulledImage, flags: PullFlags): void {
  if (flags.quiet) {
    writeLine(io.stdout, r.image.manifest.digest);
    return;
  }
  const { root, snapshots, mounts } = r;
  if (flags.json) {
    writeJSONLine(io.stdout, { type: 'done', ref, image: r.image, root, snapshots, mounts, timings: jsonTimings(r.timings) });
    return;
  }
  writeLine(io.stdout, `pulled ${r.image.name} (${r.image.manifest.digest}) in ${(r.timings.totalMs / 1000).toFixed(2)}s`);
  writeLine(io.stdout, `  top snapshot ${snapshots[snapshots.length - 1]}`);
  for (const v of r.image.signatures?.verdicts ?? []) writeLine(io.stdout, `  signature: ${verdictLine(v)}`);
  writeLine(io.stdout, `  mount with: fastpull mounts --root ${root} ${r.image.name}`);
  if (flags.timings) for (const line of timingsLines(r.timings)) writeLine(io.stdout, `  ${line}`);
}
