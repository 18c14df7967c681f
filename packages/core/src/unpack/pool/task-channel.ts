// One task on one worker: the messages that start and abort it, and its end, whether the worker
// answers or fails, turned into the task's result or error.
import type { Worker } from 'node:worker_threads';
import { FastpullError, type ErrorCode } from '../../errors.js';
import type { UnpackedLayer } from '../layer.js';
import type { FromWorker, ToWorker, WorkerTask } from './worker.js';

/** One task for {@link runOnWorker}. */
export interface WorkerRun {
  readonly id: number;
  readonly task: WorkerTask;
  /** The memory the worker writes its progress into. */
  readonly state: BigInt64Array<SharedArrayBuffer> | undefined;
  /** The CPUs the task runs on (its pull's CPU budget); absent: the process's. */
  readonly cpus?: readonly number[];
  /** The task runs, on its CPUs already: the kernel's id of the worker's thread, and those CPUs. */
  readonly started?: (tid: number, cpus: readonly number[]) => void;
}

/**
 * Runs `run.task` on `worker` as task `run.id`. `ended` is called once, before the promise settles:
 * with true when the worker answered (it can take the next task), false when it failed or exited
 * (it is done for). An abort of `signal` asks the worker to stop the task; the worker's answer then
 * ends it (ABORTED).
 */
export function runOnWorker(worker: Worker, run: WorkerRun, signal: AbortSignal | undefined, ended: (ok: boolean) => void): Promise<UnpackedLayer> {
  const { id, task, state } = run;
  return new Promise<UnpackedLayer>((resolve, reject) => {
    const done = (ok: boolean) => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      signal?.removeEventListener('abort', onAbort);
      ended(ok);
    };
    const onMessage = (msg: FromWorker) => {
      if (msg.type === 'ready' || msg.id !== id) return;
      if (msg.type === 'started') {
        run.started?.(msg.tid, msg.cpus);
        return;
      }
      if (msg.type === 'done') {
        done(true);
        resolve(msg.result);
      } else {
        done(true);
        reject(rebuildError(msg.error));
      }
    };
    const onError = (e: Error) => {
      done(false);
      reject(new FastpullError('INTERNAL', `unpack worker failed: ${e.message}`, { cause: e }));
    };
    const onExit = (code: number) => {
      done(false);
      reject(new FastpullError('INTERNAL', `unpack worker exited with status ${code}`));
    };
    const onAbort = () => worker.postMessage({ type: 'abort', id } satisfies ToWorker);
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.postMessage({ type: 'run', id, task, ...(state ? { state: state.buffer } : {}), ...(run.cpus ? { cpus: run.cpus } : {}) } satisfies ToWorker);
    if (signal?.aborted) onAbort();
  });
}

/** The error a worker sent, rebuilt with its code, details and stack. */
function rebuildError(e: { code?: string; message: string; details?: Record<string, unknown>; stack?: string }): Error {
  const err = e.code ? new FastpullError(e.code as ErrorCode, e.message, e.details ? { details: e.details } : {}) : new Error(e.message);
  if (e.stack) err.stack = e.stack;
  return err;
}
