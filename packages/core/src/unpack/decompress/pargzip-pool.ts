// The parallel gunzip's way to its decode threads: runs jobs, in order of priority, in shared slots it lends out.
import { availableCores } from '../../util/cpu.js';
import { FastpullError } from '../../errors.js';
import { type InflateBudget, processInflateBudget } from './pargzip-budget.js';
import {
  finishJob,
  JobSlot,
  nativeInflate,
  prepareJob,
  runJob,
  WINDOW,
  type DecodeRunner,
  type JobInput,
  type JobResult,
  type WireJob,
  type WireResult,
} from './pargzip-job.js';
import { nativeHash } from '../../native/addon.js';

/** A slot lent to a stream for one job (and its result, until released). */
export interface SlotLease {
  slot: JobSlot;
  lease: number;
}

interface QueuedJob {
  job: WireJob;
  lease: SlotLease;
  urgent: boolean;
  owner: object;
  resolve: (r: JobResult) => void;
  reject: (e: Error) => void;
}

/** Free slots kept per decode thread (beyond them a released slot is let go). */
const FREE_SLOTS_PER_THREAD = 1;

/**
 * Runs decode jobs on the process's decode threads (native/fastpull_inflate_threads.h: one set of
 * threads for every pool of every unpack worker), at most `threads` of this pool's at once, in order
 * of priority: a job the output is waiting for goes before speculative ones. Jobs read and write
 * shared slots ({@link JobSlot}) that the pool lends and takes back, so no buffer moves between
 * threads. Jobs running at once and the bytes of slots count against a budget that all pools of the
 * process share ({@link InflateBudget}).
 * @example
 * const pool = new InflatePool({ threads: 4 });
 * try {
 *   await pipeline(fs.createReadStream('layer.tar.gz'), createParallelGunzip({ pool }), fs.createWriteStream('layer.tar'));
 * } finally {
 *   await pool.close();
 * }
 */
export class InflatePool {
  /** Threads decoding at once, at most (the budget may allow fewer). */
  readonly threads: number;
  /** What this pool's jobs and slots count against. */
  readonly budget: InflateBudget;
  /** The way to the process's decode threads; undefined for `threads: 0`, or until the first job. */
  private runner: DecodeRunner | undefined;
  /** What to do when each job on the decode threads ends, by id. */
  private readonly running = new Map<number, (cpuNs: number, failed: boolean) => void>();
  private readonly queue: QueuedJob[] = [];
  private busy = 0;
  private nextId = 1;
  private nextSlot = 1;
  private nextLease = 1;
  private readonly free: JobSlot[] = [];
  /** CPU ns of each owner's jobs so far, on the clocks of the threads that ran them. */
  private readonly cpu = new WeakMap<object, number>();
  /** Lent slots: the lease, its owner, and whether a job runs in it now. */
  private readonly lent = new Map<JobSlot, { lease: number; owner: object; running: boolean; releaseWhenDone: boolean }>();
  /** Whether this pool waits for the budget to change with a speculative job first in its queue (then it pumps again). */
  private waiting = false;
  /** Whether it waits with a job first that the output waits for: that wait counts among the budget's waiters, which other pools' speculative jobs yield to. */
  private waitingUrgent = false;
  /** This pool's waits among the budget's waiters now (0 or 1). */
  private ownWaits = 0;
  /** Owners that took slots and were not dropped yet (their streams run). */
  private readonly owners = new Set<object>();
  /** Callers of {@link slotFreed} waiting for a slot of this pool to come back. */
  private slotWaiters: (() => void)[] = [];
  /**
   * `threads` (default the cores this process may use, availableCores): this pool's jobs running at once, and at least as many
   * decode threads run in the process; 0 decodes on the calling thread (tests). `budget` defaults to
   * the process's ({@link processInflateBudget}). `idleMs` is accepted and ignored: the decode
   * threads are the process's (a few hundred KiB each), not the pool's to end. INVALID_ARGUMENT for
   * a negative or fractional count.
   */
  constructor(options: { threads?: number; budget?: InflateBudget; idleMs?: number } = {}) {
    this.threads = options.threads ?? availableCores();
    if (!Number.isInteger(this.threads) || this.threads < 0)
      throw new FastpullError('INVALID_ARGUMENT', `inflate threads ${options.threads}: want an integer >= 0`);
    if (options.idleMs !== undefined && !(options.idleMs >= 0))
      throw new FastpullError('INVALID_ARGUMENT', `inflate idleMs ${options.idleMs}: want a number >= 0`);
    this.budget = options.budget ?? processInflateBudget();
  }

  /** Whether the native decoder is available (else {@link createParallelGunzip} cannot be used). */
  static available(): boolean {
    return nativeInflate() !== null;
  }

  /** Slots whose pages are held (lent, plus free and not discarded); for tests. */
  get slotCount(): number {
    return this.lent.size + this.free.filter((f) => f.resident).length;
  }

  /** Decode threads running in the process (every pool's jobs share them); for tests. */
  get threadsAlive(): number {
    return nativeInflate()?.decodeThreads?.() ?? 0;
  }

  /** This pool's jobs on the decode threads now; for tests. */
  get jobsRunning(): number {
    return this.running.size;
  }

  /** Slots ever allocated; for tests. */
  get slotsCreated(): number {
    return this.nextSlot - 1;
  }

  /** Slots lent out now; for tests. */
  get slotsLent(): number {
    return this.lent.size;
  }

  /**
   * CPU milliseconds of `owner`'s jobs that have returned, each on the clock of the thread that ran
   * it (speculative jobs whose output was not used count too); undefined without the addon's clock.
   */
  cpuMs(owner: object): number | undefined {
    return nativeHash() ? (this.cpu.get(owner) ?? 0) / 1e6 : undefined;
  }

  private addCpu(owner: object, ns: number | undefined): void {
    if (ns !== undefined && ns >= 0) this.cpu.set(owner, (this.cpu.get(owner) ?? 0) + ns);
  }

  /**
   * Lends `owner` a slot for a job of at most `cap` symbols and `inputBytes` of input: a free one that
   * fits, or a new one even past the budget (for the job a stream's output waits for).
   */
  takeSlot(owner: object, cap: number, inputBytes: number): SlotLease {
    return this.lend(owner, cap, inputBytes, true)!;
  }

  /** Like {@link takeSlot}, but undefined when a new slot would not fit the budget (for speculative jobs). */
  tryTakeSlot(owner: object, cap: number, inputBytes: number): SlotLease | undefined {
    return this.lend(owner, cap, inputBytes, false);
  }

  /**
   * Resolves when a slot may have come free: one of this pool's given back, or the budget changed
   * since `generation` (read before the failed {@link tryTakeSlot}), or after 100 ms.
   */
  slotFreed(generation: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let done = false;
      const once = (): void => {
        if (done) return;
        done = true;
        resolve();
      };
      this.slotWaiters.push(once);
      void this.budget.changed(generation, false).then(once);
    });
  }

  private lend(owner: object, cap: number, inputBytes: number, force: boolean): SlotLease | undefined {
    const input = Math.ceil(Math.max(inputBytes, 1) / SLOT_INPUT_STEP) * SLOT_INPUT_STEP;
    // A resident free slot that fits costs nothing; else the budget must have room for one (a
    // discarded slot of the pool's comes back, page by page as it is written, or a new one).
    let i = this.bestFree(cap, inputBytes, true);
    if (i < 0) {
      i = this.bestFree(cap, inputBytes, false);
      if (!this.budget.reserve(i >= 0 ? this.free[i]!.buffer.byteLength : JobSlot.bytes(cap, input), force)) return undefined;
    }
    let slot: JobSlot;
    if (i >= 0) {
      slot = this.free.splice(i, 1)[0]!;
      slot.resident = true;
    } else {
      slot = new JobSlot(this.nextSlot++, cap, input);
    }
    const lease = this.nextLease++;
    this.owners.add(owner);
    this.lent.set(slot, { lease, owner, running: false, releaseWhenDone: false });
    return { slot, lease };
  }

  /** The free slot (resident or discarded) that fits a job of `cap` symbols and `inputBytes` with the least input, or -1. */
  private bestFree(cap: number, inputBytes: number, resident: boolean): number {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const f = this.free[i]!;
      if (f.resident === resident && f.cap === cap && f.inputBytes >= inputBytes && (best < 0 || f.inputBytes < this.free[best]!.inputBytes)) best = i;
    }
    return best;
  }

  /** Takes a slot back (a job still running in it gives it back when done). Later calls for the same lease do nothing. */
  release(l: SlotLease): void {
    const info = this.lent.get(l.slot);
    if (!info || info.lease !== l.lease) return;
    if (info.running) {
      info.releaseWhenDone = true;
      return;
    }
    this.lent.delete(l.slot);
    this.free.push(l.slot);
    // Free slots stay resident for the next jobs (a fresh one page-faults all its bytes), one per
    // thread; none once no stream runs, or while the slots of the process hold more than the budget
    // (a stream's next job may take one past it): their bytes go back.
    const over = this.budget.slotBytesHeld > this.budget.slotBytes;
    this.trimFree(this.owners.size === 0 || over ? 0 : Math.max(1, this.threads) * FREE_SLOTS_PER_THREAD);
    const ws = this.slotWaiters;
    this.slotWaiters = [];
    for (const w of ws) w();
  }

  /** Discards free slots past the `keep` most recently given back, and forgets discarded ones past as many as are lent. */
  private trimFree(keep: number): void {
    let resident = 0;
    for (let i = this.free.length - 1; i >= 0; i--) {
      const f = this.free[i]!;
      if (!f.resident || ++resident <= keep) continue;
      this.budget.unreserve(f.buffer.byteLength);
      if (nativeInflate()?.discard?.(new Uint8Array(f.buffer)) !== undefined) {
        f.resident = false;
      } else {
        this.forget(i);
      }
    }
    // Discarded slots hold address space only; keep no more of them than could be needed again.
    let discarded = 0;
    for (let i = this.free.length - 1; i >= 0; i--) if (!this.free[i]!.resident && ++discarded > Math.max(1, this.threads) * 2 + 2) this.forget(i);
  }

  /** Drops free slot `i` for good. */
  private forget(i: number): void {
    this.free.splice(i, 1);
  }

  /** Runs a job whose input the caller wrote into its slot; `urgent` ones go first. */
  run(job: JobInput, lease: SlotLease, urgent: boolean, owner: object): Promise<JobResult> {
    if (job.data.buffer !== lease.slot.buffer || job.data.byteOffset !== lease.slot.input.byteOffset)
      throw new FastpullError('INTERNAL', 'inflate job: its input is not in its slot');
    const { data, ...rest } = job;
    const wire: WireJob = { ...rest, dataLength: data.length };
    return new Promise((resolve, reject) => {
      const entry: QueuedJob = { job: wire, lease, urgent, owner, resolve, reject };
      if (this.threads === 0) {
        this.setRunning(lease, true);
        setImmediate(() => {
          this.setRunning(lease, false);
          const clock = nativeHash();
          const t0 = clock?.threadCpuNs();
          try {
            resolve(attach(runJob(wire, lease.slot), lease));
          } catch (e) {
            reject(e);
          } finally {
            if (clock && t0 !== undefined) this.addCpu(owner, clock.threadCpuNs() - t0);
          }
        });
        return;
      }
      if (urgent) {
        const i = this.queue.findIndex((q) => !q.urgent);
        this.queue.splice(i < 0 ? this.queue.length : i, 0, entry);
      } else {
        this.queue.push(entry);
      }
      this.pump();
    });
  }

  /**
   * Drops the queued (not yet running) jobs of `owner`, whose promises never settle, and takes back all
   * its slots; with no other owner's stream running, the free ones are let go.
   */
  drop(owner: object): void {
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.queue[i]!.owner === owner) this.queue.splice(i, 1);
    this.owners.delete(owner);
    for (const [slot, info] of [...this.lent]) if (info.owner === owner) this.release({ slot, lease: info.lease });
    // No stream left: the free slots' bytes go back to the budget for other pools.
    if (this.owners.size === 0) this.trimFree(0);
  }

  private setRunning(l: SlotLease, running: boolean): void {
    const info = this.lent.get(l.slot);
    if (!info || info.lease !== l.lease) return;
    info.running = running;
    if (!running && info.releaseWhenDone) this.release(l);
  }

  private pump(): void {
    while (this.busy < this.threads && this.queue.length > 0) {
      const generation = this.budget.generation;
      const urgent = this.queue[0]!.urgent;
      if (!this.budget.tryRun(urgent, this.ownWaits)) {
        this.waitForRoom(generation, urgent);
        return;
      }
      const entry = this.queue.shift()!;
      this.busy++;
      const id = this.nextId++;
      let prepared: ReturnType<typeof prepareJob>;
      try {
        prepared = prepareJob(entry.job, entry.lease.slot);
        this.runner ??= this.openRunner();
        this.setRunning(entry.lease, true);
        nativeInflate()!.decodeSubmit!(this.runner, id, ...prepared.args);
      } catch (e) {
        this.busy--;
        this.budget.endRun();
        this.setRunning(entry.lease, false);
        entry.reject(e instanceof FastpullError ? e : new FastpullError('INTERNAL', `inflate job: ${(e as Error).message}`, { cause: e }));
        continue;
      }
      this.running.set(id, (cpuNs: number, failed: boolean): void => {
        this.busy--;
        this.budget.endRun();
        if (cpuNs >= 0) this.addCpu(entry.owner, cpuNs);
        this.setRunning(entry.lease, false);
        if (failed) entry.reject(new FastpullError('INTERNAL', 'inflate job: out of memory'));
        else entry.resolve(attach(finishJob(entry.job, prepared), entry.lease));
        this.pump();
      });
    }
  }

  /** The way to the decode threads, whose reports come back on this thread. */
  private openRunner(): DecodeRunner {
    const native = nativeInflate();
    if (!native?.decodeRunner) throw new FastpullError('INTERNAL', 'inflate job: the inflate addon has no decode threads (rebuild it)');
    return native.decodeRunner((id: number, cpuNs: number, failed: boolean) => {
      const done = this.running.get(id);
      this.running.delete(id);
      done?.(cpuNs, failed);
    }, this.threads);
  }

  /**
   * Pumps again once the budget changed since `generation`. Only a wait for a job the output waits
   * for (`urgent`) asks the other pools' speculative jobs to leave it a place: pools that each waited
   * with a guess first, each yielding to the others' waits, would never run one (two streams on a
   * budget of one running job stalled for good that way).
   */
  private waitForRoom(generation: number, urgent: boolean): void {
    if (urgent ? this.waitingUrgent : this.waiting) return;
    if (urgent) {
      this.waitingUrgent = true;
      this.ownWaits++;
    } else {
      this.waiting = true;
    }
    void this.budget.changed(generation, urgent).then(() => {
      if (urgent) {
        this.waitingUrgent = false;
        this.ownWaits--;
      } else {
        this.waiting = false;
      }
      this.pump();
    });
  }

  /**
   * The job in `l`'s slot is one the output waits for now (a guess or continuation launched ahead of
   * it): if it is still queued, it goes before the speculative jobs and may take a running place past
   * the bound, as a job launched for the output does. Nothing for a job already running or done.
   */
  hurry(l: SlotLease): void {
    const i = this.queue.findIndex((q) => q.lease.slot === l.slot && q.lease.lease === l.lease);
    if (i < 0 || this.queue[i]!.urgent) return;
    const entry = this.queue.splice(i, 1)[0]!;
    entry.urgent = true;
    const at = this.queue.findIndex((q) => !q.urgent);
    this.queue.splice(at < 0 ? this.queue.length : at, 0, entry);
    this.pump();
  }

  /**
   * Drops the queued jobs and forgets those on the decode threads (their promises never settle; the
   * running ones finish in memory the runner keeps alive), and gives the slots' bytes back to the
   * budget. A later job starts afresh.
   */
  async close(): Promise<void> {
    this.queue.length = 0;
    for (let n = this.running.size; n > 0; n--) this.budget.endRun();
    this.busy -= this.running.size;
    this.running.clear();
    for (const slot of [...this.free, ...this.lent.keys()]) if (slot.resident) this.budget.unreserve(slot.buffer.byteLength);
    this.free.length = 0;
    this.lent.clear();
    if (this.runner) nativeInflate()!.decodeRunnerClose!(this.runner);
    this.runner = undefined;
  }
}

/** Slot inputs grow in steps of this many bytes. */
const SLOT_INPUT_STEP = 256 * 1024;

/** A result with its views on the slot. */
function attach(w: WireResult, lease: SlotLease): JobResult {
  const { n16, n8, ...rest } = w;
  return { ...rest, out16: lease.slot.out16.subarray(0, n16), out8: lease.slot.out8.subarray(WINDOW, WINDOW + n8), slot: lease.slot, lease: lease.lease };
}

let sharedPool: InflatePool | undefined;

/**
 * The thread's shared decode pool, one thread per core. Its idle threads do not keep the process alive.
 * @example
 * const gunzip = createParallelGunzip({ pool: sharedInflatePool() });
 */
export function sharedInflatePool(): InflatePool {
  sharedPool ??= new InflatePool();
  return sharedPool;
}
