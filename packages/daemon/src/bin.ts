#!/usr/bin/env node
// The `fastpulld` executable: configuration from the TOML file and flags, then serve until SIGTERM.
import { parseArgs } from 'node:util';
import {
  DEFAULT_CHUNK_SIZE,
  DEFAULT_CONCURRENCY,
  DEFAULT_INFLATER,
  INFLATER_CHOICES,
  isFastpullError,
  tuneAllocator,
  unixDatagramSender,
  VERSION,
} from '@fastpull/core';
import { tuningFromEnv } from '@fastpull/core/tuning';
import {
  DEFAULT_CONFIG_PATH,
  DEFAULT_CONNECTION_IDLE_TIMEOUT_MS,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_SNAPSHOTTER_MAX_CONNECTIONS,
  EXIT_CONFIG,
  readConfigFile,
  resolveConfig,
  SUGGESTED_METRICS_PORT,
  type RawConfig,
} from './config.js';
import { serviceNotifier, type ServiceNotifier } from './notify.js';
import { Daemon } from './server.js';

const USAGE = `Usage: fastpulld [options]

Serves the fastpull API (gRPC: fastpull.v1 Images, Snapshots, Content; grpc.health.v1; reflection) on a
unix socket, over one store, and containerd's snapshotter API on a second socket. Flags override the
config file's keys of the same name (dashes for underscores). See docs/daemon.md.

Options:
  --config FILE              TOML config file (default ${DEFAULT_CONFIG_PATH} when it exists; env FASTPULLD_CONFIG)
  --root DIR                 store root (default: as the CLI: $FASTPULL_ROOT, /var/lib/fastpull as root)
  --socket PATH              unix socket (default /run/fastpull/fastpulld.sock as root)
  --snapshotter-socket PATH  serve containerd's snapshotter API there (default /run/fastpull/snapshotter.sock
                             as root with the default --socket; "" for none)
  --containerd-socket PATH   containerd's socket: once serving, have containerd announce CRI's images again, so
                             that its CRI plugin lists those it missed while fastpulld was down (default
                             /run/containerd/containerd.sock with the default --snapshotter-socket; "" for none)
  --group NAME|GID           group owning the socket (mode 0660)
  --hosts-dir DIR            registry mirrors as containerd hosts.toml files (reloaded on SIGHUP; default
                             $FASTPULL_HOSTS_DIR, else /etc/containerd/certs.d when it exists)
  --concurrency N            range requests in flight across all pulls (default ${DEFAULT_CONCURRENCY})
  --chunk-size SIZE          bytes per range request (default ${DEFAULT_CHUNK_SIZE / 1024 ** 2}MiB)
  --metadata-timeout DUR     fail a pull whose manifest, index, config or referrers list is not read whole within
                             this long, retries included (default 2m)
  --unpack-concurrency N     layers unpacked at once across all pulls (default: one shared pool, one per two cores, at most 4)
  --cpu-budget N             whole cores fastpulld may keep busy: all its threads are confined to N of its CPUs
                             (reloaded on SIGHUP; default: all it may use, bounded by its cgroup CPU quota and cpuset)
  --rate-limit RATE          bytes per second all pulls together may read from registries, e.g. 50MiB, 1.5GB
                             (reloaded on SIGHUP; 0 or none: no limit, the default); a high pull goes first
  --inflater NAME            gzip decoder: ${INFLATER_CHOICES.join(', ')} (default $FASTPULL_INFLATER, else ${DEFAULT_INFLATER})
  --signature-policy FILE    refuse images the sigstoreSigned requirements of this containers policy.json reject
                             (reloaded on SIGHUP; default $FASTPULL_SIGNATURE_POLICY, else off)
  --notation-config DIR      refuse images the Notary Project trust policy in DIR (trustpolicy.json, truststore/)
                             rejects (reloaded on SIGHUP; default $FASTPULL_NOTATION_CONFIG, else off)
  --keep-blobs               keep compressed layer blobs after unpacking
  --no-sync                  UNSAFE: commit snapshots without flushing them to disk (sync = false)
  --metrics-address ADDR     serve Prometheus metrics at http://ADDR/metrics, and probes at /livez and /readyz
                             (loopback only, e.g. 127.0.0.1:${SUGGESTED_METRICS_PORT})
  --min-free-space SIZE      free space the store's disk must keep for health to say SERVING (default 1GiB; 0: none)
  --health-interval DUR      how often health is checked (default 10s; 0: only on /readyz and SIGHUP)
  --log-level LEVEL          fatal, error, warn, info (default), debug, trace, silent
  --shutdown-timeout DUR     how long SIGTERM waits for pulls to stop (default 10s)
  --max-connections N        connections the API socket takes at once; the next is closed (default ${DEFAULT_MAX_CONNECTIONS})
  --snapshotter-max-connections N
                             connections the snapshotter socket takes at once (default ${DEFAULT_SNAPSHOTTER_MAX_CONNECTIONS})
  --connection-idle-timeout DUR
                             close a connection that runs no call this long (default ${DEFAULT_CONNECTION_IDLE_TIMEOUT_MS / 60_000}m)
  --handshake-timeout DUR    close a connection that has not sent HTTP/2's preface by then (default ${DEFAULT_HANDSHAKE_TIMEOUT_MS / 1000}s)
  --version, --help
`;

function fail(message: string, status: number): never {
  process.stderr.write(`fastpulld: ${message}\n`);
  process.exit(status);
}

/** Ends a failed start: the message with its code; EXIT_CONFIG for a configuration to fix, else `status`. */
function failStart(e: unknown, configuration: (e: unknown) => boolean, status = 1): never {
  fail(`${e instanceof Error ? e.message : String(e)} (${isFastpullError(e) ? e.code : 'INTERNAL'})`, configuration(e) ? EXIT_CONFIG : status);
}
const invalid = (e: unknown): boolean => isFastpullError(e) && e.code === 'INVALID_ARGUMENT';

let args: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    args: process.argv.slice(2),
    strict: true,
    allowPositionals: false,
    options: {
      config: { type: 'string' },
      root: { type: 'string' },
      socket: { type: 'string' },
      'snapshotter-socket': { type: 'string' },
      'containerd-socket': { type: 'string' },
      group: { type: 'string' },
      'hosts-dir': { type: 'string' },
      concurrency: { type: 'string' },
      'chunk-size': { type: 'string' },
      'metadata-timeout': { type: 'string' },
      'unpack-concurrency': { type: 'string' },
      'cpu-budget': { type: 'string' },
      'rate-limit': { type: 'string' },
      inflater: { type: 'string' },
      'signature-policy': { type: 'string' },
      'notation-config': { type: 'string' },
      'keep-blobs': { type: 'boolean' },
      'no-sync': { type: 'boolean' },
      'metrics-address': { type: 'string' },
      'min-free-space': { type: 'string' },
      'health-interval': { type: 'string' },
      'log-level': { type: 'string' },
      'shutdown-timeout': { type: 'string' },
      'max-connections': { type: 'string' },
      'snapshotter-max-connections': { type: 'string' },
      'connection-idle-timeout': { type: 'string' },
      'handshake-timeout': { type: 'string' },
      version: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
try {
  args = parse();
} catch (e) {
  fail(`${(e as Error).message}; see 'fastpulld --help' (INVALID_ARGUMENT)`, EXIT_CONFIG);
}
const v = args.values;
if (v.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (v.version) {
  process.stdout.write(`fastpulld ${VERSION}\n`);
  process.exit(0);
}

// Before anything is started: $NOTIFY_SOCKET leaves the environment the programs fastpulld runs inherit.
let daemon: Daemon | undefined;
let notifier: ServiceNotifier | undefined;
try {
  notifier = serviceNotifier(process.env, unixDatagramSender(), (e, message) => {
    const what = { err: e.message, notify: message.split('\n')[0] };
    if (daemon) daemon.log.warn(what, 'could not notify the service manager');
    else process.stderr.write(`fastpulld: could not notify the service manager (${what.notify}): ${what.err}\n`);
  });
} catch (e) {
  failStart(e, () => true);
}

// Unpacking allocates output buffers by the gigabyte: keep their pages (FASTPULL_TUNE_MALLOC=0: don't).
tuneAllocator(process.env);

const flags: RawConfig = {
  root: v.root,
  socket: v.socket,
  snapshotter_socket: v['snapshotter-socket'],
  containerd_socket: v['containerd-socket'],
  group: v.group,
  hosts_dir: v['hosts-dir'],
  concurrency: v.concurrency,
  chunk_size: v['chunk-size'],
  metadata_timeout: v['metadata-timeout'],
  unpack_concurrency: v['unpack-concurrency'],
  cpu_budget: v['cpu-budget'],
  rate_limit: v['rate-limit'],
  inflater: v.inflater,
  signature_policy: v['signature-policy'],
  notation_config: v['notation-config'],
  keep_blobs: v['keep-blobs'],
  sync: v['no-sync'] === true ? false : undefined,
  metrics_address: v['metrics-address'],
  min_free_space: v['min-free-space'],
  health_interval: v['health-interval'],
  log_level: v['log-level'],
  shutdown_timeout: v['shutdown-timeout'],
  max_connections: v['max-connections'],
  snapshotter_max_connections: v['snapshotter-max-connections'],
  connection_idle_timeout: v['connection-idle-timeout'],
  handshake_timeout: v['handshake-timeout'],
};
const configPath = v.config ?? (process.env.FASTPULLD_CONFIG || DEFAULT_CONFIG_PATH);
const configRequired = v.config !== undefined || Boolean(process.env.FASTPULLD_CONFIG);

// Handlers go in before the socket exists: a signal sent as soon as the daemon is seen serving must
// find them (SIGHUP's default action would kill the process).
let stopSignal: NodeJS.Signals | undefined;
/** Bounds a stop asked for while still starting, until the start ends. */
let startingStopTimer: NodeJS.Timeout | undefined;
function onStopSignal(sig: NodeJS.Signals): void {
  if (stopSignal) return;
  stopSignal = sig;
  notifier?.stopping(`stopping on ${sig}`);
  if (daemon) stopDaemon(daemon, sig);
  // Still starting: the start ends first (a failed one takes away what it made), then the daemon stops.
  else startingStopTimer = setTimeout(() => process.exit(1), DEFAULT_SHUTDOWN_TIMEOUT_MS + 2000).unref();
}
function stopDaemon(d: Daemon, sig: NodeJS.Signals): void {
  // Bounded: whatever happens, the process is gone shortly after the shutdown timeout.
  setTimeout(() => {
    d.log.error('shutdown timed out; exiting');
    process.exit(1);
  }, d.config.shutdownTimeoutMs + 2000).unref();
  d.shutdown(`stopping on ${sig}`).then(
    () => process.exit(0),
    (e: unknown) => {
      d.log.error({ err: e instanceof Error ? e.message : String(e) }, 'shutdown failed');
      process.exit(1);
    },
  );
}
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => onStopSignal(sig));
process.on('SIGHUP', () => {
  const d = daemon;
  if (!d || stopSignal) return;
  notifier?.reloading();
  void d.reload().then(() => notifier?.ready(serving(d)));
});

/** What `systemctl status` shows while fastpulld serves. */
function serving(d: Daemon): string {
  return `serving ${[d.config.socket, d.config.snapshotterSocket].filter((s) => s !== undefined).join(' and ')}`;
}

let config;
let tuning;
try {
  config = resolveConfig(readConfigFile(configPath, configRequired), flags);
  // The measuring knobs of the benchmarks (bench/README.md), read here once and passed down.
  tuning = tuningFromEnv(process.env);
} catch (e) {
  failStart(e, invalid);
}
try {
  daemon = await Daemon.start({ config, configPath, configRequired, flags, tuning });
} catch (e) {
  failStart(e, invalid);
}
clearTimeout(startingStopTimer);
if (stopSignal) stopDaemon(daemon, stopSignal);
// Only now: both sockets take calls, so what systemd starts after fastpulld finds them.
else notifier?.ready(serving(daemon));
