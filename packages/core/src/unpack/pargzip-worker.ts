// A thread of the parallel gunzip's decode pool: runs one job at a time (pargzip-job.ts).
import { parentPort } from 'node:worker_threads';
import { giveBuffers, runJob, type JobInput, type JobResult } from './pargzip-job.js';

/** A job for the worker, or output buffers coming back for reuse. */
export type ToInflateWorker = { id: number; job: JobInput } | { id: 0; recycle: ArrayBuffer[] };

/** The worker's answer; `input` is the job's data buffer, back for reuse. */
export type FromInflateWorker = { id: number; ok: true; result: JobResult; input?: ArrayBuffer } | { id: number; ok: false; message: string };

const port = parentPort;
if (port) {
  port.on('message', (msg: ToInflateWorker) => {
    if ('recycle' in msg) {
      giveBuffers(msg.recycle);
      return;
    }
    let reply: FromInflateWorker;
    const transfer: ArrayBuffer[] = [];
    try {
      const result = runJob(msg.job);
      const input = msg.job.data.buffer as ArrayBuffer;
      reply = { id: msg.id, ok: true, result, input };
      transfer.push(result.out16.buffer as ArrayBuffer, result.out8.buffer as ArrayBuffer, input);
    } catch (e) {
      reply = { id: msg.id, ok: false, message: e instanceof Error ? e.message : String(e) };
    }
    port.postMessage(reply, transfer);
  });
}
