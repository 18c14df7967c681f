// The unpack worker: runs one layer's single pass (blob digest, inflate, diffID, extraction) on its own
// thread, so layers of an image use separate cores instead of taking turns on the main thread.
import { parentPort } from 'node:worker_threads';
import { isFastpullError } from '../errors.js';
import { unpackLayer, type UnpackLayerOptions } from './layer.js';

/**
 * What {@link UnpackPool.run} unpacks: {@link UnpackLayerOptions} without the parts that cannot cross
 * to a worker thread (the signal and the callback; the pool's RunOptions carry the signal).
 * @example
 * const task: WorkerTask = { blobPath, mediaType, dest: active.fs, follow: { watermark: ingest.watermark.buffer, size } };
 */
export type WorkerTask = Omit<UnpackLayerOptions, 'signal' | 'onBytes'>;

/** `consumed`, when given: one BigInt64 slot where the worker keeps the compressed bytes the pass has read. */
export type ToWorker = { type: 'run'; id: number; task: WorkerTask; consumed?: SharedArrayBuffer } | { type: 'abort'; id: number };

/** `ready`: sent once, when the worker has loaded the unpacker and takes tasks. */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'done'; id: number; result: Awaited<ReturnType<typeof unpackLayer>> }
  | { type: 'error'; id: number; error: { code?: string; message: string; details?: Record<string, unknown>; stack?: string } };

const port = parentPort;
if (port) {
  const running = new Map<number, AbortController>();
  port.on('message', (msg: ToWorker) => {
    if (msg.type === 'abort') {
      running.get(msg.id)?.abort(new Error('aborted by the pull'));
      return;
    }
    const ac = new AbortController();
    running.set(msg.id, ac);
    const consumed = msg.consumed ? new BigInt64Array(msg.consumed) : undefined;
    const onBytes = consumed ? (n: number) => void Atomics.store(consumed, 0, BigInt(n)) : undefined;
    unpackLayer({ ...msg.task, signal: ac.signal, ...(onBytes ? { onBytes } : {}) })
      .then((result) => port.postMessage({ type: 'done', id: msg.id, result } satisfies FromWorker))
      .catch((e: unknown) => {
        const error = isFastpullError(e)
          ? { code: e.code, message: e.message, details: { ...e.details }, ...(e.stack ? { stack: e.stack } : {}) }
          : { message: e instanceof Error ? e.message : String(e), ...(e instanceof Error && e.stack ? { stack: e.stack } : {}) };
        port.postMessage({ type: 'error', id: msg.id, error } satisfies FromWorker);
      })
      .finally(() => running.delete(msg.id));
  });
  port.postMessage({ type: 'ready' } satisfies FromWorker);
}
