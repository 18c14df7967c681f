// The node's other work, as the interference benchmark stands it in: one busy process pinned to each
// core (taskset), hashing a fixed 64 KiB buffer over and over, the shape of a CPU thread that feeds a
// GPU. Each reports how many buffers it has hashed, with the monotonic clock's time, about every
// 50 ms; throughput over any span is read from those reports.
import { spawn, type ChildProcess } from 'node:child_process';

/** One report of a worker: buffers hashed so far, at `ns` (process.hrtime.bigint(), CLOCK_MONOTONIC: one clock for every process). */
export interface Sample {
  readonly count: number;
  readonly ns: bigint;
}

// Checks the clock every 64 hashes (about 2 ms), writes a line every 50 ms, synchronously: a busy
// loop never yields to timers.
const SCRIPT = `
const { createHash } = require('node:crypto');
const { writeSync } = require('node:fs');
const buf = Buffer.alloc(65536, 7);
let n = 0;
let next = 0n;
for (;;) {
  for (let i = 0; i < 64; i++) createHash('sha256').update(buf).digest();
  n += 64;
  const now = process.hrtime.bigint();
  if (now >= next) {
    writeSync(1, n + ' ' + now + '\\n');
    next = now + 50000000n;
  }
}
`;

/**
 * Buffers hashed per second by all workers between `from` and `to` (ns on the monotonic clock): for
 * each worker, the count at its last report at or before each end, over the span between those two
 * reports. NaN when a worker has no report on both sides.
 * @example throughput([[{ count: 0, ns: 0n }, { count: 100, ns: 1_000_000_000n }]], 0n, 1_000_000_000n) // 100
 */
export function throughput(workers: readonly (readonly Sample[])[], from: bigint, to: bigint): number {
  let rate = 0;
  for (const samples of workers) {
    const a = lastAtOrBefore(samples, from);
    const b = lastAtOrBefore(samples, to);
    if (!a || !b || b.ns <= a.ns) return NaN;
    rate += (b.count - a.count) / (Number(b.ns - a.ns) / 1e9);
  }
  return rate;
}

function lastAtOrBefore(samples: readonly Sample[], ns: bigint): Sample | undefined {
  let found: Sample | undefined;
  for (const s of samples) {
    if (s.ns > ns) break;
    found = s;
  }
  return found;
}

/** The running workload: one pinned hashing process per CPU given. */
export class Workload {
  private constructor(
    private readonly children: readonly ChildProcess[],
    /** Every report of each worker, oldest first. */
    readonly samples: readonly Sample[][],
  ) {}

  /** Starts a worker on each of `cpus` and resolves once every one has reported. */
  static async start(cpus: readonly number[]): Promise<Workload> {
    const samples: Sample[][] = cpus.map(() => []);
    const children = cpus.map((cpu, i) => {
      const child = spawn('taskset', ['-c', String(cpu), process.execPath, '-e', SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
      let buf = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
          const [count, ns] = buf.slice(0, nl).split(' ');
          buf = buf.slice(nl + 1);
          samples[i]!.push({ count: Number(count), ns: BigInt(ns!) });
        }
      });
      return child;
    });
    const w = new Workload(children, samples);
    await w.reported();
    return w;
  }

  /** Resolves at the next moment every worker has reported since now (its throughput can then be read up to now). */
  async reported(): Promise<bigint> {
    const now = process.hrtime.bigint();
    for (;;) {
      if (this.samples.every((s) => s.length > 0 && s.at(-1)!.ns >= now)) return now;
      for (const c of this.children)
        if (c.exitCode !== null || c.signalCode !== null) throw new Error(`a workload process ended (${c.exitCode ?? c.signalCode})`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Buffers hashed per second over the span (see {@link throughput}). */
  rate(from: bigint, to: bigint): number {
    return throughput(this.samples, from, to);
  }

  /** Drops reports older than `ns`, keeping the last one before it (memory stays bounded over a long run). */
  forget(ns: bigint): void {
    for (const s of this.samples) {
      let i = 0;
      while (i + 1 < s.length && s[i + 1]!.ns <= ns) i++;
      s.splice(0, i);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
  }
}
