// A pass on a worker, as its pool follows it: the compressed bytes it has consumed, and whether it
// waits for its download while cores are idle, so that its slot may go to a layer that has landed.
import { closeSync, openSync, readSync } from 'node:fs';
import { availableCores } from '../../util/cpu.js';
import { STATE_CONSUMED, STATE_SLOTS, STATE_WAITED_MS, STATE_WAITING_SINCE } from './pass-codes.js';

/** How often the pool reads a worker's count of consumed bytes, and how long a pass waited for its download. */
export const CONSUMED_POLL_MS = 100;

/**
 * A pass on a worker that spent at least this share of the last {@link CONSUMED_POLL_MS} waiting for
 * its download, while at least one core was idle ({@link idleCores}), lends its slot to a waiting layer
 * whose blob has landed in full (the highest priority of those): that one runs meanwhile, and the
 * pass takes the slot back once it waits less (the pool then runs one over its size until the
 * borrower ends). A layer still downloading would only wait too. Where the cores are busy, a
 * download that falls behind is short of CPU, not of network, and another pass would only slow it
 * down. At most as many passes lend at once as the pool has slots, so that it never runs more than
 * twice its size: on a slow download every new pass waits too, and each would otherwise bring one
 * more worker, about 25 MiB each (docs/architecture.md, "Figures behind the defaults").
 */
export const LEND_WAIT_SHARE = 0.5;

/** The start of /proc/stat: its first line sums every CPU's times. */
const procStat = Buffer.alloc(256);

/**
 * The machine's idle CPU time since boot, in core-milliseconds: idle and iowait of the first line
 * of /proc/stat, in USER_HZ (100 a second on Linux); NaN where it cannot be read. Read every
 * {@link CONSUMED_POLL_MS} per pass that follows its download: 256 bytes (17 us on a 2-core VM,
 * where os.cpus(), which reads /proc/cpuinfo too, took 85 us).
 */
export function machineIdleMs(): number {
  let n = 0;
  try {
    const fd = openSync('/proc/stat', 'r');
    try {
      n = readSync(fd, procStat, 0, procStat.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return Number.NaN;
  }
  const line = procStat.toString('latin1', 0, n).split('\n', 1)[0]!;
  const f = line.trim().split(/\s+/);
  if (f[0] !== 'cpu' || f.length < 6) return Number.NaN;
  return (Number(f[4]) + Number(f[5])) * 10;
}

/**
 * Cores that were idle over an interval of `intervalMs`: the fewer of those this process left
 * unused (`cores` less its own CPU time, `processCpuMs`) and those the machine left idle
 * (`machineIdleMs`, the growth of {@link machineIdleMs}; NaN: not known). The process's own count
 * alone misses the other programs on the machine: pulling the many-layers bench image from a
 * registry on the same 2 cores, a pass waiting for its download saw 1.45 cores idle by the
 * process's count while the machine had 0.10; in 1 of 4 pulls it lent its slot, and the worker
 * started for it (about 0.2 s of CPU) ran nothing. With the machine's count, 0 of 4; wall time
 * 0.98x (0.85-1.31, 8 alternating pairs: within the noise). `cores` stays the cap where this
 * process may use fewer cores than the machine has (its idle ones are then not all ours).
 * @example idleCores(2, 100, 50, 10) // 0.1: the process left 1.5 of 2 cores, another program took most
 */
export function idleCores(cores: number, intervalMs: number, processCpuMs: number, machineIdleMs: number): number {
  const left = cores - processCpuMs / intervalMs;
  return Number.isFinite(machineIdleMs) ? Math.min(left, machineIdleMs / intervalMs) : left;
}

/** What a {@link PassWatch} asks of its pool. */
export interface Lender {
  /** Whether a pass may lend its slot now: the pool has slots left to lend and a landed layer waits. */
  mayLend(): boolean;
  /** The pass waits for its download: a waiting task whose blob has landed may run meanwhile. */
  lend(): void;
  /** The pass that lent its slot works again, or ended. */
  reclaim(): void;
}

/**
 * Follows one pass on a worker through the shared memory it writes (consumed bytes, its waits for
 * the download): polling costs the worker nothing. Reports consumed bytes to `onBytes`, and lends the
 * pass's slot while the pass waits for its download ({@link LEND_WAIT_SHARE}).
 */
export class PassWatch {
  /** The memory the worker writes into; absent when nothing is followed. */
  readonly state: BigInt64Array<SharedArrayBuffer> | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private reported = 0;
  private lent = false;
  private lastLook = Date.now();
  private lastWaited = 0;
  private lastCpu = process.cpuUsage();
  private lastIdle: number;
  private readonly cores = availableCores();

  /**
   * @param follows - whether the pass follows its download (else it never waits for one).
   * @param machineIdle - the machine's idle CPU time so far ({@link machineIdleMs}).
   */
  constructor(
    follows: boolean,
    private readonly onBytes: ((consumed: number) => void) | undefined,
    private readonly machineIdle: () => number,
    private readonly lender: Lender,
  ) {
    this.lastIdle = machineIdle();
    this.state = onBytes || follows ? new BigInt64Array(new SharedArrayBuffer(STATE_SLOTS * 8)) : undefined;
    this.timer = this.state ? setInterval(() => this.poll(follows), CONSUMED_POLL_MS) : undefined;
    this.timer?.unref();
  }

  /** Stops following: the last count is reported, and a lent slot is taken back. */
  stop(): void {
    if (this.timer) {
      clearInterval(this.timer);
      if (this.onBytes) this.report();
    }
    if (this.lent) {
      this.lent = false;
      this.lender.reclaim(); // the task's end gives back the slot it holds again (run's release)
    }
  }

  private waitedUntil(now: number): number {
    const since = Number(Atomics.load(this.state!, STATE_WAITING_SINCE));
    return Number(Atomics.load(this.state!, STATE_WAITED_MS)) + (since > 0 ? Math.max(0, now - since) : 0);
  }

  private report(): void {
    const n = Number(Atomics.load(this.state!, STATE_CONSUMED));
    if (n > this.reported) this.onBytes!((this.reported = n));
  }

  private poll(follows: boolean): void {
    if (this.onBytes) this.report();
    if (!follows) return;
    const now = Date.now();
    const waited = this.waitedUntil(now);
    const interval = Math.max(1, now - this.lastLook);
    const share = (waited - this.lastWaited) / interval;
    const cpu = process.cpuUsage();
    const machineIdle = this.machineIdle();
    const idle = idleCores(this.cores, interval, (cpu.user - this.lastCpu.user + cpu.system - this.lastCpu.system) / 1000, machineIdle - this.lastIdle);
    this.lastWaited = waited;
    this.lastLook = now;
    this.lastCpu = cpu;
    this.lastIdle = machineIdle;
    if (!this.lent && share >= LEND_WAIT_SHARE && idle >= 1 && this.lender.mayLend()) {
      this.lent = true;
      this.lender.lend();
    } else if (this.lent && share < LEND_WAIT_SHARE) {
      this.lent = false;
      this.lender.reclaim();
    }
  }
}
