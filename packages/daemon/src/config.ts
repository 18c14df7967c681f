// fastpulld's configuration: a TOML file (every key optional) overridden by flags. The defaults the CLI
// shares come from @fastpull/core's settings; the daemon's own live here, each with its reason;
// docs/daemon.md lists them.
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import {
  defaultHostsDir,
  defaultRoot,
  FastpullError,
  inflaterFromEnv,
  INFLATER_CHOICES,
  parseChunkSize,
  parseCpuBudget,
  parseInflaterChoice,
  parseDuration as parseDurationSetting,
  parsePositiveDuration,
  parsePositiveInt,
  parseRateLimit,
  parseSize as parseSizeSetting,
  SIGNATURE_ENV,
  type InflaterChoice,
  type LocalServiceOptions,
  type SignatureSettings,
} from '@fastpull/core';
import { resolveGunzip } from '@fastpull/core/unpack';

export interface DaemonConfig {
  /** The one store every pull writes into. */
  readonly root: string;
  /** The unix socket the API listens on. */
  readonly socket: string;
  /** The unix socket of containerd's snapshotter API; unset: not served. */
  readonly snapshotterSocket?: string;
  /**
   * containerd's gRPC socket: once serving, fastpulld has containerd announce the images of CRI's
   * namespace again (see snapshotter/announce.ts); unset: not done.
   */
  readonly containerdSocket?: string;
  /** Group that owns the socket (name or numeric id); unset: the daemon's own group. */
  readonly group?: string;
  /**
   * containerd-style registry host configuration (`<dir>/<host>/hosts.toml`); reloaded on SIGHUP.
   * Unset: `$FASTPULL_HOSTS_DIR`, else /etc/containerd/certs.d when it exists, as the CLI.
   */
  readonly hostsDir?: string;
  /** Range requests in flight across all pulls; unset: the library's shared scheduler (16). */
  readonly concurrency?: number;
  /** Bytes per range request; unset: the library's default (16 MiB). */
  readonly chunkSize?: number;
  /** Keep layer blobs after unpacking for every pull (a request may also ask for it). */
  readonly keepBlobs: boolean;
  /** Flush each snapshot to disk before committing it (default true; false is unsafe against power loss). */
  readonly sync: boolean;
  /** Layers unpacked at once across all pulls (one pool they share); unset: the library's shared pool, one per two cores, at most 4. */
  readonly unpackConcurrency?: number;
  /** Whole cores the daemon's threads are confined to (reloaded on SIGHUP); unset: every CPU it was started with. */
  readonly cpuBudget?: number;
  /** Bytes per second all pulls together may read from registries (reloaded on SIGHUP); 0: no limit. */
  readonly rateLimit: number;
  /** The gzip decoder, as the CLI's --inflater; unset: $FASTPULL_INFLATER, else the library's (auto). */
  readonly inflater?: InflaterChoice;
  /**
   * A containers policy.json whose `sigstoreSigned` requirements gate every pull (reloaded on
   * SIGHUP); unset: $FASTPULL_SIGNATURE_POLICY, as the CLI; unset there too: not checked.
   */
  readonly signaturePolicy?: string;
  /**
   * A directory laid out as notation's configuration (`trustpolicy.json`, `truststore/`) whose trust
   * policy gates every pull (reloaded on SIGHUP); unset: $FASTPULL_NOTATION_CONFIG, as the CLI.
   */
  readonly notationConfig?: string;
  /** `127.0.0.1:PORT` (or `[::1]:PORT`, `localhost:PORT`) to serve Prometheus metrics and the /livez and /readyz probes on; unset: no HTTP endpoint. */
  readonly metricsAddress?: string;
  /** Bytes the store's disk must have free for the daemon to report SERVING; 0: no floor. */
  readonly minFreeSpace: number;
  /** Milliseconds between periodic health checks; 0: only on demand (/readyz, SIGHUP). */
  readonly healthIntervalMs: number;
  /** pino level: fatal, error, warn, info, debug, trace or silent. */
  readonly logLevel: string;
  /** Milliseconds SIGTERM waits for pulls to stop before the process exits anyway. */
  readonly shutdownTimeoutMs: number;
  /** Connections the API socket takes at once; the next is closed at once. */
  readonly maxConnections: number;
  /** Connections the snapshotter socket takes at once, apart from the API socket's. */
  readonly snapshotterMaxConnections: number;
  /** Milliseconds a connection of either socket may run no call before it is closed. */
  readonly connectionIdleTimeoutMs: number;
  /** Milliseconds a new connection has to complete the HTTP/2 handshake (its client preface). */
  readonly handshakeTimeoutMs: number;
  /** Milliseconds a manifest, index, config or referrers list may take to read; unset: the library's (2 min). */
  readonly metadataTimeoutMs?: number;
}

/** Where the config file is read from when --config is not given (a missing file there is fine). */
export const DEFAULT_CONFIG_PATH = '/etc/fastpull/fastpulld.toml';
/** Long enough for every pull to suspend its downloads, short of systemd's 90 s stop timeout. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
export const DEFAULT_LOG_LEVEL = 'info';
/**
 * Free space under which the store's disk counts as nearly full: below it a pull of any sizable
 * layer fails with NO_SPACE part-way, so health says so before a pull finds out.
 */
export const DEFAULT_MIN_FREE_SPACE = 1024 ** 3;
/** Often enough that a readiness probe (every 10 s in deploy/) never reads a state much older than itself. */
export const DEFAULT_HEALTH_INTERVAL_MS = 10_000;
/**
 * fastpulld's exit status for a start that no restart can mend (2, as for bad usage since the
 * first release, so scripts that test for it keep working): a bad flag,
 * config file or value, a group that does not exist, a path that cannot serve, a $NOTIFY_SOCKET it
 * cannot use. deploy/systemd/fastpulld.service names it in RestartPreventExitStatus=.
 */
export const EXIT_CONFIG = 2;
/**
 * Connections the API socket takes at once: each is a CLI command or a program of the node, so this
 * is far more than a node runs, and far fewer descriptors than the unit's LimitNOFILE.
 */
export const DEFAULT_MAX_CONNECTIONS = 512;
/**
 * The snapshotter socket's own bound, so that clients crowding the API socket never take containerd's
 * room: containerd holds one connection per proxy snapshotter, crictl and ctr reach it through containerd.
 */
export const DEFAULT_SNAPSHOTTER_MAX_CONNECTIONS = 64;
/** A connection that runs no call this long is closed; gRPC clients reconnect on their next call. */
export const DEFAULT_CONNECTION_IDLE_TIMEOUT_MS = 5 * 60_000;
/** A local client sends its preface as soon as it connects; this leaves room for a loaded node. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export { DEFAULT_CONTAINERD_SOCKET, defaultSocket, DEFAULT_SNAPSHOTTER_SOCKET, SUGGESTED_METRICS_PORT } from './paths.js';
import { DEFAULT_CONTAINERD_SOCKET, DEFAULT_SNAPSHOTTER_SOCKET, defaultSocket, SUGGESTED_METRICS_PORT } from './paths.js';

/** Config keys as written in the TOML file (and, with dashes, as flags). */
export const CONFIG_KEYS = [
  'root',
  'socket',
  'snapshotter_socket',
  'containerd_socket',
  'group',
  'hosts_dir',
  'concurrency',
  'chunk_size',
  'keep_blobs',
  'sync',
  'unpack_concurrency',
  'cpu_budget',
  'rate_limit',
  'inflater',
  'signature_policy',
  'notation_config',
  'metrics_address',
  'min_free_space',
  'health_interval',
  'log_level',
  'shutdown_timeout',
  'max_connections',
  'snapshotter_max_connections',
  'connection_idle_timeout',
  'handshake_timeout',
  'metadata_timeout',
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];

/** Raw values by key, as a TOML file or the command line gives them. */
export type RawConfig = Partial<Record<ConfigKey, unknown>>;

/** Reads a TOML config file; `required` false lets a missing file mean "all defaults". */
export function readConfigFile(path: string, required: boolean): RawConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new FastpullError('INVALID_ARGUMENT', `reading config ${path}: ${(e as Error).message}`, { cause: e });
  }
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text);
  } catch (e) {
    throw new FastpullError('INVALID_ARGUMENT', `config ${path}: ${(e as Error).message.split('\n')[0]}`, { cause: e });
  }
  for (const key of Object.keys(doc)) {
    if (!(CONFIG_KEYS as readonly string[]).includes(key)) {
      throw new FastpullError('INVALID_ARGUMENT', `config ${path}: unknown key ${JSON.stringify(key)}; known: ${CONFIG_KEYS.join(', ')}`);
    }
  }
  return doc;
}

/**
 * The configuration from the file's values overridden by the flags' (both raw), defaults for the
 * rest; every value checked. Relative paths are resolved against `cwd`.
 */
export function resolveConfig(file: RawConfig, flags: RawConfig, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): DaemonConfig {
  const raw: RawConfig = { ...file };
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) raw[k as ConfigKey] = v;
  const path = (key: ConfigKey): string | undefined => {
    const v = raw[key];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') throw invalid(key, v, 'want a path');
    return isAbsolute(v) ? v : resolve(cwd, v);
  };
  const root = path('root') ?? defaultRoot(env);
  const group = raw.group === undefined || raw.group === '' ? undefined : groupName(raw.group);
  // An explicit empty hosts_dir turns the default off.
  const hostsDir = raw.hosts_dir === '' ? undefined : (path('hosts_dir') ?? defaultHostsDir(env));
  const concurrency = raw.concurrency === undefined ? undefined : parsePositiveInt(raw.concurrency, 'concurrency');
  const unpackConcurrency = raw.unpack_concurrency === undefined ? undefined : parsePositiveInt(raw.unpack_concurrency, 'unpack_concurrency');
  const cpuBudget = raw.cpu_budget === undefined || raw.cpu_budget === '' ? undefined : parseCpuBudget(raw.cpu_budget, 'cpu_budget');
  const chunkSize = raw.chunk_size === undefined ? undefined : parseChunkSize(raw.chunk_size, 'chunk_size');
  const inflater = inflaterOf(raw.inflater, env);
  // Unset: the environment the CLI reads; "" turns verification of that kind off whatever it says.
  const orEnv = (key: ConfigKey, name: string): string | undefined => {
    const v = env[name];
    return raw[key] === undefined && v ? resolve(cwd, v) : path(key);
  };
  const signaturePolicy = orEnv('signature_policy', SIGNATURE_ENV.signaturePolicy);
  const notationConfig = orEnv('notation_config', SIGNATURE_ENV.notationConfig);
  const metricsAddress = raw.metrics_address === undefined || raw.metrics_address === '' ? undefined : loopbackAddress(raw.metrics_address);
  const logLevel = raw.log_level === undefined ? DEFAULT_LOG_LEVEL : raw.log_level;
  if (typeof logLevel !== 'string' || !LOG_LEVELS.includes(logLevel)) throw invalid('log_level', raw.log_level, `want one of ${LOG_LEVELS.join(', ')}`);
  const timeout = raw.shutdown_timeout === undefined ? undefined : parseDurationSetting(raw.shutdown_timeout, 'shutdown_timeout');
  const minFreeSpace =
    raw.min_free_space === undefined
      ? DEFAULT_MIN_FREE_SPACE
      : raw.min_free_space === 0 || raw.min_free_space === '0'
        ? 0
        : parseSizeSetting(raw.min_free_space, 'min_free_space');
  const healthIntervalMs = raw.health_interval === undefined ? DEFAULT_HEALTH_INTERVAL_MS : parseDurationSetting(raw.health_interval, 'health_interval');
  const positive = (key: ConfigKey, fallback: number): number => (raw[key] === undefined ? fallback : parsePositiveInt(raw[key], key));
  const duration = (key: ConfigKey, fallback: number): number => (raw[key] === undefined ? fallback : parsePositiveDuration(raw[key], key));
  const socket = path('socket') ?? defaultSocket(env);
  const snapshotterSocket = snapshotterSocketOf(raw.snapshotter_socket, socket, env, cwd);
  const containerdSocket = containerdSocketOf(raw.containerd_socket, snapshotterSocket, cwd);
  return {
    root,
    socket,
    ...(snapshotterSocket !== undefined ? { snapshotterSocket } : {}),
    ...(containerdSocket !== undefined ? { containerdSocket } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(hostsDir !== undefined ? { hostsDir } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(chunkSize !== undefined ? { chunkSize } : {}),
    // Unset keys read the environment the CLI reads for the same settings.
    keepBlobs: raw.keep_blobs === undefined ? env.FASTPULL_KEEP_BLOBS === '1' : bool('keep_blobs', raw.keep_blobs),
    sync: raw.sync === undefined ? env.FASTPULL_NO_SYNC !== '1' : bool('sync', raw.sync),
    ...(unpackConcurrency !== undefined ? { unpackConcurrency } : {}),
    ...(cpuBudget !== undefined ? { cpuBudget } : {}),
    rateLimit: raw.rate_limit === undefined ? 0 : parseRateLimit(raw.rate_limit, 'rate_limit'),
    ...(inflater !== undefined ? { inflater } : {}),
    ...(signaturePolicy !== undefined ? { signaturePolicy } : {}),
    ...(notationConfig !== undefined ? { notationConfig } : {}),
    ...(metricsAddress !== undefined ? { metricsAddress } : {}),
    minFreeSpace,
    healthIntervalMs,
    logLevel,
    shutdownTimeoutMs: timeout ?? DEFAULT_SHUTDOWN_TIMEOUT_MS,
    maxConnections: positive('max_connections', DEFAULT_MAX_CONNECTIONS),
    snapshotterMaxConnections: positive('snapshotter_max_connections', DEFAULT_SNAPSHOTTER_MAX_CONNECTIONS),
    connectionIdleTimeoutMs: duration('connection_idle_timeout', DEFAULT_CONNECTION_IDLE_TIMEOUT_MS),
    handshakeTimeoutMs: duration('handshake_timeout', DEFAULT_HANDSHAKE_TIMEOUT_MS),
    ...(raw.metadata_timeout !== undefined ? { metadataTimeoutMs: parsePositiveDuration(raw.metadata_timeout, 'metadata_timeout') } : {}),
  };
}

/**
 * The settings of the daemon's service: what the configuration gives, the library's defaults (the
 * CLI's too) for the rest.
 */
export function serviceOptions(config: DaemonConfig): LocalServiceOptions {
  return {
    root: config.root,
    ...(config.hostsDir !== undefined ? { hostsDir: config.hostsDir } : {}),
    ...(config.concurrency !== undefined ? { concurrency: config.concurrency } : {}),
    ...(config.chunkSize !== undefined ? { chunkSize: config.chunkSize } : {}),
    ...(config.metadataTimeoutMs !== undefined ? { metadataTimeoutMs: config.metadataTimeoutMs } : {}),
    ...(config.unpackConcurrency !== undefined ? { unpackConcurrency: config.unpackConcurrency } : {}),
    ...(config.cpuBudget !== undefined ? { cpuBudget: config.cpuBudget } : {}),
    // Always a limiter, at no rate when none is set, so that a reload that sets one holds running pulls too.
    rateLimit: config.rateLimit,
    ...(config.inflater !== undefined ? { inflater: config.inflater } : {}),
    ...(config.keepBlobs ? { keepBlobs: true } : {}),
    ...(config.sync ? {} : { sync: false }),
    signatures: signatureSettingsOf(config),
  };
}

/** The signature policies the configuration names (none: verification off). */
export function signatureSettingsOf(config: Pick<DaemonConfig, 'signaturePolicy' | 'notationConfig'>): SignatureSettings {
  return {
    ...(config.signaturePolicy !== undefined ? { signaturePolicy: config.signaturePolicy } : {}),
    ...(config.notationConfig !== undefined ? { notationConfig: config.notationConfig } : {}),
  };
}

/** The inflater key, as the CLI's --inflater; unset or "": $FASTPULL_INFLATER, as the CLI reads it. */
function inflaterOf(v: unknown, env: NodeJS.ProcessEnv): InflaterChoice | undefined {
  if (v === undefined || v === '') {
    const fromEnv = inflaterFromEnv(env);
    if (fromEnv !== undefined) resolveGunzip(fromEnv);
    return fromEnv;
  }
  if (typeof v !== 'string') throw invalid('inflater', v, `want one of ${INFLATER_CHOICES.join(', ')}`);
  const choice = parseInflaterChoice(v, 'inflater');
  // A decoder that cannot run here (igzip not installed, the ISA-L addon not built) stops the start,
  // rather than failing every pull of a gzip layer.
  resolveGunzip(choice);
  return choice;
}

/**
 * The snapshotter socket: the one given; "" turns it off; unset, the default one as root when the
 * API socket is the default one too (a second daemon on a socket of its own, e.g. for another store,
 * does not take containerd's snapshotter socket unless told to), else none.
 */
function snapshotterSocketOf(v: unknown, socket: string, env: NodeJS.ProcessEnv, cwd: string): string | undefined {
  if (v === '') return undefined;
  if (v === undefined) return process.getuid?.() === 0 && socket === defaultSocket(env) ? DEFAULT_SNAPSHOTTER_SOCKET : undefined;
  if (typeof v !== 'string') throw invalid('snapshotter_socket', v, 'want a path, or "" for none');
  return isAbsolute(v) ? v : resolve(cwd, v);
}

/**
 * containerd's socket: the one given; "" turns it off; unset, containerd's default socket when the
 * snapshotter socket is the default one (fastpulld serves the node's containerd), else none: a
 * daemon of its own, for tests or another store, leaves the node's containerd alone.
 */
function containerdSocketOf(v: unknown, snapshotterSocket: string | undefined, cwd: string): string | undefined {
  if (v === '') return undefined;
  if (v === undefined) return snapshotterSocket === DEFAULT_SNAPSHOTTER_SOCKET ? DEFAULT_CONTAINERD_SOCKET : undefined;
  if (typeof v !== 'string') throw invalid('containerd_socket', v, 'want a path, or "" for none');
  return isAbsolute(v) ? v : resolve(cwd, v);
}

function invalid(key: ConfigKey, value: unknown, want: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `${key} ${show(value)}: ${want}`);
}

/** A value as an error shows it: JSON where it has one (a TOML table has no prototype, so no String()). */
function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

/** A group name, or a numeric gid as TOML writes it (`group = 1000`). */
function groupName(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return String(v);
  throw invalid('group', v, 'want a group name or a numeric gid');
}

function bool(key: ConfigKey, v: unknown): boolean {
  if (v === undefined) return false;
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw invalid(key, v, 'want true or false');
}

/** A size setting in bytes: the one grammar of every front end (see parseSize in @fastpull/core). */
export function parseSize(key: ConfigKey, v: unknown): number {
  return parseSizeSetting(v, key);
}

/** A duration setting in milliseconds: a bare number is seconds, text a Go duration ("10s", "1m30s"). */
export function parseDuration(key: ConfigKey, v: unknown): number {
  return parseDurationSetting(v, key);
}

/** Metrics are opt-in and loopback only: they say what a node pulls, which is not for the network. */
function loopbackAddress(v: unknown): string {
  const p = SUGGESTED_METRICS_PORT;
  if (typeof v !== 'string') throw invalid('metrics_address', v, `want a loopback HOST:PORT such as 127.0.0.1:${p}`);
  const m = /^(?:(127\.\d+\.\d+\.\d+)|\[(::1)\]|(localhost)):(\d{1,5})$/.exec(v);
  const port = m ? Number(m[4]) : NaN;
  if (!m || port > 65535) throw invalid('metrics_address', v, `want a loopback HOST:PORT: 127.0.0.1:${p}, [::1]:${p} or localhost:${p} (PORT 0 picks one)`);
  return v;
}

/** Host and port of a checked metrics address. */
export function splitAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(address.slice(i + 1)) };
}
