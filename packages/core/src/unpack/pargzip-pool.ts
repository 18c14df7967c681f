// The decode threads of the parallel gunzip: a pool of workers that run jobs in shared slots it lends out.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { FastpullError } from '../errors.js';
import { type InflateBudget, processInflateBudget } from './pargzip-budget.js';
import { JobSlot, nativeInflate, runJob, WINDOW, type JobInput, type JobResult, type WireJob, type WireResult } from './pargzip-job.js';
import type { FromInflateWorker, SlotRef, ToInflateWorker } from './pargzip-worker.js';
import { nativeHash } from './native.js';
import { compiledWorker } from './pool.js';

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

/** Milliseconds a pool with no stream keeps its idle threads, by default. */
const IDLE_THREAD_MS = 2000;

/** Free slots kept per decode thread (beyond them a released slot is let go). */
const FREE_SLOTS_PER_THREAD = 1;

/**
 * Worker threads that run decode jobs, one at a time each, in order of priority: a job the output is
 * waiting for goes before speculative ones. Jobs read and write shared slots ({@link JobSlot}) that the
 * pool lends and takes back, so no buffer moves between threads. Jobs running at once and the bytes of
 * slots count against a budget that all pools of the process share ({@link InflateBudget}).
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
  private readonly script: string | undefined;
  private readonly idle: Worker[] = [];
  /** Each worker, with the slots whose buffer it already has. */
  private readonly all = new Map<Worker, Set<number>>();
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
  /** Whether this pool waits for the budget to change (then it pumps again). */
  private waiting = false;
  /** This pool's waits on the budget now (they count among its waiters, which other pools yield to). */
  private ownWaits = 0;
  /** Owners that took slots and were not dropped yet (their streams run). */
  private readonly owners = new Set<object>();
  /** Callers of {@link slotFreed} waiting for a slot of this pool to come back. */
  private slotWaiters: (() => void)[] = [];
  /** Milliseconds a pool with no stream keeps its idle threads. */
  private readonly idleMs: number;
  private retireTimer: NodeJS.Timeout | undefined;

  /**
   * `threads` defaults to the machine's cores; 0 decodes on the calling thread (tests). `budget`
   * defaults to the process's ({@link processInflateBudget}). Threads end once no stream has used the
   * pool for `idleMs` (default 2 s): every unpack worker has a pool, and a long-lived process would
   * otherwise keep each pool's threads (some 9 MiB each) for good. INVALID_ARGUMENT for a negative
   * or fractional count.
   */
  constructor(options: { threads?: number; budget?: InflateBudget; idleMs?: number } = {}) {
    this.threads = options.threads ?? availableParallelism();
    if (!Number.isInteger(this.threads) || this.threads < 0) throw new FastpullError('INVALID_ARGUMENT', `inflate threads ${options.threads}: want an integer >= 0`);
    this.idleMs = options.idleMs ?? IDLE_THREAD_MS;
    if (!(this.idleMs >= 0)) throw new FastpullError('INVALID_ARGUMENT', `inflate idleMs ${options.idleMs}: want a number >= 0`);
    this.budget = options.budget ?? processInflateBudget();
    this.script = this.threads === 0 ? undefined : compiledWorker('pargzip-worker.js');
  }

  /** Whether the native decoder is available (else {@link createParallelGunzip} cannot be used). */
  static available(): boolean {
    return nativeInflate() !== null;
  }

  /** Slots whose pages are held (lent, plus free and not discarded); for tests. */
  get slotCount(): number {
    return this.lent.size + this.free.filter((f) => f.resident).length;
  }

  /** Decode threads alive, busy or idle; for tests. */
  get threadsAlive(): number {
    return this.all.size;
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
    clearTimeout(this.retireTimer);
    this.retireTimer = undefined;
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

  /** Drops free slot `i` for good: no thread keeps a view on it. */
  private forget(i: number): void {
    const gone = this.free.splice(i, 1)[0]!;
    for (const [w, known] of this.all) {
      if (known.delete(gone.id)) w.postMessage({ id: 0, forget: gone.id } satisfies ToInflateWorker);
    }
  }

  /** Runs a job whose input the caller wrote into its slot; `urgent` ones go first. */
  run(job: JobInput, lease: SlotLease, urgent: boolean, owner: object): Promise<JobResult> {
    if (job.data.buffer !== lease.slot.buffer || job.data.byteOffset !== lease.slot.input.byteOffset) throw new FastpullError('INTERNAL', 'inflate job: its input is not in its slot');
    const { data, ...rest } = job;
    const wire: WireJob = { ...rest, dataLength: data.length };
    return new Promise((resolve, reject) => {
      const entry: QueuedJob = { job: wire, lease, urgent, owner, resolve, reject };
      if (!this.script) {
        this.setRunning(lease, true);
        setImmediate(() => {
          this.setRunning(lease, false);
          const clock = nativeHash();
          const t0 = clock?.threadCpuNs();
          try {
            resolve(attach(runJob(wire, lease.slot), lease));
          } catch (e) {
            reject(e as Error);
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
    // No stream left: the free slots' bytes go back to the budget for other pools, and the threads
    // end unless a stream comes soon.
    if (this.owners.size === 0) {
      this.trimFree(0);
      this.retireLater();
    }
  }

  private retireLater(): void {
    clearTimeout(this.retireTimer);
    this.retireTimer = setTimeout(() => {
      this.retireTimer = undefined;
      if (this.owners.size > 0) return;
      if (this.busy > 0 || this.queue.length > 0) return this.retireLater();
      for (const w of this.idle.splice(0)) {
        this.all.delete(w);
        void w.terminate();
      }
    }, this.idleMs);
    this.retireTimer.unref();
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
      if (!this.budget.tryRun(this.queue[0]!.urgent, this.ownWaits)) {
        this.waitForRoom(generation);
        return;
      }
      const entry = this.queue.shift()!;
      const worker = this.idle.pop() ?? this.spawn();
      const known = this.all.get(worker)!;
      this.busy++;
      worker.ref();
      const id = this.nextId++;
      const finish = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        this.busy--;
        this.budget.endRun();
      };
      const onMessage = (msg: FromInflateWorker) => {
        if (msg.id !== id) return;
        finish();
        this.addCpu(entry.owner, msg.cpuNs);
        worker.unref();
        this.idle.push(worker);
        this.setRunning(entry.lease, false);
        if (msg.ok) entry.resolve(attach(msg.result, entry.lease));
        else entry.reject(new FastpullError('INTERNAL', `inflate worker: ${msg.message}`));
        this.pump();
      };
      const onError = (e: Error) => {
        finish();
        this.all.delete(worker);
        this.setRunning(entry.lease, false);
        entry.reject(new FastpullError('INTERNAL', `inflate worker failed: ${e.message}`, { cause: e }));
        this.pump();
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      const slot = entry.lease.slot;
      const ref: SlotRef = { id: slot.id, cap: slot.cap, inputBytes: slot.inputBytes };
      if (!known.has(slot.id)) {
        ref.buffer = slot.buffer;
        known.add(slot.id);
      }
      this.setRunning(entry.lease, true);
      worker.postMessage({ id, job: entry.job, slot: ref } satisfies ToInflateWorker);
    }
  }

  /** Pumps again once the budget changed since `generation`. */
  private waitForRoom(generation: number): void {
    if (this.waiting) return;
    this.waiting = true;
    void this.awaitBudget(generation).then(() => {
      this.waiting = false;
      this.pump();
    });
  }

  private awaitBudget(generation: number): Promise<void> {
    this.ownWaits++;
    return this.budget.changed(generation, true).then(() => void this.ownWaits--);
  }

  private spawn(): Worker {
    const worker = new Worker(this.script!);
    this.all.set(worker, new Set());
    worker.on('exit', () => {
      this.all.delete(worker);
      const i = this.idle.indexOf(worker);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return worker;
  }

  /** Stops the threads and gives the slots' bytes back to the budget. */
  async close(): Promise<void> {
    clearTimeout(this.retireTimer);
    this.queue.length = 0;
    for (const slot of [...this.free, ...this.lent.keys()]) if (slot.resident) this.budget.unreserve(slot.buffer.byteLength);
    this.free.length = 0;
    this.lent.clear();
    await Promise.all([...this.all.keys()].map((w) => w.terminate()));
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
