// The decode threads of the parallel gunzip: a pool of workers that run jobs in shared slots it lends out.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { FastpullError } from '../errors.js';
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

/** Free slots kept per decode thread (beyond them a released slot is let go). */
const FREE_SLOTS_PER_THREAD = 4;

/**
 * Worker threads that run decode jobs, one at a time each, in order of priority: a job the output is
 * waiting for goes before speculative ones. Jobs read and write shared slots ({@link JobSlot}) that the
 * pool lends and takes back, so no buffer moves between threads.
 * @example
 * const pool = new InflatePool({ threads: 4 });
 * try {
 *   await pipeline(fs.createReadStream('layer.tar.gz'), createParallelGunzip({ pool }), fs.createWriteStream('layer.tar'));
 * } finally {
 *   await pool.close();
 * }
 */
export class InflatePool {
  /** Threads decoding at once. */
  readonly threads: number;
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

  /**
   * `threads` defaults to the machine's cores; 0 decodes on the calling thread (tests). INVALID_ARGUMENT
   * for a negative or fractional count.
   */
  constructor(options: { threads?: number } = {}) {
    this.threads = options.threads ?? availableParallelism();
    if (!Number.isInteger(this.threads) || this.threads < 0) throw new FastpullError('INVALID_ARGUMENT', `inflate threads ${options.threads}: want an integer >= 0`);
    this.script = this.threads === 0 ? undefined : compiledWorker('pargzip-worker.js');
  }

  /** Whether the native decoder is available (else {@link createParallelGunzip} cannot be used). */
  static available(): boolean {
    return nativeInflate() !== null;
  }

  /** Slots allocated and not let go (lent plus free); for tests. */
  get slotCount(): number {
    return this.lent.size + this.free.length;
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

  /** Lends `owner` a slot for a job of at most `cap` symbols and `inputBytes` of input. */
  takeSlot(owner: object, cap: number, inputBytes: number): SlotLease {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const f = this.free[i]!;
      if (f.cap === cap && f.inputBytes >= inputBytes && (best < 0 || f.inputBytes < this.free[best]!.inputBytes)) best = i;
    }
    const slot = best >= 0 ? this.free.splice(best, 1)[0]! : new JobSlot(this.nextSlot++, cap, Math.ceil(Math.max(inputBytes, 1) / SLOT_INPUT_STEP) * SLOT_INPUT_STEP);
    const lease = this.nextLease++;
    this.lent.set(slot, { lease, owner, running: false, releaseWhenDone: false });
    return { slot, lease };
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
    while (this.free.length > Math.max(1, this.threads) * FREE_SLOTS_PER_THREAD) {
      const gone = this.free.shift()!;
      for (const [w, known] of this.all) {
        if (known.delete(gone.id)) w.postMessage({ id: 0, forget: gone.id } satisfies ToInflateWorker);
      }
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

  /** Drops the queued (not yet running) jobs of `owner`, whose promises never settle, and takes back all its slots. */
  drop(owner: object): void {
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.queue[i]!.owner === owner) this.queue.splice(i, 1);
    for (const [slot, info] of [...this.lent]) if (info.owner === owner) this.release({ slot, lease: info.lease });
  }

  private setRunning(l: SlotLease, running: boolean): void {
    const info = this.lent.get(l.slot);
    if (!info || info.lease !== l.lease) return;
    info.running = running;
    if (!running && info.releaseWhenDone) this.release(l);
  }

  private pump(): void {
    while (this.busy < this.threads && this.queue.length > 0) {
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

  /** Stops the threads. */
  async close(): Promise<void> {
    this.queue.length = 0;
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
