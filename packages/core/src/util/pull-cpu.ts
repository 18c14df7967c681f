// The CPU budget of one pull, beside the whole process's (cpu.ts): its unpack passes run on worker
// threads confined to the last N of the process's CPUs while the pass runs, and the hashing,
// decoding and small-file writing a pass hands to the threads that serve every pull run on the CPUs
// of the thread that queued them (the native addon moves such a thread for the job and back after).
// So at most N cores work for the pull at once, however many passes, decoder jobs or hashes it has,
// while another pull's passes keep every CPU of the process.
import { readFileSync, readlinkSync } from 'node:fs';
import { FastpullError } from '../errors.js';
import { nativeFs } from '../native/addon.js';
import { allowedCpus, parseCpuBudget, parseCpuList } from './cpu.js';

/**
 * How many cores one pull's unpack work may keep busy; callers that share the pull may loosen it
 * while it runs (the loosest budget wins, and no budget is the loosest), as they raise its priority.
 * @example
 * const budget = new PullCpuBudget(1);
 * const pulling = pull(ref, { root, cpuBudget: budget });
 * budget.lift(); // a caller who waits joined: every CPU of the process from now on
 */
export class PullCpuBudget {
  private current: number | undefined;
  private readonly listeners = new Set<() => void>();

  /** `cores`: a whole number of at least 1 (INVALID_ARGUMENT otherwise); undefined: none. */
  constructor(cores?: number) {
    this.current = cores === undefined ? undefined : parseCpuBudget(cores, 'pull CPU budget');
  }

  /** The budget now; undefined: none. */
  get cores(): number | undefined {
    return this.current;
  }

  /** Loosens the budget to `cores` when that is more; undefined lifts it. A tighter one changes nothing. */
  loosen(cores: number | undefined): void {
    if (this.current === undefined) return;
    if (cores !== undefined && parseCpuBudget(cores, 'pull CPU budget') <= this.current) return;
    this.current = cores;
    for (const fn of [...this.listeners]) fn();
  }

  /** No budget from now on (a pull a container start waits on). */
  lift(): void {
    this.loosen(undefined);
  }

  /**
   * The CPUs the pull's passes run on now: the last `cores` of the process's (as a budget of the whole
   * process picks them); undefined where that is every one of them (no budget, or one that large).
   */
  cpus(): number[] | undefined {
    if (this.current === undefined) return undefined;
    const all = allowedCpus();
    return this.current >= all.length ? undefined : all.slice(-this.current);
  }

  /**
   * Calls `fn` whenever the CPUs of {@link cpus} change: the budget loosens, or the process's CPUs
   * change (a budget of the whole process, {@link processCpusChanged}). Returns the undo.
   */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    watchers.add(fn);
    return () => {
      this.listeners.delete(fn);
      watchers.delete(fn);
    };
  }
}

/** Every onChange of every pull's budget: the process's CPUs changed for all of them. */
const watchers = new Set<() => void>();

/**
 * The process's CPUs changed (applyCpuBudget confined every thread anew, the passes of pulls with a
 * budget of their own too): those passes go to their pull's CPUs out of the new set.
 */
export function processCpusChanged(): void {
  for (const fn of [...watchers]) fn();
}

type SetAffinity = (tid: number, cpus: readonly number[]) => void;

/**
 * The addon's setAffinity; FAILED_PRECONDITION naming `what` where the addon is not built (nothing
 * else can confine the threads a pass uses that are not Node's).
 */
export function affinitySetter(what: string): SetAffinity {
  const setAffinity = (nativeFs() as { setAffinity?: SetAffinity }).setAffinity;
  if (typeof setAffinity !== 'function')
    throw new FastpullError('FAILED_PRECONDITION', `${what} needs fastpull's native addon, which is not built here (see README.md, Installing)`);
  return setAffinity;
}

/** The CPUs the calling thread may run on now. */
export function threadCpus(): number[] {
  const line = /^Cpus_allowed_list:\s*(.*)$/m.exec(readFileSync('/proc/thread-self/status', 'utf8'))?.[1];
  if (line === undefined) throw new FastpullError('INTERNAL', 'reading the CPUs of this thread: /proc/thread-self/status has no Cpus_allowed_list');
  return parseCpuList(line);
}

/** The kernel's id of the calling thread (its directory in /proc/PID/task). */
export function kernelThreadId(): number {
  return Number(readlinkSync('/proc/thread-self').split('/').pop());
}

/**
 * Confines the calling thread to `cpus` (a pass of a pull with a budget), or, undefined, gives it the
 * process's CPUs again (its main thread's, which a budget of the whole process sets too). Threads the
 * calling thread starts from now on inherit the set. Nothing is called where the thread has it already.
 */
export function confineThread(cpus: readonly number[] | undefined): void {
  const want = cpus ?? allowedCpus();
  if (threadCpus().join(',') === want.join(',')) return;
  affinitySetter('a CPU budget of a pull')(0, want);
}
