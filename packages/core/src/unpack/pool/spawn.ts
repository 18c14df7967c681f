// Starting an unpack worker thread (its script, its heap, the budgets it shares with this process),
// and starting one ahead, while a command is still loading, for the pool to take later. Light on
// purpose: a command imports it before the rest of the library.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { inflateBudgetWorkerData } from '../decompress/pargzip-budget.js';

/**
 * The young generation of each worker's heap, in MiB (1 MiB of semi-space; V8's default grows to
 * 16). A pass allocates its blob reads and inflated output as 1 MiB buffers that die within
 * milliseconds, but V8 frees a buffer only when it collects its holder, and a pass makes few other
 * objects: with the default young generation dead buffers piled up to 40 MiB per worker before a
 * collection, and the allocator kept that high-water mark. The small one is collected every few
 * MiB of objects, which lowered the peak in the same time; a larger one made the layer whose parse
 * makes the most objects no faster (docs/architecture.md, "Figures behind the defaults").
 */
export const WORKER_YOUNG_GENERATION_MB = 3;

/**
 * The compiled worker script `name`, a path under unpack/ (undefined when not built). Tests run the TypeScript sources, which a worker thread cannot load,
 * so from src/ this points at the build output (`pnpm run build` makes it).
 */
export function compiledWorker(name: string): string | undefined {
  const here = import.meta.url;
  const url = here.endsWith('.ts') ? new URL(`../../../dist/unpack/${name}`, here) : new URL(`../${name}`, here);
  const path = fileURLToPath(url);
  return existsSync(path) ? path : undefined;
}

/** Starts an unpack worker running `script`: its small heap, and this process's budgets. */
export function startUnpackWorker(script: string): Worker {
  // The worker's decode pools count against this process's inflate budget, not one of their own.
  return new Worker(script, { resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB }, workerData: inflateBudgetWorkerData() });
}

/** A worker started ahead, and whether it said it is ready. */
export interface WorkerAhead {
  readonly worker: Worker;
  readonly ready: boolean;
}

let ahead: { readonly worker: Worker; readonly script: string; ready: boolean } | undefined;

/**
 * Starts the unpack worker of this process's first pool now, if none is started ahead yet: an
 * UnpackPool takes it ({@link takeWorkerAhead}) instead of starting its first worker. A worker
 * takes 0.2-0.3 s of a core to start and load the unpacker; a command that starts one before it
 * loads the rest of itself (the CLI's `pull`: 0.2-0.3 s of loading on one core of a 2-core VM)
 * has it ready when its first layer starts downloading. The worker does not keep the process
 * alive, and one that no pool takes ends with it. False when the worker script is not built.
 * @example
 * startWorkerAhead();
 * const { main } = await import('./main.js'); // its pull's pool takes the worker
 */
export function startWorkerAhead(): boolean {
  if (ahead !== undefined) return true;
  const script = compiledWorker('pool/worker.js');
  if (script === undefined) return false;
  const worker = startUnpackWorker(script);
  const started = { worker, script, ready: false };
  const onReady = (msg: { type?: unknown } | null) => {
    if (msg?.type !== 'ready') return;
    started.ready = true;
    worker.off('message', onReady);
  };
  worker.on('message', onReady);
  worker.on('error', () => undefined);
  worker.on('exit', () => {
    if (ahead === started) ahead = undefined;
  });
  worker.unref();
  ahead = started;
  return true;
}

/** The worker started ahead and not taken yet, if any (left where it is). */
export function workerAhead(): WorkerAhead | undefined {
  return ahead === undefined ? undefined : { worker: ahead.worker, ready: ahead.ready };
}

/**
 * The worker started ahead for `script`, now the caller's (each is taken once), with whether it is
 * ready; undefined when none was started, it ended, or it runs another script.
 */
export function takeWorkerAhead(script: string): WorkerAhead | undefined {
  const taken = ahead;
  if (taken === undefined || taken.script !== script) return undefined;
  ahead = undefined;
  return { worker: taken.worker, ready: taken.ready };
}
