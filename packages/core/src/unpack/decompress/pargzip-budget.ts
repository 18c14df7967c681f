// What every parallel gunzip of a process shares across its threads: how many decode jobs run at once
// and how much memory their slots hold.
//
// Each unpack worker has its own decode pool (its queue and slots; the decode threads are the
// process's), so without a shared bound a pull of n layers on n cores could run n * n decode jobs and hold n pools'
// slots at once: on two cores, two pools of about 15 slots of 17 MiB each put the parallel inflater's
// peak RSS at 550 MiB. The bound lives in a SharedArrayBuffer that the main thread creates and hands to
// every unpack worker, so all pools of a process count against the same numbers.
import { availableCores } from '../../util/cpu.js';
import { isMainThread, workerData } from 'node:worker_threads';
import { FastpullError } from '../../errors.js';

// Int32 cells of the shared buffer.
const RUNNING = 0;
const UNITS = 1;
const WAITERS = 2;
const GEN = 3;
const MAX_RUNNING = 4;
const MAX_UNITS = 5;
const PEAK_RUNNING = 6;
const PEAK_UNITS = 7;
const CELLS = 8;
/** Slot memory is counted in units of this many bytes (an Int32 then counts up to 128 TiB). */
const UNIT = 64 * 1024;
/** A waiter looks again after this long even without a wake (a safety net, never the mechanism). */
const WAIT_MS = 100;

/**
 * Slot memory of all parallel gunzips of a process together, at most, by default: 64 MiB, three slots
 * of a stream of 4 MiB chunks (about 17 MiB each: 8 MiB of 16-bit symbols, 4 MiB of bytes, 4.5 MiB of
 * input), the job the output waits for and two ahead; four of 1 MiB chunks (about 13.6 MiB each).
 * A bound costs one large layer no time and two at once much memory (docs/architecture.md,
 * "Parallel gunzip" and "Figures behind the defaults").
 */
export const DEFAULT_INFLATE_SLOT_BYTES = 64 * 1024 * 1024;

/**
 * Slot memory per decode job that may run at once, by default, up to {@link DEFAULT_INFLATE_SLOT_BYTES}:
 * a slot for each (two on 2 cores, the job the output waits for and one ahead), as a third job ahead
 * only takes CPU from the unpack thread and the hashes, and fewer slots mean fewer pages to fault
 * in (docs/architecture.md, "Figures behind the defaults").
 */
export const INFLATE_SLOT_BYTES_PER_JOB = 24 * 1024 * 1024;

/** Limits of an {@link InflateBudget}. */
export interface InflateBudgetLimits {
  /** Decode jobs running at once in the whole process (default: the cores this process may use, availableCores). */
  running?: number;
  /** Bytes all slots may hold together (default {@link INFLATE_SLOT_BYTES_PER_JOB} per running job, at most {@link DEFAULT_INFLATE_SLOT_BYTES}). */
  slotBytes?: number;
}

/**
 * Counters in shared memory that bound the decode jobs running at once and the bytes of their slots,
 * for every pool that holds the same buffer, whatever thread it runs on. A stream's next job may
 * always have its slot (so that a stream never waits on slots other streams hold for guesses), which
 * can put the bytes over the bound by a slot per stream; pools then give free slots back at once.
 * @example
 * const budget = InflateBudget.create({ running: 4, slotBytes: 64 << 20 });
 * const pool = new InflatePool({ threads: 4, budget });
 */
export class InflateBudget {
  private readonly cells: Int32Array;

  /** The budget whose counters live in `buffer` (from {@link InflateBudget.buffer} of another thread's). */
  constructor(
    /** The shared counters: hand them to another thread to share this budget with it. */
    readonly buffer: SharedArrayBuffer,
  ) {
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < CELLS * 4)
      throw new FastpullError('INVALID_ARGUMENT', 'inflate budget: not a budget buffer');
    this.cells = new Int32Array(buffer, 0, CELLS);
  }

  /** A new budget; INVALID_ARGUMENT for limits that are not positive integers. */
  static create(limits: InflateBudgetLimits = {}): InflateBudget {
    const running = limits.running ?? Math.max(1, availableCores());
    const slotBytes = limits.slotBytes ?? Math.min(DEFAULT_INFLATE_SLOT_BYTES, INFLATE_SLOT_BYTES_PER_JOB * running);
    if (!Number.isSafeInteger(running) || running < 1) throw new FastpullError('INVALID_ARGUMENT', `inflate budget: running ${running}: want an integer >= 1`);
    if (!Number.isSafeInteger(slotBytes) || slotBytes < 1)
      throw new FastpullError('INVALID_ARGUMENT', `inflate budget: slot bytes ${slotBytes}: want an integer >= 1`);
    const b = new InflateBudget(new SharedArrayBuffer(CELLS * 4));
    b.cells[MAX_RUNNING] = Math.min(running, 0x7fffffff);
    b.cells[MAX_UNITS] = Math.min(Math.max(1, Math.floor(slotBytes / UNIT)), 0x7fffffff);
    return b;
  }

  /** Decode jobs that may run at once. */
  get maxRunning(): number {
    return Atomics.load(this.cells, MAX_RUNNING);
  }

  /** Bytes all slots may hold together. */
  get slotBytes(): number {
    return Atomics.load(this.cells, MAX_UNITS) * UNIT;
  }

  /**
   * Bounds the bytes all slots may hold together from now on, for every thread that shares this
   * budget (a pass's Tuning.inflateSlotBytes, for measuring); INVALID_ARGUMENT unless a positive integer.
   */
  setSlotBytes(slotBytes: number): void {
    if (!Number.isSafeInteger(slotBytes) || slotBytes < 1)
      throw new FastpullError('INVALID_ARGUMENT', `inflate budget: slot bytes ${slotBytes}: want an integer >= 1`);
    Atomics.store(this.cells, MAX_UNITS, Math.min(Math.max(1, Math.floor(slotBytes / UNIT)), 0x7fffffff));
    this.bump();
  }

  /** Decode jobs running now. */
  get running(): number {
    return Atomics.load(this.cells, RUNNING);
  }

  /** Bytes the slots hold now (rounded up to 64 KiB each). */
  get slotBytesHeld(): number {
    return Atomics.load(this.cells, UNITS) * UNIT;
  }

  /** The most decode jobs that ran at once so far. */
  get peakRunning(): number {
    return Atomics.load(this.cells, PEAK_RUNNING);
  }

  /** The most bytes the slots held at once so far. */
  get peakSlotBytes(): number {
    return Atomics.load(this.cells, PEAK_UNITS) * UNIT;
  }

  /** Pools waiting for a running place for a job the output waits for, now. */
  get waiters(): number {
    return Atomics.load(this.cells, WAITERS);
  }

  /** Changes so far; read it before a try, then {@link changed} does not miss a change after the try. */
  get generation(): number {
    return Atomics.load(this.cells, GEN);
  }

  /**
   * Takes a running place when there is one. A job the output waits for (`urgent`) may take one
   * place past the bound, so that it never queues behind guesses; a speculative one leaves places to
   * the pools waiting to run such a job (`self` of them being the caller's own waits).
   */
  tryRun(urgent: boolean, self = 0): boolean {
    for (;;) {
      const r = Atomics.load(this.cells, RUNNING);
      const limit = Atomics.load(this.cells, MAX_RUNNING) + (urgent ? 1 : 0);
      const others = urgent ? 0 : Math.max(0, Atomics.load(this.cells, WAITERS) - self);
      if (r + others >= limit) return false;
      if (Atomics.compareExchange(this.cells, RUNNING, r, r + 1) === r) {
        this.raise(PEAK_RUNNING, r + 1);
        return true;
      }
    }
  }

  /** Gives a running place back. */
  endRun(): void {
    Atomics.sub(this.cells, RUNNING, 1);
    this.bump();
  }

  /** Counts `bytes` of a new slot when they fit, or always when `force`; false when they do not fit. */
  reserve(bytes: number, force: boolean): boolean {
    const u = units(bytes);
    for (;;) {
      const held = Atomics.load(this.cells, UNITS);
      if (!force && held + u > Atomics.load(this.cells, MAX_UNITS)) return false;
      if (Atomics.compareExchange(this.cells, UNITS, held, held + u) === held) {
        this.raise(PEAK_UNITS, held + u);
        return true;
      }
    }
  }

  /** Stops counting `bytes` of a slot let go. */
  unreserve(bytes: number): void {
    Atomics.sub(this.cells, UNITS, units(bytes));
    this.bump();
  }

  /**
   * Resolves once something was given back since `generation` was read (at once if it already was),
   * or after 100 ms. A caller waiting for a running place for a job the output waits for says so
   * (`forRun`): speculative jobs of other pools leave places to it. A wait for a place for a guess
   * must not: pools waiting with guesses would each leave the place to the others, for good.
   */
  changed(generation: number, forRun: boolean): Promise<void> {
    if (forRun) Atomics.add(this.cells, WAITERS, 1);
    const done = (): void => {
      if (forRun) Atomics.sub(this.cells, WAITERS, 1);
    };
    const w = Atomics.waitAsync(this.cells, GEN, generation, WAIT_MS);
    if (!w.async) {
      done();
      return Promise.resolve();
    }
    // A pending waitAsync does not keep the event loop alive; the timer does, until the wait ends.
    const alive = setTimeout(() => undefined, WAIT_MS * 2);
    return w.value.then(() => {
      clearTimeout(alive);
      done();
    });
  }

  private raise(cell: number, value: number): void {
    for (let p = Atomics.load(this.cells, cell); p < value; p = Atomics.load(this.cells, cell)) {
      if (Atomics.compareExchange(this.cells, cell, p, value) === p) return;
    }
  }

  private bump(): void {
    Atomics.add(this.cells, GEN, 1);
    Atomics.notify(this.cells, GEN);
  }
}

function units(bytes: number): number {
  return Math.ceil(bytes / UNIT);
}

let processBudget: InflateBudget | undefined;

/**
 * The budget every decode pool of this process shares: created on the main thread, handed to worker
 * threads as `workerData.inflateBudget` (see {@link inflateBudgetWorkerData}).
 */
export function processInflateBudget(): InflateBudget {
  if (!processBudget) {
    const given = isMainThread ? undefined : (workerData as { inflateBudget?: unknown } | null | undefined)?.inflateBudget;
    processBudget = given instanceof SharedArrayBuffer ? new InflateBudget(given) : InflateBudget.create();
  }
  return processBudget;
}

/** What a worker thread's `workerData` carries so that its decode pools share this process's budget. */
export function inflateBudgetWorkerData(): { inflateBudget: SharedArrayBuffer } {
  return { inflateBudget: processInflateBudget().buffer };
}
