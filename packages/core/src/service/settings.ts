// Settings every front end shares: one parser and one default for each, so the CLI's flags, the
// daemon's config keys and the library's options can never disagree (a test compares them). The
// defaults that belong to the part they tune (chunk size, scheduler, pool, decoder) are named here,
// so a front end reads them from one place.
import { existsSync } from 'node:fs';
import { FastpullError } from '../errors.js';
import { DEFAULT_CHUNK_SIZE } from '../registry/fetch.js';
import { parseGoDuration } from '../registry/hostsconfig.js';
import { DEFAULT_MAX_REQUESTS } from '../registry/scheduler.js';
import { DEFAULT_INFLATER, INFLATER_CHOICES, parseInflaterChoice, type InflaterChoice } from '../unpack/decompress/inflater.js';
import { sharedUnpackPool } from '../unpack/pool/pool.js';

export { defaultRoot } from '../store/root.js';
export { DEFAULT_CHUNK_SIZE, DEFAULT_INFLATER, INFLATER_CHOICES, parseInflaterChoice, type InflaterChoice };

/** Range requests in flight across all pulls of a service when none is given: the shared scheduler's. */
export const DEFAULT_CONCURRENCY = DEFAULT_MAX_REQUESTS;

/** Layer blobs are dropped once unpacked unless asked: an image then takes its unpacked size only. */
export const DEFAULT_KEEP_BLOBS = false;

/** Snapshots are flushed to disk before they are committed unless asked (unsafe) not to. */
export const DEFAULT_SYNC = true;

/**
 * Layers unpacked at once across all pulls of a service when none is given: the process-wide pool's size.
 * @example defaultUnpackConcurrency() // one per two of os.availableParallelism(), at least 1
 */
export function defaultUnpackConcurrency(): number {
  return sharedUnpackPool().size;
}

/**
 * The settings a service's pulls run with, every default filled in: what `LocalService.settings`
 * reports, so that two front ends can be compared by what they do, not by what they were given.
 */
export interface ServiceSettings {
  /** The store root. */
  readonly root: string;
  /** Registry host configuration; undefined: none. */
  readonly hostsDir: string | undefined;
  /** Range requests in flight across all pulls. */
  readonly concurrency: number;
  /** Bytes per range request. */
  readonly chunkSize: number;
  /** Layers unpacked at once across all pulls. */
  readonly unpackConcurrency: number;
  /** The gzip decoder asked for. */
  readonly inflater: InflaterChoice;
  /** Whether every pull keeps its layer blobs (a pull may also ask for it). */
  readonly keepBlobs: boolean;
  /** Whether snapshots are flushed before they are committed. */
  readonly sync: boolean;
  /** Cores the whole process is held to (see applyCpuBudget); undefined: none given. */
  readonly cpuBudget: number | undefined;
  /** Milliseconds a manifest, index, config or referrers list may take to read, retries included. */
  readonly metadataTimeoutMs: number;
  /** Bytes per second all pulls together may read from registries; 0: no limit. */
  readonly rateLimit: number;
}

/** Where containerd nodes keep registry host configuration; Spegel and Dragonfly write there. */
export const CONTAINERD_HOSTS_DIR = '/etc/containerd/certs.d';

/** The smallest range worth a request: below it, request overhead outweighs the parallelism. */
export const MIN_CHUNK_SIZE = 64 * 1024;

/** A day: the longest duration a setting takes, well inside what a Node timer holds (2^31-1 ms). */
export const MAX_DURATION_MS = 24 * 3_600_000;

/**
 * The registry host configuration directory when none is given: `$FASTPULL_HOSTS_DIR`, else
 * containerd's `/etc/containerd/certs.d` when it exists (a node configured for containerd's mirrors
 * gets the same mirrors), else none.
 * @example defaultHostsDir({ FASTPULL_HOSTS_DIR: '/etc/fastpull/certs.d' }) // '/etc/fastpull/certs.d'
 */
export function defaultHostsDir(env: NodeJS.ProcessEnv = process.env, exists: (path: string) => boolean = existsSync): string | undefined {
  if (env.FASTPULL_HOSTS_DIR) return env.FASTPULL_HOSTS_DIR;
  return exists(CONTAINERD_HOSTS_DIR) ? CONTAINERD_HOSTS_DIR : undefined;
}

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
};

/**
 * A byte count as people write it: 1048576, "1048576", "8M", "16MiB", "512k", "1.5GiB". K, M, G and
 * the -iB forms are powers of 1024 (as `docker run --memory` reads them); kB, MB, GB are powers of
 * 1000. Throws INVALID_ARGUMENT naming `what` on anything else.
 * @example parseSize('16MiB', '--chunk-size') // 16777216
 */
export function parseSize(value: unknown, what: string): number {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value > 0) return value;
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${value}: want a positive whole number of bytes`);
  }
  const m = typeof value === 'string' ? /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value) : null;
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want a whole number of bytes, e.g. 1048576, 8M or 16MiB`);
  }
  return n;
}

/**
 * A network rate limit in bytes per second, as people write it: a size as {@link parseSize} reads
 * it ("50MiB", "1.5GB", "800KiB", 1048576; a fraction of a byte is rounded), "/s" after it allowed;
 * 0, "0", "none" or "" mean no limit, returned as 0. INVALID_ARGUMENT naming `what` otherwise.
 * @example parseRateLimit('50MiB', '--rate-limit') // 52428800
 */
export function parseRateLimit(value: unknown, what: string): number {
  if (value === 0) return 0;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return value;
  const text =
    typeof value === 'string'
      ? value
          .trim()
          .toLowerCase()
          .replace(/\s*\/\s*s$/, '')
      : undefined;
  if (text === '' || text === 'none') return 0;
  const m = text !== undefined ? /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(text) : null;
  const unit = m ? SIZE_UNITS[m[2]!] : undefined;
  const n = m && unit !== undefined ? Math.round(Number(m[1]) * unit) : NaN;
  if (n === 0 && Number(m![1]) === 0) return 0;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want bytes per second such as 50MiB, 1.5GB or 800KiB (0 or none: no limit)`);
  }
  return n;
}

/**
 * A range size: a size of at least {@link MIN_CHUNK_SIZE}.
 * @example parseChunkSize('8M', 'chunk_size') // 8388608
 */
export function parseChunkSize(value: unknown, what: string): number {
  const n = parseSize(value, what);
  if (n < MIN_CHUNK_SIZE) throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want at least 64KiB`);
  return n;
}

/**
 * A duration in milliseconds: a bare number is seconds (TOML `shutdown_timeout = 10`); text is a Go
 * duration as containerd's files write them ("500ms", "10s", "1m30s", "1.5h"). At most a day.
 * @example parseDuration('1m30s', 'shutdown_timeout') // 90000
 */
export function parseDuration(value: unknown, what: string): number {
  let ms: number | undefined;
  if (typeof value === 'number') ms = Number.isFinite(value) && value >= 0 ? value * 1000 : undefined;
  else if (typeof value === 'string') {
    const text = value.trim();
    ms = /^\d+(?:\.\d+)?$/.test(text) ? Number(text) * 1000 : parseGoDuration(text);
  }
  if (ms === undefined) throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want a duration such as 10s, 500ms or 1m30s`);
  if (ms > MAX_DURATION_MS) throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want at most a day (24h)`);
  return ms;
}

/**
 * A duration as {@link parseDuration} reads it, that must be more than nothing (a deadline, a timeout).
 * @example parsePositiveDuration('30s', '--metadata-timeout') // 30000
 */
export function parsePositiveDuration(value: unknown, what: string): number {
  const ms = parseDuration(value, what);
  if (!(ms > 0)) throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want a duration above zero, such as 10s`);
  return ms;
}

/**
 * A positive integer, from a number or its decimal text.
 * @example parsePositiveInt('16', '--concurrency') // 16
 */
export function parsePositiveInt(value: unknown, what: string): number {
  const n = typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(value)}: want a positive integer`);
  return n;
}

/** A value as an error shows it: JSON where it has one (a TOML table has no prototype, so no String()). */
function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}
