// What a pull tells an observer of its inner workings (for traces): every range request, the bytes
// landing, and which thread ran each layer's unpack pass. Nothing is gathered when no observer is given.
import type { RangeRequest } from '../registry/range-request.js';
import type { UnpackTimings } from '../unpack/layer.js';

/** A layer's unpack pass got its slot: where it runs, and how far it has read. */
export interface UnpackPassStart {
  /** `threadId` of the worker thread that runs the pass (0: the pulling thread, without workers). */
  readonly thread: number;
  /** Compressed bytes of the blob the pass has read so far; cheap, callable at any time. */
  readonly read: () => number;
  /** Whether it runs on a slot another pass lent while that one waits for its download (over the unpack concurrency). */
  readonly borrowed?: boolean;
}

/** A layer's unpack pass runs on its worker thread: which kernel thread, on which CPUs. */
export interface UnpackPassPlace {
  /** `threadId` of the worker thread, as in {@link UnpackPassStart}. */
  readonly thread: number;
  /** The kernel's id of that worker thread (its directory in /proc/PID/task). */
  readonly tid: number;
  /** The CPUs that thread may run on as the pass starts (its pull's, under PullOptions.cpuBudget). */
  readonly cpus: readonly number[];
}

/** A layer's unpack pass ended. */
export interface UnpackPassEnd {
  /** The thread it ran on, as in {@link UnpackPassStart}. */
  readonly thread: number;
  /** Where its time went (absent when it failed). */
  readonly timings?: UnpackTimings;
}

/**
 * Watches a pull from inside (PullOptions.observer). Every member is optional and called
 * synchronously from the pull's own work, so it must be quick; `index` is the layer's position,
 * 0 at the bottom. Times are `performance.now()` of the pulling thread.
 * @example
 * const observer: PullObserver = { range: (index, r) => console.log(index, r.offset, r.bytes, r.outcome) };
 * await pull('127.0.0.1:5000/app:1', { root, observer });
 */
export interface PullObserver {
  /**
   * `n` more bytes of layer `index` are in its blob file: fetched now, or (`resumed`) found there
   * from an earlier pull that stopped, reported once when its download starts.
   */
  readonly bytes?: (index: number, n: number, resumed: boolean) => void;
  /** One HTTP request for a range of layer `index`'s blob ended, whatever its outcome. */
  readonly range?: (index: number, request: RangeRequest) => void;
  /** Layer `index`'s unpack pass started: it was handed to the thread that runs it. */
  readonly unpackStarted?: (index: number, pass: UnpackPassStart) => void;
  /** Layer `index`'s unpack pass runs on its worker thread (after unpackStarted; never without workers). */
  readonly unpackPlaced?: (index: number, place: UnpackPassPlace) => void;
  /** Layer `index`'s unpack pass ended (succeeded or failed). */
  readonly unpackEnded?: (index: number, pass: UnpackPassEnd) => void;
}

/**
 * One observer that tells both, `a` first; whichever is given when only one is.
 * @example const observer = observeBoth(trace?.observer, { unpackPlaced: (i, p) => log(i, p.tid) });
 */
export function observeBoth(a: PullObserver | undefined, b: PullObserver | undefined): PullObserver | undefined {
  if (!a || !b) return a ?? b;
  return {
    bytes: (index, n, resumed) => (a.bytes?.(index, n, resumed), b.bytes?.(index, n, resumed)),
    range: (index, request) => (a.range?.(index, request), b.range?.(index, request)),
    unpackStarted: (index, pass) => (a.unpackStarted?.(index, pass), b.unpackStarted?.(index, pass)),
    unpackPlaced: (index, place) => (a.unpackPlaced?.(index, place), b.unpackPlaced?.(index, place)),
    unpackEnded: (index, pass) => (a.unpackEnded?.(index, pass), b.unpackEnded?.(index, pass)),
  };
}
