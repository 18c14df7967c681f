// A thread of the parallel gunzip's decode pool: runs one job at a time (pargzip-job.ts), in the slot
// the output thread names. A slot's shared buffer comes with the first job that uses it here.
import { parentPort } from 'node:worker_threads';
import { JobSlot, runJob, type WireJob, type WireResult } from './pargzip-job.js';
import { nativeHash } from './native.js';

/** What a decode thread needs to know of a slot: its id, sizes, and (the first time) its buffer. */
export interface SlotRef {
  id: number;
  cap: number;
  inputBytes: number;
  buffer?: SharedArrayBuffer;
}

/** A job for the worker, or a slot it may forget. */
export type ToInflateWorker = { id: number; job: WireJob; slot: SlotRef } | { id: 0; forget: number };

/** The worker's answer; `cpuNs`: the job's CPU on this thread's clock (absent without the addon's clock). */
export type FromInflateWorker = { id: number; ok: true; result: WireResult; cpuNs?: number } | { id: number; ok: false; message: string; cpuNs?: number };

const port = parentPort;
if (port) {
  const slots = new Map<number, JobSlot>();
  const clock = nativeHash();
  port.on('message', (msg: ToInflateWorker) => {
    if ('forget' in msg) {
      slots.delete(msg.forget);
      return;
    }
    let reply: FromInflateWorker;
    const t0 = clock?.threadCpuNs();
    try {
      let slot = slots.get(msg.slot.id);
      if (!slot) {
        if (!msg.slot.buffer) throw new Error(`slot ${msg.slot.id} unknown`);
        slot = new JobSlot(msg.slot.id, msg.slot.cap, msg.slot.inputBytes, msg.slot.buffer);
        slots.set(slot.id, slot);
      }
      reply = { id: msg.id, ok: true, result: runJob(msg.job, slot) };
    } catch (e) {
      reply = { id: msg.id, ok: false, message: e instanceof Error ? e.message : String(e) };
    }
    if (clock && t0 !== undefined) reply.cpuNs = clock.threadCpuNs() - t0;
    port.postMessage(reply);
  });
}
