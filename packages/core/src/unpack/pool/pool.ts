// A process-wide pool of unpack workers: bounds how many layers unpack at once, runs the largest
// waiting layer first (it bounds the pull), and keeps each layer's pipeline off the main thread.
import type { Worker } from 'node:worker_threads';
import { WatermarkView } from '../../content/watermark.js';
import { abortError, FastpullError } from '../../errors.js';
import { MAX_POOL_SIZE, poolSizeFor } from './size.js';
import type { PullCpuBudget } from '../../util/pull-cpu.js';
import type { UnpackedLayer } from '../layer.js';
import { machineIdleMs, PassWatch } from './lending.js';
import { compiledWorker, startUnpackWorker, takeWorkerAhead } from './spawn.js';
import { runOnWorker } from './task-channel.js';
import { BudgetedPasses } from './budgeted.js';
import type { FromWorker, ToWorker, WorkerTask } from './worker.js';

/** Options of an {@link UnpackPool}. */
export interface UnpackPoolOptions {
  /** Layers unpacked at once; default {@link poolSizeFor} the cores this process may use (availableCores). */
  readonly size?: number;
  /** Run each layer on a worker thread (default true); false runs them on the calling thread. */
  readonly threads?: boolean;
  /**
   * The machine's idle CPU time so far, in core-milliseconds, that a pass waiting for its download
   * looks at before it lends its slot (default {@link machineIdleMs}, from the kernel's counts).
   * Tests pass their own to make the machine idle or busy.
   */
  readonly machineIdle?: () => number;
}

/** Where a pass on a worker runs, as the worker says once it has started it. */
export interface PassThread {
  /** The kernel's id of the worker's thread (its directory in /proc/PID/task). */
  readonly tid: number;
  /** The CPUs it may run on (its pull's, under a CPU budget). */
  readonly cpus: readonly number[];
}

/** Options of one {@link UnpackPool.run}. */
export interface RunOptions {
  /** Withdraws a waiting task or stops a running one (ABORTED). */
  readonly signal?: AbortSignal;
  /** Higher runs first among waiting tasks of one rank (pull uses the layer size). */
  readonly priority?: number;
  /** Higher runs first among waiting tasks, before `priority` (pull gives its pull's priority); read again at each grant. */
  readonly rank?: { readonly rank: number };
  /**
   * The CPU budget of the task's pull: the pass runs on a worker confined to its CPUs (and follows
   * it when it loosens), and the pull's passes take at most {@link poolSizeFor} its cores of the
   * pool's slots at once. Without worker threads the pass runs unconfined on the calling thread.
   */
  readonly cpuBudget?: PullCpuBudget;
  /**
   * Called when the task has its slot and is handed to the thread that runs it, with that thread's
   * `threadId` (0: the calling thread, when the pool runs no workers), and whether it runs on a slot
   * that a pass waiting for its download lent ({@link LEND_WAIT_SHARE}), over the pool's size. A
   * trace times the pass's span from here: the worker's own clock starts once the task reaches it.
   */
  readonly onStart?: (thread: number, borrowed: boolean) => void;
  /**
   * Called once the pass runs on its worker, on its CPUs: the kernel's id of that thread and those
   * CPUs (a message from the worker, so later than onStart). Not called without workers.
   */
  readonly onPlaced?: (where: PassThread) => void;
  /**
   * Called with the compressed bytes the pass has consumed so far, as they grow: at most every
   * CONSUMED_POLL_MS from a worker thread (read from shared memory, no messages), at each read
   * otherwise.
   */
  readonly onBytes?: (consumed: number) => void;
}

export { MAX_POOL_SIZE, poolSizeFor };

export { compiledWorker, WORKER_YOUNG_GENERATION_MB } from './spawn.js';

/** Whether the blob of `task` has landed in full: always, for a blob it does not follow. */
function landedCheck(task: WorkerTask): () => boolean {
  const follow = task.follow;
  if (follow === undefined) return () => true;
  const view = new WatermarkView(follow.watermark);
  return () => view.value >= follow.size;
}

interface Waiting {
  readonly rank: { readonly rank: number } | undefined;
  readonly budget: PullCpuBudget | undefined;
  readonly priority: number;
  readonly seq: number;
  /** Whether the task's blob has landed in full (a pass on it will not wait for its download). */
  readonly landed: () => boolean;
  readonly start: (borrowed: boolean) => void;
}

interface Slot {
  worker: Worker;
  busy: boolean;
  /** Whether the worker has loaded the unpacker (a task given to it starts at once). */
  ready: boolean;
  /** Order of starting: the pool keeps its oldest workers and ends the newest spare ones. */
  readonly born: number;
}

/**
 * Bounds how many layers unpack at once and runs each on a worker thread, largest waiting layer
 * first. Pulls share {@link sharedUnpackPool} unless their options ask for their own. Throws
 * INVALID_ARGUMENT for a size that is not an integer.
 * @example
 * const pool = new UnpackPool({ size: 2 });
 * try {
 *   const r = await pool.run({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: '/tmp/rootfs' });
 *   console.log(r.diffID, r.uncompressedSize);
 * } finally {
 *   await pool.close();
 * }
 */
export class UnpackPool {
  /** Layers unpacked at once. */
  readonly size: number;
  private readonly script: string | undefined;
  private readonly idle: Slot[] = [];
  private readonly all = new Set<Slot>();
  private readonly waiting: Waiting[] = [];
  private active = 0;
  private seq = 0;
  private nextId = 1;
  /** Tasks granted a slot that have not taken their worker yet. */
  private granted = 0;
  /** Running passes that lent their slot while they wait for their download (see {@link LEND_WAIT_SHARE}). */
  private lent = 0;
  /** Tasks running on slots lent to them. */
  private borrowed = 0;
  private born = 0;
  /** A worker ended before it was ready: tasks then go to workers without waiting for them. */
  private broken = false;
  private closed = false;
  private readonly machineIdle: () => number;
  /** Passes running now of each pull with a CPU budget: poolSizeFor(its cores) at most. */
  private readonly budgeted = new BudgetedPasses(poolSizeFor);

  constructor(options: UnpackPoolOptions = {}) {
    this.size = options.size ?? poolSizeFor();
    this.machineIdle = options.machineIdle ?? machineIdleMs;
    if (!Number.isInteger(this.size) || this.size < 1)
      throw new FastpullError('INVALID_ARGUMENT', `unpack concurrency ${options.size}: want a positive integer`);
    this.script = options.threads === false ? undefined : compiledWorker('pool/worker.js');
  }

  /** Whether layers run on worker threads (false when disabled or the worker script is missing). */
  get threaded(): boolean {
    return this.script !== undefined;
  }

  /**
   * Unpacks one layer when a slot is free; the highest priority waiting task goes first. Rejects
   * with the unpacker's error (INVALID_LAYER, HOSTILE_LAYER, NO_SPACE, ...), or ABORTED.
   */
  async run(task: WorkerTask, options: RunOptions = {}): Promise<UnpackedLayer> {
    const { signal } = options;
    const budget = options.cpuBudget;
    const borrowed = await this.acquire(options.rank, options.priority ?? 0, landedCheck(task), signal, budget);
    this.granted--;
    try {
      if (signal?.aborted) throw abortError(signal, `unpacking ${task.blobPath}`);
      if (!this.script) {
        options.onStart?.(0, borrowed);
        // Loaded here, not with the pool: a process whose passes run on workers never needs it.
        const { unpackLayer } = await import('../layer.js');
        return await unpackLayer({ ...task, ...(signal ? { signal } : {}), ...(options.onBytes ? { onBytes: options.onBytes } : {}) });
      }
      return await this.onWorker(task, signal, options.onStart && ((thread) => options.onStart!(thread, borrowed)), options.onPlaced, options.onBytes, budget);
    } finally {
      this.release(borrowed, budget);
    }
  }

  /**
   * Waits for a slot. A task is granted one only when a worker is ready for it (a thread takes 80-300
   * ms to start and load the unpacker): then the largest of the layers that came meanwhile goes
   * first, not the one that asked first. In a pull of the ML bench image the small first layer took
   * the only running worker while the 481 MiB one, which decides the pull's time, waited 310 ms.
   * A worker that is ready already (one the CLI started ahead, or a warm one) goes to the first task
   * that asks: holding it for a larger layer still on its way made no pull faster (bench/README.md).
   */
  private acquire(
    rank: { readonly rank: number } | undefined,
    priority: number,
    landed: () => boolean,
    signal: AbortSignal | undefined,
    budget: PullCpuBudget | undefined,
  ): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const entry: Waiting = {
        rank,
        budget,
        priority,
        seq: this.seq++,
        landed,
        start: (borrowed) => {
          signal?.removeEventListener('abort', onAbort);
          unwatch?.();
          if (borrowed) this.borrowed++;
          else this.active++;
          this.budgeted.started(budget);
          resolve(borrowed);
        },
      };
      // A budget that loosens may let the task start now.
      const unwatch = budget?.onChange(() => this.grant());
      const onAbort = () => {
        unwatch?.();
        const i = this.waiting.indexOf(entry);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(abortError(signal, 'waiting to unpack'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
      this.grant();
    });
  }

  private release(borrowed: boolean, budget: PullCpuBudget | undefined): void {
    if (borrowed) this.borrowed--;
    else this.active--;
    this.budgeted.ended(budget);
    this.grant();
    this.retireSpare();
  }

  /** A running pass waits for its download: a waiting task whose blob has landed may run meanwhile. */
  private lend(): void {
    this.lent++;
    this.grant();
  }

  /** A pass that lent its slot works again, or ended: what it lent is not lent any more (a task running on it goes on). */
  private reclaim(): void {
    this.lent--;
    this.retireSpare();
  }

  /**
   * Ends idle workers beyond what the pool may use now (its size, plus one per lent slot), newest
   * first: a worker started for a borrowed slot does not stay for good, holding its thread and heap.
   */
  private retireSpare(): void {
    const keep = this.size + this.lent;
    if (this.all.size <= keep) return;
    // The oldest `keep` stay; an idle one past them goes now, a busy one when it is idle.
    const kept = new Set([...this.all].sort((a, b) => a.born - b.born).slice(0, keep));
    for (const slot of [...this.idle]) {
      if (kept.has(slot) || !slot.ready) continue;
      this.idle.splice(this.idle.indexOf(slot), 1);
      this.all.delete(slot);
      void slot.worker.terminate();
    }
  }

  /** The next task to start and whether on a borrowed slot; undefined when none may. */
  private next(): { index: number; borrowed: boolean } | undefined {
    if (this.waiting.length === 0) return undefined;
    // Ranks and budgets are read now, not when the task came: a waiting pull's priority may have risen since.
    if (this.waiting.length > 1) this.waiting.sort((a, b) => (b.rank?.rank ?? 1) - (a.rank?.rank ?? 1) || b.priority - a.priority || a.seq - b.seq);
    if (this.active < this.size) {
      const index = this.waiting.findIndex((w) => this.budgeted.allows(w.budget));
      return index < 0 ? undefined : { index, borrowed: false };
    }
    if (this.borrowed >= this.lent) return undefined;
    const index = this.waiting.findIndex((w) => w.landed() && this.budgeted.allows(w.budget));
    return index < 0 ? undefined : { index, borrowed: true };
  }

  /** Grants waiting tasks, highest priority first, while slots are free and workers ready; starts workers for the rest. */
  private grant(): void {
    for (;;) {
      if (this.closed) return;
      const pick = this.next();
      if (pick === undefined) return;
      if (this.script && !this.broken) {
        let ready = -this.granted;
        for (const s of this.idle) if (s.ready) ready++;
        if (ready <= 0) {
          // Enough threads starting for the tasks that can run; each grants when it runs. A pass
          // that lent its slot keeps its worker: one more may start for the task that borrows it.
          let starting = 0;
          for (const s of this.idle) if (!s.ready) starting++;
          const want = Math.min(this.waiting.length, this.size - this.active + Math.max(0, this.lent - this.borrowed));
          while (starting < want && this.all.size < this.size + this.lent) {
            this.idle.push(this.spawn());
            starting++;
          }
          // Tasks wait for these threads: they keep the process alive until they are ready.
          for (const s of this.idle) if (!s.ready) s.worker.ref();
          return;
        }
      }
      this.granted++;
      this.waiting.splice(pick.index, 1)[0]!.start(pick.borrowed);
    }
  }

  /** Running passes that lent their slot now, while they wait for their download. */
  get lending(): number {
    return this.lent;
  }

  /** Worker threads alive, idle or busy. */
  get workers(): number {
    return this.all.size;
  }

  /**
   * Starts workers ahead of need, up to `n` alive and at most the pool's size: a thread takes
   * 0.2-0.3 s to start and load the unpacker, which a pull can spend resolving its image instead of
   * making its first layer wait. Warm workers are idle and do not keep the process alive. Does
   * nothing when layers run on the calling thread.
   */
  warm(n = 1): void {
    if (!this.script) return;
    const want = Math.min(n, this.size);
    while (this.all.size < want) {
      const slot = this.spawn();
      slot.worker.unref();
      this.idle.push(slot);
    }
  }

  private slot(): Slot {
    const i = this.idle.findIndex((s) => s.ready);
    if (i >= 0) return this.idle.splice(i, 1)[0]!;
    return this.idle.pop() ?? this.spawn();
  }

  private spawn(): Slot {
    // The worker a command started ahead (spawn.ts), or a new one.
    const ahead = takeWorkerAhead(this.script!);
    const worker = ahead?.worker ?? startUnpackWorker(this.script!);
    const slot: Slot = { worker, busy: false, ready: ahead?.ready === true, born: this.born++ };
    this.all.add(slot);
    if (slot.ready) {
      // Ready already: no message will say so, and the caller returns before it could use it.
      worker.unref();
      queueMicrotask(() => {
        if (!this.closed) this.grant();
      });
      return this.watch(slot);
    }
    const onReady = (msg: FromWorker) => {
      if (msg.type !== 'ready') return;
      worker.off('message', onReady);
      slot.ready = true;
      // Idle workers do not keep the process alive (a task given to it refs it again).
      if (!slot.busy) worker.unref();
      this.grant();
    };
    worker.on('message', onReady);
    return this.watch(slot);
  }

  /** Takes `slot`'s worker out of the pool when it ends. */
  private watch(slot: Slot): Slot {
    const worker = slot.worker;
    // A worker that fails while idle only leaves the pool (its exit below); a running task has
    // its own listener, which turns the failure into the task's error.
    worker.on('error', () => undefined);
    worker.on('exit', () => {
      this.all.delete(slot);
      const i = this.idle.indexOf(slot);
      if (i >= 0) this.idle.splice(i, 1);
      if (!slot.ready) this.broken = true;
      if (!this.closed) this.grant();
    });
    return slot;
  }

  private onWorker(
    task: WorkerTask,
    signal?: AbortSignal,
    onStart?: (thread: number) => void,
    onPlaced?: (where: PassThread) => void,
    onBytes?: (consumed: number) => void,
    budget?: PullCpuBudget,
  ): Promise<UnpackedLayer> {
    const slot = this.slot();
    const id = this.nextId++;
    const cpus = budget?.cpus();
    // A budget that loosens while the pass runs moves its worker at once.
    const unconfine = budget?.onChange(() => slot.worker.postMessage({ type: 'confine', id, cpus: budget.cpus() ?? null } satisfies ToWorker));
    slot.busy = true;
    slot.worker.ref();
    const watch = new PassWatch(task.follow !== undefined, onBytes, this.machineIdle, {
      mayLend: () => this.lent < this.size && this.waiting.some((w) => w.landed()),
      lend: () => this.lend(),
      reclaim: () => this.reclaim(),
    });
    const started = onPlaced && ((tid: number, on: readonly number[]) => onPlaced({ tid, cpus: on }));
    onStart?.(slot.worker.threadId);
    return runOnWorker(slot.worker, { id, task, state: watch.state, ...(cpus ? { cpus } : {}), ...(started ? { started } : {}) }, signal, (ok) => {
      watch.stop();
      unconfine?.();
      slot.busy = false;
      if (ok) {
        // Idle workers must not keep the process alive.
        slot.worker.unref();
        this.idle.push(slot);
      } else {
        void slot.worker.terminate();
      }
    });
  }

  /**
   * Ends every idle worker that is ready, and resolves once their threads have exited: a process
   * that goes idle gives back each worker's heap, allocator arena and stack. A worker running a
   * task stays, and so does one still starting (a task waits for it); the next task starts a new
   * one. Returns how many ended.
   */
  async retireIdle(): Promise<number> {
    const going = this.idle.filter((s) => s.ready);
    for (const slot of going) {
      this.idle.splice(this.idle.indexOf(slot), 1);
      this.all.delete(slot);
    }
    await Promise.all(going.map((s) => s.worker.terminate()));
    return going.length;
  }

  /** Stops all workers. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.all].map((s) => s.worker.terminate()));
  }
}

let shared: UnpackPool | undefined;

/**
 * The process-wide pool: one bound on unpacking for all pulls of the process, one slot per two
 * cores ({@link poolSizeFor}).
 * Its idle workers do not keep the process alive.
 * @example
 * console.log(sharedUnpackPool().size, 'layers unpack at once');
 */
export function sharedUnpackPool(): UnpackPool {
  shared ??= new UnpackPool();
  return shared;
}
