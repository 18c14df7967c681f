// A thread of the parallel gunzip's decode pool: runs one job at a time (pargzip-job.ts).
import { parentPort } from 'node:worker_threads';
import { runJob, type JobInput, type JobResult } from './pargzip-job.js';

/** A job for the worker. */
export interface ToInflateWorker {
  id: number;
  job: JobInput;
}

/** The worker's answer. */
export type FromInflateWorker = { id: number; ok: true; result: JobResult } | { id: number; ok: false; message: string };

const port = parentPort;
if (port) {
  port.on('message', (msg: ToInflateWorker) => {
    let reply: FromInflateWorker;
    const transfer: ArrayBuffer[] = [];
    try {
      const result = runJob(msg.job);
      reply = { id: msg.id, ok: true, result };
      transfer.push(result.out16.buffer as ArrayBuffer, result.out8.buffer as ArrayBuffer);
    } catch (e) {
      reply = { id: msg.id, ok: false, message: e instanceof Error ? e.message : String(e) };
    }
    port.postMessage(reply, transfer);
  });
}
