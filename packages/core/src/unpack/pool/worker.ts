// The unpack worker: runs one layer's single pass (blob digest, inflate, diffID, extraction) on its own
// thread, so layers of an image use separate cores instead of taking turns on the main thread.
import { parentPort } from 'node:worker_threads';
import { isFastpullError } from '../../errors.js';
import { collectHeap, trimAllocator } from '../../util/allocator.js';
import { IdleCollector } from './idle-collect.js';
import { unpackLayer, type UnpackLayerOptions } from '../layer.js';
import { STATE_CONSUMED, STATE_WAITED_MS, STATE_WAITING_SINCE } from './pass-codes.js';

/**
 * What {@link UnpackPool.run} unpacks: {@link UnpackLayerOptions} without the parts that cannot cross
 * to a worker thread (the signal and the callbacks; the pool's RunOptions carry the signal).
 * @example
 * const task: WorkerTask = { blobPath, mediaType, dest: active.fs, follow: { watermark: ingest.watermark.buffer, size } };
 */
export type WorkerTask = Omit<UnpackLayerOptions, 'signal' | 'onBytes' | 'onWait'>;

export { STATE_CONSUMED, STATE_SLOTS, STATE_WAITED_MS, STATE_WAITING_SINCE } from './pass-codes.js';

export type ToWorker = { type: 'run'; id: number; task: WorkerTask; state?: SharedArrayBuffer } | { type: 'abort'; id: number };

/** `ready`: sent once, when the worker has loaded the unpacker and takes tasks. */
export type FromWorker =
  | { type: 'ready' }
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
    unpackLayer({ ...msg.task, signal: ac.signal, ...(onBytes ? { onBytes } : {}), ...(onWait ? { onWait } : {}) })
      .then((result) => port.postMessage({ type: 'done', id: msg.id, result } satisfies FromWorker))
      .catch((e: unknown) => {
        const error = isFastpullError(e)
          ? { code: e.code, message: e.message, details: { ...e.details }, ...(e.stack ? { stack: e.stack } : {}) }
          : { message: e instanceof Error ? e.message : String(e), ...(e instanceof Error && e.stack ? { stack: e.stack } : {}) };
        port.postMessage({ type: 'error', id: msg.id, error } satisfies FromWorker);
      })
      .finally(() => {
        running.delete(msg.id);
        if (running.size === 0 && collectWhenIdle) idle.idle();
      });
  });
  port.postMessage({ type: 'ready' } satisfies FromWorker);
}
