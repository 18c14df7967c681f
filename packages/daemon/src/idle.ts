// What fastpulld does when it is idle: give back the memory the pulls used, so that what it holds
// between bursts of pulls is what it uses, not the high-water mark of the last. Figures:
// docs/daemon.md, "Memory".
import { readFileSync } from 'node:fs';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { collectHeap, trimAllocator } from '@fastpull/core';

/** Runs a full collection, then hands the allocator's free memory back to the kernel. */
export function releaseIdleMemory(): void {
  collectHeap('major');
  trimAllocator();
}

/** V8's flag that has a full collection compact the old generation whatever its fragmentation. */
const COMPACT_FLAG = '--compact-on-every-full-gc';

/**
 * {@link releaseIdleMemory}, compacting V8's old generation on the way. V8 compacts only the pages
 * it finds fragmented enough, and a heap that pulls grew keeps many half-empty pages otherwise
 * (docs/daemon.md, "Memory"). Only when fastpulld settles,
 * not at the end of each pull: compacting moves every live object, and doing it after each pull
 * raised the peak while pulls followed one another. The second collection hands back the pages the
 * first emptied (V8 keeps them pooled until then). A compaction flag on node's command line is
 * left as it is.
 */
export function compactIdleMemory(execArgv: readonly string[] = process.execArgv): void {
  const own = execArgv.some((a) => /^--(no-)?compact[-_]on[-_]every[-_]full[-_]gc(=|$)/.test(a));
  if (!own) setFlagsFromString(COMPACT_FLAG);
  try {
    collectHeap('major');
    collectHeap('major');
  } finally {
    if (!own) setFlagsFromString(COMPACT_FLAG.replace('--', '--no-'));
  }
  trimAllocator();
}

/**
 * How long fastpulld waits, idle, before it ends its idle unpack workers and settles its memory
 * ({@link IdleMemory}). Pulls that follow one another closer than this (kubelet pulling a pod's
 * images) keep their workers; a worker takes 0.2-0.3 s of a core to start again.
 */
export const IDLE_SETTLE_MS = 5000;
/** Between two young-generation collections while the young generation settles. */
export const SETTLE_STEP_MS = 1000;
/** Young-generation collections at most, per settling. */
export const SETTLE_STEPS = 15;
/** The young generation is back to its smallest at or below this (V8's two semi-spaces of 1 MiB at most). */
export const YOUNG_GENERATION_SETTLED_BYTES = 2 * 1024 * 1024;

/** The size of the main thread's young generation now, in bytes. */
export function youngGenerationBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

/** What one settling did. */
export interface SettleOutcome {
  /** Idle unpack workers ended. */
  readonly workers: number;
  /** Young-generation collections run. */
  readonly steps: number;
  /** The young generation's size at the end, in bytes. */
  readonly youngGeneration: number;
}

/** What {@link IdleMemory} does: the daemon's, or a test's. */
export interface IdleMemoryHooks {
  /** Ends idle unpack workers; resolves with how many ended. */
  readonly retireWorkers: () => Promise<number>;
  /** Called once each settling is done (not for one a pull interrupted). */
  readonly settled: (outcome: SettleOutcome) => void;
  readonly delayMs?: number;
  readonly stepMs?: number;
  /** Default {@link youngGenerationBytes}. */
  readonly youngGeneration?: () => number;
}

/**
 * Gives back what pulls grew once fastpulld is idle. When the last pull settles: a full collection
 * and a trim (the buffers the pulls dropped). After {@link IDLE_SETTLE_MS} more without a pull, it
 * settles: the idle unpack workers end (each holds a heap, an allocator arena and a stack), full
 * collections that compact V8's old generation and a trim follow ({@link compactIdleMemory}), and then young-generation collections, one a second, until the main
 * thread's young generation is back to its smallest. V8 doubles it as pulls fill it, up to 32 MiB,
 * and gives it back only at a collection that finds the recent allocation rate low; an idle daemon
 * runs none of its own, and one right after a burst of pulls still counts the burst's rate.
 * @example
 * const idle = new IdleMemory({ retireWorkers: () => service.releaseIdleWorkers(), settled: (o) => log.debug(o, 'idle memory released') });
 * idle.idle(); // nothing is pulling now
 * idle.busy(); // a pull started
 */
export class IdleMemory {
  private timer: NodeJS.Timeout | undefined;
  /** Bumped by each {@link busy}: a settling under way stops when it changes. */
  private epoch = 0;
  private stopped = false;
  /** Ends the step a settling waits on, if any. */
  private interrupt: (() => void) | undefined;

  constructor(private readonly hooks: IdleMemoryHooks) {}

  /** A pull started: a settling waits for the next {@link idle}, one under way stops. */
  busy(): void {
    this.epoch++;
    clearTimeout(this.timer);
    this.timer = undefined;
    const interrupt = this.interrupt;
    this.interrupt = undefined;
    interrupt?.();
  }

  /** Nothing pulls now: releases what the pulls dropped, and settles after the delay unless a pull starts. */
  idle(): void {
    releaseIdleMemory();
    this.schedule();
  }

  /** Settles after the delay unless a pull starts (at start, once serving). */
  schedule(): void {
    this.busy();
    if (this.stopped) return;
    const epoch = this.epoch;
    this.timer = setTimeout(() => void this.settle(epoch), this.hooks.delayMs ?? IDLE_SETTLE_MS);
    this.timer.unref();
  }

  /** No settling from now on (the daemon stops). */
  stop(): void {
    this.stopped = true;
    this.busy();
  }

  private async settle(epoch: number): Promise<void> {
    this.timer = undefined;
    const current = () => epoch === this.epoch && !this.stopped;
    const workers = await this.hooks.retireWorkers().catch(() => 0);
    if (!current()) return;
    compactIdleMemory();
    const young = this.hooks.youngGeneration ?? youngGenerationBytes;
    let steps = 0;
    while (young() > YOUNG_GENERATION_SETTLED_BYTES && steps < SETTLE_STEPS) {
      if (!(await this.step()) || !current()) return;
      collectHeap('minor');
      steps++;
    }
    // V8 hands the pages of a shrunk young generation back on its own threads: one more step
    // lets it finish, so that what the settling reports is what the process holds from then on.
    if (steps > 0) {
      if (!(await this.step()) || !current()) return;
      trimAllocator();
    }
    this.hooks.settled({ workers, steps, youngGeneration: young() });
  }

  /** Waits one step; false when a pull came meanwhile (busy() ends the wait). */
  private step(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      this.interrupt = () => resolve(false);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.interrupt = undefined;
        resolve(true);
      }, this.hooks.stepMs ?? SETTLE_STEP_MS);
      this.timer.unref();
    });
  }
}

/** This process's memory, in bytes, as the kernel counts it (/proc/self/status; NaN where it cannot be read) and V8 does. */
export interface Footprint {
  readonly rss: number;
  readonly rssAnon: number;
  readonly rssFile: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
}

/** This process's footprint now. */
export function footprint(): Footprint {
  let status = '';
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch {
    // not Linux, or no /proc: V8's counts alone
  }
  const kib = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  const heap = process.memoryUsage();
  return { rss: kib('VmRSS'), rssAnon: kib('RssAnon'), rssFile: kib('RssFile'), heapUsed: heap.heapUsed, heapTotal: heap.heapTotal };
}
