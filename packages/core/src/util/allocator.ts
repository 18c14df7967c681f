// Tunes the process's memory for pulling: the C library's allocator (see tuneAllocator below), the
// freed memory it keeps while pulls run (holdPullMemory), and the garbage the download's buffers
// leave on the thread that writes them (downloadWritten).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { nativeFs } from '../native/addon.js';

/** Allocations above this come from their own mapping (glibc's default is dynamic, from 128 KiB). */
export const MMAP_THRESHOLD = 4 * 1024 * 1024;
/** Free memory at the top of the heap beyond this goes back to the kernel (default: twice the mmap threshold). */
export const TRIM_THRESHOLD = 64 * 1024 * 1024;

/** While a pull runs, the process looks this often whether to hand free memory back to the kernel (see {@link holdPullMemory}). */
export const PULL_TRIM_INTERVAL_MS = 250;
/**
 * While a pull runs, the allocator's free memory goes back to the kernel only once the process's
 * RSS grew by this much since it last did (or since the first running pull began): see
 * {@link holdPullMemory}.
 */
export const PULL_TRIM_SLACK_BYTES = 48 * 1024 * 1024;
/** Bytes the download writes between two young-generation collections on its thread (see {@link downloadWritten}). */
export const YOUNG_COLLECTION_BYTES = 16 * 1024 * 1024;
/** Bytes the download writes between two full collections on its thread, in place of a young one (see {@link downloadWritten}). */
export const FULL_COLLECTION_BYTES = 256 * 1024 * 1024;

/**
 * How far V8 lets a heap grow past what its last full collection left alive, in percent, once
 * {@link tuneAllocator} ran; V8 otherwise picks the factor itself from how fast the heap fills
 * against how fast it collects. An unpack worker keeps a few MiB of objects alive, and V8 ran a
 * full collection of it every few tens of milliseconds, each freeing little; a larger young
 * generation did not change that, a larger growing factor did (docs/architecture.md, "Figures
 * behind the defaults").
 */
export const HEAP_GROWING_PERCENT = 400;

/**
 * The V8 flag that sets {@link HEAP_GROWING_PERCENT}, or undefined where the process was started
 * with its own (on node's command line or in NODE_OPTIONS): a user's choice wins.
 */
export function heapGrowingFlag(execArgv: readonly string[], nodeOptions: string | undefined): string | undefined {
  const own = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a));
  return own ? undefined : `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
}

/** What {@link tuneAllocator} did. */
export type AllocatorTuning = 'tuned' | 'disabled' | 'unsupported';

let done: AllocatorTuning | undefined;
/** Whether the last {@link tuneAllocator} call was told to leave the allocator alone. */
let disabled = false;

/**
 * Keeps freed buffer memory in the process instead of handing it back to the kernel after each use.
 * Decompressing a layer allocates its output as buffers of 64 KiB to 1 MiB, gigabytes of them; with
 * glibc's defaults (a dynamic mmap threshold, and a trim threshold twice that) each buffer is a fresh
 * mapping or lands on a heap top that was just trimmed, so every 4 KiB of output costs a page fault.
 * Gunzipping the bench's 1 GB layer from a file with node:zlib took 59,000 faults and 1.1 s of
 * system time with the defaults, and 200-1,000 faults, 0.4 s and 1.3x less wall time with these
 * thresholds; a whole pull with node:zlib 6% less wall and 9% less CPU (docs/architecture.md). The
 * cost is freed memory kept in the heap: up to 64 MiB per malloc arena (threads get their own).
 *
 * Tuned, the process also keeps the high-water mark down while it pulls: each pull holds
 * {@link holdPullMemory} (free memory back to the kernel every 250 ms), and the download runs a
 * young-generation collection each 16 MiB it writes ({@link downloadWritten}). A peak is the sum
 * of every arena's own high-water mark plus V8's uncollected buffers, and both lower it in the same
 * time (docs/architecture.md, "Figures behind the defaults").
 *
 * It also sets V8's heap growing factor ({@link HEAP_GROWING_PERCENT}) for every thread's heap,
 * on any C library: fewer full collections of the unpack workers' small heaps.
 *
 * Process-wide and once: the CLI and fastpulld call it at startup with their environment; a library
 * user may. FASTPULL_TUNE_MALLOC=0 in `env` leaves the allocator and V8's heap alone (and
 * {@link trimAllocator} then trims nothing); NODE_OPTIONS in it is read for a heap flag of the
 * user's own. Only glibc's allocator is tuned.
 * @example
 * import { tuneAllocator } from '@fastpull/core';
 * tuneAllocator(process.env); // 'tuned' on glibc
 */
export function tuneAllocator(env: Readonly<Record<string, string | undefined>>): AllocatorTuning {
  disabled = env.FASTPULL_TUNE_MALLOC === '0';
  if (disabled) return 'disabled';
  if (done) return done;
  const flag = heapGrowingFlag(process.execArgv, env.NODE_OPTIONS);
  if (flag) setFlagsFromString(flag);
  try {
    done = nativeFs().tuneAllocator(MMAP_THRESHOLD, TRIM_THRESHOLD) ? 'tuned' : 'unsupported';
  } catch {
    done = 'unsupported'; // no addon: nothing to tune with (the unpack itself will say what is missing)
  }
  if (done === 'tuned' && v8Gc()) youngCollection = () => void collectHeap('minor');
  return done;
}

/** What {@link holdPullMemory} and {@link downloadWritten} run: injectable for tests. */
export interface PullMemoryHooks {
  /** Hands free memory back (default: {@link trimAllocator}). */
  trim(): void;
  /** A young-generation collection of this thread's heap. */
  collectYoung(): void;
  /** A full collection of this thread's heap. */
  collectFull(): void;
  /** The process's resident memory in bytes (default: process.memoryUsage.rss). */
  rss(): number;
}

let youngCollection: (() => void) | undefined;
let written = 0;
/** Young collections since the last full one. */
let young = 0;
let holders = 0;
let trimTimer: NodeJS.Timeout | undefined;
let hooks: Partial<PullMemoryHooks> = {};

type GcFunction = (options?: { type: 'minor' | 'major' }) => void;
let gcFunction: GcFunction | null | undefined;

/** V8's gc function without starting node with --expose-gc (a fresh context sees the flag); null where it cannot be had. */
function v8Gc(): GcFunction | null {
  if (gcFunction === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as unknown;
      gcFunction = typeof gc === 'function' ? (gc as GcFunction) : null;
    } catch {
      gcFunction = null;
    }
  }
  return gcFunction;
}

/**
 * Runs one of V8's collections on this thread now: 'minor' (the young generation) or 'major' (the
 * whole heap), reached without --expose-gc on node's command line. Returns false where the runtime
 * gives no way to (then V8's own collections alone free its garbage). A long-running process runs
 * a major one when it goes idle, before {@link trimAllocator}, so that buffers its pulls dropped are
 * back in the allocator (fastpulld does, when its last pull settles).
 * @example
 * import { collectHeap, trimAllocator } from '@fastpull/core';
 * collectHeap('major');
 * trimAllocator();
 */
export function collectHeap(type: 'minor' | 'major'): boolean {
  const gc = v8Gc();
  if (!gc) return false;
  // Node 20's V8 runs a young collection for { type: 'major' }: only a call without options is a full one.
  if (type === 'minor') gc({ type: 'minor' });
  else gc();
  return true;
}

/**
 * Counts bytes the download wrote on this thread and, once {@link tuneAllocator} tuned the process,
 * collects the young generation every {@link YOUNG_COLLECTION_BYTES}, and the whole heap instead
 * every {@link FULL_COLLECTION_BYTES}. Each network read is a fresh buffer of up to 64 KiB that is
 * garbage as soon as it is written, but V8 collects it only when its young generation (16 MiB of
 * semi-space on the main thread) fills with objects or its external memory grows by 64 MiB: a fast
 * download left 40-50 MiB of dead buffers that the allocator then kept as its high-water mark. A
 * young collection finds most of them dead at once and costs well under a millisecond. Some are
 * not (a read the HTTP client still held when the collection ran), move to the old generation,
 * and wait there for a full collection: through a 4 GiB download the thread's ArrayBuffers, looked
 * at after each young collection, climbed from 2 to about 40 MiB before V8 ran one, again and
 * again. A full collection of the main thread's heap takes about 15 ms; one per 256 MiB is 16 for
 * a 4 GiB layer. It lowers the peak of a large download (docs/architecture.md, "Figures behind
 * the defaults").
 */
export function downloadWritten(bytes: number): void {
  const collect = hooks.collectYoung ?? youngCollection;
  if (!collect) return;
  written += bytes;
  if (written < YOUNG_COLLECTION_BYTES) return;
  written = 0;
  if (++young < FULL_COLLECTION_BYTES / YOUNG_COLLECTION_BYTES) {
    collect();
    return;
  }
  young = 0;
  if (hooks.collectFull) hooks.collectFull();
  else collectHeap('major');
}

/**
 * Held by each pull while it runs: once {@link tuneAllocator} tuned the process, the allocator's
 * free memory goes back to the kernel while any pull holds it, whenever the process's RSS has
 * grown by {@link PULL_TRIM_SLACK_BYTES} since the last time it did (looked at every
 * {@link PULL_TRIM_INTERVAL_MS}). Threads allocate from arenas of their own, and each arena keeps up
 * to 64 MiB it freed, so without trims a pull's RSS is the sum of every arena's high-water mark.
 * A trim at every look whatever the RSS (as pulls did first) bought no lower peak: a pull's
 * buffers come and go as fast as they are decoded, so each trim gave back 20-40 MiB of free pages
 * that the next buffers faulted in again, and on a virtual machine a fault is dear (figures:
 * docs/architecture.md, "Figures behind the defaults").
 * Returns the release (idempotent).
 * @example
 * const release = holdPullMemory();
 * try { await work(); } finally { release(); }
 */
export function holdPullMemory(): () => void {
  const trim = hooks.trim ?? (done === 'tuned' ? () => void trimAllocator() : undefined);
  if (!trim) return () => undefined;
  if (holders++ === 0) {
    const rss = hooks.rss ?? (() => process.memoryUsage.rss());
    let floor = rss();
    trimTimer = setInterval(() => {
      if (rss() - floor < PULL_TRIM_SLACK_BYTES) return;
      trim();
      floor = rss();
    }, PULL_TRIM_INTERVAL_MS);
    trimTimer.unref();
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holders === 0) {
      clearInterval(trimTimer);
      trimTimer = undefined;
    }
  };
}

/** How many pulls hold {@link holdPullMemory} now. */
export function pullMemoryHolders(): number {
  return holders;
}

/** Replaces the hooks (tests); returns a function that restores the previous ones. */
export function setPullMemoryHooks(next: Partial<PullMemoryHooks>): () => void {
  const previous = hooks;
  hooks = next;
  written = 0;
  young = 0;
  return () => {
    hooks = previous;
    written = 0;
    young = 0;
  };
}

/**
 * Gives the free memory the tuned allocator keeps back to the kernel (glibc's `malloc_trim`: every
 * arena, its top and the free pages inside it). With {@link tuneAllocator}'s thresholds each arena
 * keeps up to 64 MiB freed, and pulls spread their buffers over many arenas (worker threads and the
 * thread pool get their own): a long-running process grows by that with each burst of pulls until
 * every arena is full. It calls this when it goes idle (fastpulld, when its last pull settles), so
 * what it holds between pulls is what it uses. Returns true when memory was released; false when
 * none was, the C library is not glibc, the addon is missing, or {@link tuneAllocator} was told to
 * leave the allocator alone.
 * @example
 * import { trimAllocator } from '@fastpull/core';
 * if (runningPulls === 0) trimAllocator();
 */
export function trimAllocator(): boolean {
  if (disabled) return false;
  try {
    return nativeFs().trimAllocator();
  } catch {
    return false; // no addon: nothing was tuned either
  }
}
