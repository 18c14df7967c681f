// Measuring a puller: wall time, CPU time (user + system of the command and all its children, from
// wait4 through /usr/bin/time, plus any daemon's CPU from /proc, the children it started and reaped
// meanwhile included: a decompressor it runs per layer), peak RSS (the largest sum of the process
// tree's and the daemons' trees' resident memory, sampled every 50 ms, and never less than the
// largest single process's peak that /usr/bin/time reports). On request it also writes a sampled
// trace of them (src/peers/proc-trace.ts).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcTrace, type ProcTraceOptions } from './proc-trace.js';

const TICK = 100; // USER_HZ on Linux
const PAGE_KIB = 4;

export interface Measured {
  readonly ok: boolean;
  readonly timedOut: boolean;
  /** Seconds. */
  readonly wall: number;
  /** User + system seconds of the command, its children and the daemons named. */
  readonly cpu: number;
  readonly rssMiB: number;
  /** Peak of the daemons' resident memory alone (their sum, sampled with the rest), when daemons were named. */
  readonly daemonRssMiB?: number;
  readonly output: string;
}

export interface ProcStat {
  readonly ppid: number;
  /** utime + stime, clock ticks. */
  readonly ticks: number;
  /** cutime + cstime: the children it has waited for, clock ticks. */
  readonly childTicks: number;
  readonly rssKiB: number;
}

export function statOf(pid: number): ProcStat | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, cutime 16, cstime 17, rss 24.
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]), rssKiB: Number(f[21]) * PAGE_KIB };
  } catch {
    return undefined;
  }
}

/** Every process's stat and children, read once. */
export class ProcTable {
  readonly stats = new Map<number, ProcStat>();
  readonly kids = new Map<number, number[]>();
  constructor() {
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid)) continue;
      const s = statOf(pid);
      if (!s) continue;
      this.stats.set(pid, s);
      const list = this.kids.get(s.ppid) ?? [];
      list.push(pid);
      this.kids.set(s.ppid, list);
    }
  }

  /** The pids under `root`, and `root` itself when `self`. */
  tree(root: number, self: boolean): number[] {
    const out: number[] = self ? [root] : [];
    const stack = [...(this.kids.get(root) ?? [])];
    while (stack.length) {
      const p = stack.pop()!;
      out.push(p);
      stack.push(...(this.kids.get(p) ?? []));
    }
    return out;
  }

  rssKiB(root: number, self: boolean): number {
    return this.tree(root, self).reduce((a, p) => a + (this.stats.get(p)?.rssKiB ?? 0), 0);
  }

  /** CPU seconds of `root`'s tree: every live process's own, and what the root has reaped. */
  cpuSeconds(root: number): number {
    const own = this.tree(root, true).reduce((a, p) => a + (this.stats.get(p)?.ticks ?? 0), 0);
    return (own + (this.stats.get(root)?.childTicks ?? 0)) / TICK;
  }
}

/** CPU seconds a live process has used so far (its own, not its children's). */
export function cpuSeconds(pid: number): number {
  return (statOf(pid)?.ticks ?? 0) / TICK;
}

/** Peak RSS (VmHWM) of a live process, MiB. */
export function peakRssMiB(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** CPU seconds of a daemon so far: its own and its children's, live or reaped. */
function daemonCpuSeconds(pid: number): number {
  return new ProcTable().cpuSeconds(pid);
}

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Kill the command (SIGKILL to its process group) after this many ms. */
  readonly timeoutMs?: number;
  /**
   * Long-running processes that do part of the work (a daemon): their CPU and RSS count too, with
   * those of the processes they start (a decompressor per layer).
   */
  readonly daemons?: readonly number[];
  readonly cwd?: string;
  /** Writes a sampled trace of the command and the daemons (src/peers/proc-trace.ts). */
  readonly trace?: ProcTraceOptions;
}

let timeDir: string | undefined;
let timeFiles = 0;

/**
 * A fresh file for /usr/bin/time's report. They are kept until the process exits (or
 * `removeTimeFiles`): deleting one after each command would put a just-freed inode in the way of the
 * next command's file creation (src/peers/trash.ts says what that costs on ext4).
 */
function nextTimeFile(): string {
  if (timeDir === undefined) {
    timeDir = mkdtempSync(join(tmpdir(), 'fastpull-bench-time-'));
    process.once('exit', removeTimeFiles);
  }
  return join(timeDir, String(timeFiles++));
}

/** Removes /usr/bin/time's reports; for a process that does not end with an 'exit' event (a test worker). */
export function removeTimeFiles(): void {
  if (timeDir !== undefined) rmSync(timeDir, { recursive: true, force: true });
  timeDir = undefined;
  process.removeListener('exit', removeTimeFiles);
}

/** Runs `cmd args` measured. Never throws for a failing command: `ok` says. */
export async function measure(cmd: string, args: readonly string[], options: RunOptions = {}): Promise<Measured> {
  const timeFile = nextTimeFile();
  const daemons = options.daemons ?? [];
  const daemonCpu0 = daemons.reduce((a, p) => a + daemonCpuSeconds(p), 0);
  const t0 = performance.now();
  const child = spawn('/usr/bin/time', ['-o', timeFile, '-f', '%e %U %S %M', cmd, ...args], {
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
  let output = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString('utf8')).slice(-256 * 1024);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let peakKiB = 0;
  let daemonPeakKiB = 0;
  const recorder = options.trace ? new ProcTrace(options.trace, child.pid, daemons) : undefined;
  const sample = () => {
    const table = new ProcTable();
    let daemonKiB = 0;
    for (const d of daemons) daemonKiB += table.rssKiB(d, true);
    daemonPeakKiB = Math.max(daemonPeakKiB, daemonKiB);
    // The command's root is /usr/bin/time: not counted.
    peakKiB = Math.max(peakKiB, daemonKiB + (child.pid !== undefined ? table.rssKiB(child.pid, false) : 0));
    recorder?.sample(table);
  };
  const poll = setInterval(sample, 50);
  let timedOut = false;
  const timer = options.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, options.timeoutMs)
    : undefined;
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  const wallJs = (performance.now() - t0) / 1000;
  clearInterval(poll);
  if (timer) clearTimeout(timer);
  recorder?.finish(wallJs);
  const daemonCpu = daemons.reduce((a, p) => a + daemonCpuSeconds(p), 0) - daemonCpu0;
  let wall = wallJs;
  let cpu = daemonCpu;
  let maxOneKiB = 0;
  try {
    const last = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)!;
    const [e, u, s, m] = last.split(' ').map(Number);
    if (!timedOut && Number.isFinite(e)) wall = e!;
    if (Number.isFinite(u) && Number.isFinite(s)) cpu += u! + s!;
    if (Number.isFinite(m)) maxOneKiB = m!;
  } catch {
    /* killed before time wrote */
  }
  return {
    ok: code === 0 && !timedOut,
    timedOut,
    wall,
    cpu,
    rssMiB: Math.max(peakKiB, maxOneKiB) / 1024,
    ...(daemons.length > 0 ? { daemonRssMiB: daemonPeakKiB / 1024 } : {}),
    output,
  };
}

/** Bytes a directory takes on disk (du), 0 when it is missing. */
export function diskBytes(...dirs: string[]): number {
  let total = 0;
  for (const d of dirs) {
    const r = spawnSync('du', ['-s', '-x', '--block-size=1', d], { encoding: 'utf8' });
    if (r.status === 0) total += Number(r.stdout.split('\t')[0]);
  }
  return total;
}

/** Sectors a block device wrote and discarded since boot (its 512-byte units, whatever its block size). */
export interface BlockCounters {
  readonly writeSectors: number;
  /** Undefined for a kernel older than 4.18, whose stat file has no discard fields. */
  readonly discardSectors: number | undefined;
}

/** The counters of a block device's `stat` file (Documentation/block/stat.rst: field 7 sectors written, 14 discarded). */
export function parseBlockStat(text: string): BlockCounters | undefined {
  const f = text.trim().split(/\s+/).map(Number);
  if (f.length < 11 || f.some((n) => !Number.isFinite(n))) return undefined;
  return { writeSectors: f[6]!, discardSectors: f.length >= 15 ? f[13]! : undefined };
}

/**
 * The counters of the block device holding `path`'s filesystem, or undefined where it has none (a
 * tmpfs, overlayfs) or the system does not say. The device counts every process's traffic, and the
 * write-back the kernel does later: read around a pull, they tell what reached the disk meanwhile
 * (a blob written and then trimmed again, say), not who asked for it.
 */
export function blockCounters(path: string): BlockCounters | undefined {
  try {
    const dev = statSync(path).dev;
    // Linux's dev_t: major in bits 8-19 and 32-43, minor in bits 0-7 and 20-31.
    const high = Math.floor(dev / 2 ** 32);
    const low = dev % 2 ** 32;
    const major = ((low >>> 8) & 0xfff) | ((high & 0xfff) << 12);
    const minor = (low & 0xff) | ((low >>> 20) << 8);
    return parseBlockStat(readFileSync(`/sys/dev/block/${major}:${minor}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

export type CacheDrop = 'dropped' | `not permitted (${string})`;

/** `sync; echo 3 > /proc/sys/vm/drop_caches`; says why when it is not permitted. */
export function dropCaches(): CacheDrop {
  execFileSync('sync');
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3\n');
    return 'dropped';
  } catch (e) {
    return `not permitted (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
  }
}

export function which(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', 'command -v "$0"', cmd], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
