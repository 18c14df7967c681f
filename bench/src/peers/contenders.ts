// The pullers compared: fastpull (CLI, in-process), fastpulld (through the daemon, once it exists),
// containerd's `ctr images pull` (its own daemon, root and socket) and `skopeo copy` + `umoci unpack`.
// Each pull goes into a fresh store under the run directory; a contender that cannot run says why.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { diskBytes, dropCaches, measure, sleep, which, type Measured } from './measure.js';

export interface PullResult extends Measured {
  /** Bytes the store takes on disk afterwards (compressed copies kept, unpacked trees, metadata). */
  readonly bytes: number;
  /** How it ran, e.g. the snapshotter used. */
  readonly note?: string;
  /** Seconds of each step, for a contender made of several commands. */
  readonly phases?: Readonly<Record<string, number>>;
  /**
   * MiB the block device under the run's directory wrote, and discarded, while the pull ran (every
   * process's traffic; absent where the directory has no block device; see measure.ts blockCounters).
   */
  readonly deviceWriteMiB?: number;
  readonly deviceDiscardMiB?: number;
}

export interface Contender {
  readonly name: string;
  /** Why it cannot run on this machine, or undefined when it can. */
  unavailable(): string | undefined;
  /**
   * Pulls and unpacks `ref` into a fresh store under `dir` (which it may fill; the caller removes it
   * later, never right before another measured pull: src/peers/trash.ts).
   * `trace`: a file to write the pull's trace to, for a contender that can (`fastpull pull --trace`).
   */
  pull(ref: string, dir: string, timeoutMs: number, trace?: string): Promise<PullResult>;
  /** Whether `pull` writes a trace when asked. */
  readonly traces?: boolean;
}

export function failure(what: string, m: Measured): string {
  if (m.timedOut) return `${what} timed out`;
  const text = m.output.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').trim();
  return `${what} failed: ${text.split('\n').slice(-3).join(' / ').slice(0, 400)}`;
}

interface PullTimingsJson {
  totalMs: number;
  resolveMs: number;
  layers: { fetchMs: number; unpackMs: number }[];
}

/**
 * From `fastpull pull --json` (one JSON event per line, the last `{"type":"done",...,"timings"}`):
 * seconds to resolve, and the fetch and unpack time of the layer that took longest (the pipeline
 * overlaps them, so they do not add up to the wall time); with `total`, the pull's own time as its
 * puller measured it (for a pull through fastpulld, the daemon's, without the client's start).
 */
export function fastpullTimings(output: string, total = false): Record<string, number> | undefined {
  let t: PullTimingsJson | undefined;
  for (const line of output.split('\n').reverse()) {
    if (!line.startsWith('{')) continue;
    let event: { type?: string; timings?: PullTimingsJson };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue; // a line that is not an event (a warning)
    }
    if (event.type === 'done' && event.timings) {
      t = event.timings;
      break;
    }
  }
  if (!t || t.layers.length === 0) return undefined;
  const slowest = t.layers.reduce((a, b) => (b.fetchMs + b.unpackMs > a.fetchMs + a.unpackMs ? b : a));
  return {
    ...(total ? { 'pull in the daemon': t.totalMs / 1000 } : {}),
    resolve: t.resolveMs / 1000,
    'slowest layer fetch': slowest.fetchMs / 1000,
    'slowest layer unpack': slowest.unpackMs / 1000,
  };
}

/**
 * `fastpull pull` in-process, through its launcher. `variant` names a run with extra environment:
 * `nodehttp` reads blob bodies through node:http instead of off the socket (FASTPULL_DIRECT_RANGES=0). Any
 * other variant is a gzip decoder, `--inflater <variant>` (BENCH_CONTENDERS `fastpull:<inflater>`),
 * where `isal-reader` is `isal` decoding on the unpack thread (the benchmark-only FASTPULL_ISAL_THREAD).
 */
export function fastpullCli(repo: string, variant?: string): Contender {
  const bin = join(repo, 'packages', 'cli', 'dist', 'launch.cjs');
  const inflater = variant === undefined || variant === 'nodehttp' ? undefined : variant === 'isal-reader' ? 'isal' : variant;
  const env =
    variant === 'isal-reader'
      ? { ...process.env, FASTPULL_ISAL_THREAD: 'reader' }
      : variant === 'nodehttp'
        ? { ...process.env, FASTPULL_DIRECT_RANGES: '0' }
        : process.env;
  const names: Record<string, string> = { nodehttp: 'fastpull (CLI, bodies through node:http)' };
  return {
    name: variant === undefined ? 'fastpull (CLI)' : (names[variant] ?? `fastpull --inflater ${variant} (CLI)`),
    traces: true,
    unavailable: () => (existsSync(bin) ? undefined : `${bin} is missing: build first (pnpm build)`),
    async pull(ref, dir, timeoutMs, trace) {
      const root = join(dir, 'root');
      const flags = inflater === undefined ? [] : ['--inflater', inflater];
      const m = await measure(process.execPath, [bin, 'pull', '--json', '--plain-http', ...flags, '--root', root, ...(trace ? ['--trace', trace] : []), ref], {
        timeoutMs,
        env,
      });
      const timings = fastpullTimings(m.output);
      return { ...m, bytes: diskBytes(root), ...(timings ? { phases: timings } : {}), ...(m.ok ? {} : { note: failure('fastpull pull', m) }) };
    },
  };
}

/**
 * fastpulld: the daemon is started per pull (not timed), then the CLI pulls through it
 * (`fastpulld --socket SOCK --root R`, `fastpull pull --address SOCK`); the daemon's CPU and memory
 * count with the CLI's.
 *
 * `warmUp` makes it `fastpulld (daemon, warm)`, the daemon as a node runs it: before the clock it
 * pulls that other image (no layer in common), so its unpack worker has started and its code is
 * compiled, then the page cache is dropped again. The wall time still counts the client's start
 * (a CLI process, about 0.3 s); the `pull in the daemon` phase is the pull as the daemon timed it,
 * request to answer, what a client that is already running (containerd, kubelet) would wait.
 */
export function fastpulld(repo: string, warmUp?: () => string | undefined): Contender {
  // Through their launchers, as the installed commands start: they size libuv's pool.
  const daemon = join(repo, 'packages', 'daemon', 'dist', 'launch.cjs');
  const bin = join(repo, 'packages', 'cli', 'dist', 'launch.cjs');
  return {
    name: warmUp ? 'fastpulld (daemon, warm)' : 'fastpulld (daemon)',
    traces: true,
    unavailable: () => {
      if (!existsSync(daemon)) return 'not available: packages/daemon is not built (no packages/daemon/dist/launch.cjs)';
      if (warmUp && warmUp() === undefined) return 'not available: no warm-up image was pushed';
      return undefined;
    },
    async pull(ref, dir, timeoutMs, trace) {
      const root = join(dir, 'root');
      const sock = join(dir, 'fastpulld.sock');
      const d = spawn(process.execPath, [daemon, '--socket', sock, '--root', root], { stdio: 'ignore', detached: true });
      try {
        await waitFor(() => existsSync(sock), 10_000, 'fastpulld socket');
        const warm = warmUp?.();
        if (warm !== undefined) {
          const w = spawnSync(process.execPath, [bin, 'pull', '--address', sock, '--quiet', '--plain-http', warm], { encoding: 'utf8', timeout: timeoutMs });
          if (w.status !== 0) throw new Error(`warm-up pull of ${warm} failed: ${(w.stderr ?? '').trim().split('\n').slice(-2).join(' / ')}`);
          dropCaches();
        }
        const m = await measure(process.execPath, [bin, 'pull', '--address', sock, '--json', '--plain-http', ...(trace ? ['--trace', trace] : []), ref], {
          timeoutMs,
          daemons: [d.pid!],
        });
        const timings = fastpullTimings(m.output, true);
        return { ...m, bytes: diskBytes(root), ...(timings ? { phases: timings } : {}), ...(m.ok ? {} : { note: failure('fastpulld pull', m) }) };
      } finally {
        await stop(d);
      }
    },
  };
}

export async function waitFor(ok: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what} did not come up within ${ms} ms`);
    await sleep(50);
  }
}

export async function stop(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

/** Snapshotters no benchmark uses: they only add start-up time and noise. */
const UNUSED_SNAPSHOTTERS = ['btrfs', 'zfs', 'devmapper', 'aufs'].map((s) => `io.containerd.snapshotter.v1.${s}`);

/**
 * The top of a config.toml for a containerd of its own under `dir` (root, state, sockets, opt),
 * with `disabled` plugins off besides the unused snapshotters, and `required` ones that must load.
 */
export function containerdBaseConfig(dir: string, sock: string, disabled: readonly string[] = [], required: readonly string[] = []): string[] {
  const q = (s: string) => JSON.stringify(s);
  const list = (xs: readonly string[]) => `[${xs.map(q).join(', ')}]`;
  return [
    'version = 2',
    `root = ${q(join(dir, 'root'))}`,
    `state = ${q(join(dir, 'state'))}`,
    ...(required.length > 0 ? [`required_plugins = ${list(required)}`] : []),
    `disabled_plugins = ${list([...disabled, ...UNUSED_SNAPSHOTTERS])}`,
    '[grpc]',
    `  address = ${q(sock)}`,
    '[ttrpc]',
    `  address = ${q(`${sock}.ttrpc`)}`,
    '[debug]',
    '  level = "warn"',
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${q(join(dir, 'opt'))}`,
  ];
}

function containerdConfig(dir: string, sock: string): string {
  // `ctr images pull` needs no CRI plugin.
  return [...containerdBaseConfig(dir, sock, ['io.containerd.grpc.v1.cri']), ''].join('\n');
}

/**
 * containerd: a containerd process of its own per pull (started and ready before the clock starts,
 * its CPU and memory counted while `ctr images pull` runs), overlayfs snapshotter, native when
 * overlayfs fails on this machine.
 */
export function containerd(): Contender {
  let snapshotter: 'overlayfs' | 'native' = 'overlayfs';
  let overlayError: string | undefined;
  const one = async (ref: string, dir: string, timeoutMs: number): Promise<PullResult> => {
    const cdir = join(dir, 'containerd');
    mkdirSync(cdir, { recursive: true });
    const sock = join(cdir, 'c.sock');
    const config = join(cdir, 'config.toml');
    writeFileSync(config, containerdConfig(cdir, sock));
    let log = '';
    const d = spawn('containerd', ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    d.stderr.on('data', (b: Buffer) => {
      log = (log + b.toString('utf8')).slice(-4000);
    });
    try {
      await waitFor(
        () => spawnSync('ctr', ['--address', sock, 'version'], { stdio: 'ignore', timeout: 5000 }).status === 0,
        20_000,
        `containerd (${log.slice(-300)})`,
      );
      const m = await measure('ctr', ['--address', sock, '--namespace', 'bench', 'images', 'pull', '--plain-http', '--snapshotter', snapshotter, ref], {
        timeoutMs,
        daemons: [d.pid!],
      });
      return { ...m, bytes: diskBytes(join(cdir, 'root')), note: m.ok ? `${snapshotter} snapshotter` : failure(`ctr images pull (${snapshotter})`, m) };
    } finally {
      await stop(d);
      // Overlay snapshots are not mounted after a pull, but a killed pull may leave an apply mount.
      spawnSync('sh', ['-c', 'grep -o " $0[^ ]*" /proc/mounts | xargs -r -n1 umount -l', cdir], { stdio: 'ignore' });
    }
  };
  return {
    name: 'containerd (ctr images pull)',
    unavailable: () =>
      which('containerd') && which('ctr') ? undefined : 'containerd or ctr not installed (Debian package containerd; bench/setup.sh installs it)',
    async pull(ref, dir, timeoutMs) {
      const r = await one(ref, dir, timeoutMs);
      if (r.ok || r.timedOut || snapshotter === 'native')
        return overlayError && r.ok ? { ...r, note: `native snapshotter (overlayfs failed: ${overlayError})` } : r;
      // Overlayfs failed: try the native snapshotter from now on.
      overlayError = r.note;
      snapshotter = 'native';
      // Set aside, not removed: a delete right before the retry would slow its file creation.
      renameSync(join(dir, 'containerd'), join(dir, 'containerd-overlayfs-failed'));
      const again = await one(ref, dir, timeoutMs);
      return again.ok ? { ...again, note: `native snapshotter (overlayfs failed: ${overlayError})` } : again;
    },
  };
}

/** skopeo copy to an OCI layout, then umoci unpack into a runtime bundle; times, CPU and bytes add up. */
export function skopeoUmoci(): Contender {
  return {
    name: 'skopeo copy + umoci unpack',
    unavailable: () =>
      which('skopeo') && which('umoci') ? undefined : 'skopeo or umoci not installed (Debian packages skopeo, umoci; bench/setup.sh installs them)',
    async pull(ref, dir, timeoutMs) {
      const layout = join(dir, 'oci');
      const bundle = join(dir, 'bundle');
      const copy = await measure('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-tls-verify=false', `docker://${ref}`, `oci:${layout}:bench`], {
        timeoutMs,
      });
      if (!copy.ok) return { ...copy, bytes: diskBytes(layout), note: failure('skopeo copy', copy) };
      const rootless = process.getuid?.() !== 0 ? ['--rootless'] : [];
      const unpack = await measure('umoci', ['unpack', ...rootless, '--image', `${layout}:bench`, bundle], {
        timeoutMs: Math.max(1000, timeoutMs - copy.wall * 1000),
      });
      return {
        ok: unpack.ok,
        timedOut: unpack.timedOut,
        wall: copy.wall + unpack.wall,
        cpu: copy.cpu + unpack.cpu,
        rssMiB: Math.max(copy.rssMiB, unpack.rssMiB),
        output: unpack.output,
        bytes: diskBytes(layout, bundle),
        phases: { 'skopeo copy': copy.wall, 'umoci unpack': unpack.wall },
        ...(unpack.ok ? {} : { note: failure('umoci unpack', unpack) }),
      };
    },
  };
}
