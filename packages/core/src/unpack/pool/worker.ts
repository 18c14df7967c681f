// The unpack worker: runs one layer's single pass (blob digest, inflate, diffID, extraction) on its own
// thread, so layers of an image use separate cores instead of taking turns on the main thread.
import { parentPort } from 'node:worker_threads';
import { isFastpullError } from '../../errors.js';
import { collectHeap, trimAllocator } from '../../util/allocator.js';
import { IdleCollector } from './idle-collect.js';
import { unpackLayer, type UnpackLayerOptions } from '../layer.js';
import { STATE_CONSUMED, STATE_WAITED_MS, STATE_WAITING_SINCE } from './pass-codes.js';
import { confineThread, kernelThreadId, threadCpus } from '../../util/pull-cpu.js';

/**
 * What {@link UnpackPool.run} unpacks: {@link UnpackLayerOptions} without the parts that cannot cross
 * to a worker thread (the signal and the callbacks; the pool's RunOptions carry the signal).
 * @example
 * const task: WorkerTask = { blobPath, mediaType, dest: active.fs, follow: { watermark: ingest.watermark.buffer, size } };
 */
export type WorkerTask = Omit<UnpackLayerOptions, 'signal' | 'onBytes' | 'onWait'>;

export { STATE_CONSUMED, STATE_SLOTS, STATE_WAITED_MS, STATE_WAITING_SINCE } from './pass-codes.js';

/**
 * `cpus`: the CPUs the pass runs on (its pull's CPU budget); absent: the process's. `confine`: the
 * budget of the running task `id` changed (null: the process's CPUs from now on).
 */
export type ToWorker =
  | { type: 'run'; id: number; task: WorkerTask; state?: SharedArrayBuffer; cpus?: readonly number[] }
  | { type: 'abort'; id: number }
  | { type: 'confine'; id: number; cpus: readonly number[] | null };

/**
 * `ready`: sent once, when the worker has loaded the unpacker and takes tasks. `started`: the task
 * runs, on its CPUs already: the kernel's id of the thread and the CPUs it may run on.
 */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'started'; id: number; tid: number; cpus: number[] }
  | { type: 'done'; id: number; result: Awaited<ReturnType<typeof unpackLayer>> }
  | { type: 'error'; id: number; error: { code?: string; message: string; details?: Record<string, unknown>; stack?: string } };

const port = parentPort;
if (port) {
  const running = new Map<number, AbortController>();
  // A task whose tuning says idleGc: false (benchmarks only) keeps what the idle worker holds, as before.
  let collectWhenIdle = true;
  const idle = new IdleCollector(() => {
    collectHeap('major');
    trimAllocator();
  });
  port.on('message', (msg: ToWorker) => {
    if (msg.type === 'abort') {
      running.get(msg.id)?.abort(new Error('aborted by the pull'));
      return;
    }
    if (msg.type === 'confine') {
      // A confinement that crosses the task's end would hold the idle worker: only while it runs.
      if (running.has(msg.id)) confineQuietly(msg.cpus ?? undefined);
      return;
    }
    idle.busy();
    collectWhenIdle = msg.task.tuning?.idleGc !== false;
    const ac = new AbortController();
    running.set(msg.id, ac);
    const state = msg.state ? new BigInt64Array(msg.state) : undefined;
    const onBytes = state ? (n: number) => void Atomics.store(state, STATE_CONSUMED, BigInt(n)) : undefined;
    const onWait = state
      ? (waiting: boolean) => {
          if (waiting) {
            Atomics.store(state, STATE_WAITING_SINCE, BigInt(Date.now()));
            return;
          }
          const since = Number(Atomics.load(state, STATE_WAITING_SINCE));
          if (since === 0) return;
          // The total first, then the wait's end: a reader in between counts this wait twice for one look, never not at all.
          Atomics.add(state, STATE_WAITED_MS, BigInt(Math.max(0, Date.now() - since)));
          Atomics.store(state, STATE_WAITING_SINCE, 0n);
        }
      : undefined;
    // On the pull's CPUs before the pass starts anything: the threads it starts and the jobs it
    // queues (hashing, decoding, small files) take the set from this thread.
    const confined = msg.cpus !== undefined;
    if (confined) confineQuietly(msg.cpus);
    port.postMessage({ type: 'started', id: msg.id, tid: kernelThreadId(), cpus: threadCpus() } satisfies FromWorker);
    // Before the answer goes out: once the pull has its result, no thread of it is on its CPUs any
    // more (and the next task may belong to a pull without a budget).
    const ended = () => {
      running.delete(msg.id);
      if (confined) confineQuietly(undefined);
    };
    unpackLayer({ ...msg.task, signal: ac.signal, ...(onBytes ? { onBytes } : {}), ...(onWait ? { onWait } : {}) })
      .then(
        (result) => {
          ended();
          port.postMessage({ type: 'done', id: msg.id, result } satisfies FromWorker);
        },
        (e: unknown) => {
          ended();
          const error = isFastpullError(e)
            ? { code: e.code, message: e.message, details: { ...e.details }, ...(e.stack ? { stack: e.stack } : {}) }
            : { message: e instanceof Error ? e.message : String(e), ...(e instanceof Error && e.stack ? { stack: e.stack } : {}) };
          port.postMessage({ type: 'error', id: msg.id, error } satisfies FromWorker);
        },
      )
      .finally(() => {
        if (running.size === 0 && collectWhenIdle) idle.idle();
      });
  });
  port.postMessage({ type: 'ready' } satisfies FromWorker);
}

/**
 * confineThread, where a failure costs only the confinement: the pass is the pull's work either way,
 * and the pull checked the addon before it asked (an EINVAL means a cpuset that changed under it).
 */
function confineQuietly(cpus: readonly number[] | undefined): void {
  try {
    confineThread(cpus);
  } catch {
    // Left on the CPUs it had.
  }
}
