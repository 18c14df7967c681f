// The speculative side of the parallel gunzip: guesses launched ahead of the output, and their continuations.
import { St, Status, type JobInput, type JobResult, type JobStart } from './pargzip-job.js';
import type { SlotLease } from './pargzip-pool.js';
import { knownTail } from './pargzip-output.js';
import type { DecodeContext } from './pargzip-plan.js';

/** An eager continuation: which chunk's guess it goes on from, and its job. */
interface Continuation {
  k: number;
  p: Promise<JobResult>;
}

/**
 * Launches, ahead of the output by a bounded number of jobs, one guess per chunk: a job that starts at
 * the chunk's checkpoint, or searches from the chunk's first byte for a block boundary, and decodes to
 * the next chunk's start. A guess that stops at its output cap or data end gets its continuation
 * launched at once (eagerly), from its exact end state towards the same stop, and so on. The output
 * side ({@link DecodeCursor}) takes each guess when it reaches its chunk and either uses it ({@link used})
 * or drops it with its continuations ({@link dropped}); it takes a continuation by the state and stop
 * it needs ({@link takeContinuation}).
 */
export class Guesses {
  /** The next chunk to launch a guess for. */
  next = 1;
  private readonly guesses = new Map<number, Promise<JobResult>>();
  /** Eager continuations by exact start state and stop ({@link contKey}). */
  private readonly continuations = new Map<string, Continuation>();
  /** Continuations that started with a known window (no markers). */
  private readonly knownWindow = new WeakSet<Promise<JobResult>>();
  /** The slot of each launched job: once the output waits for the job, the pool hurries it. */
  private readonly leases = new WeakMap<Promise<JobResult>, SlotLease>();
  /** Jobs (guesses and continuations) launched and not yet taken, at most. */
  private readonly maxAhead: number;
  /** Wakes the launcher when there is room again. */
  private roomWaiter: (() => void) | undefined;
  /** Callers of {@link guessFor} waiting for a launch. */
  private launchWaiters: (() => void)[] = [];
  private launcherDone = false;
  /** The chunk whose guess the output waits for (-1: none). */
  private wanted = -1;
  /** Wakes the launcher from its wait for slot room (the output started waiting for its guess). */
  private slotWaker: (() => void) | undefined;

  constructor(private readonly ctx: DecodeContext) {
    this.maxAhead = ctx.ahead * 2;
  }

  /** Launches guesses until the stream stops or its input is used up; `onError` gets what failed. */
  run(onError: (e: Error) => void): Promise<void> {
    return this.launch()
      .catch((e: unknown) => onError(e as Error))
      .finally(() => {
        this.launcherDone = true;
        this.notifyLaunch();
      });
  }

  /** Chunk k's guess, or undefined when there will be none. */
  async guessFor(k: number): Promise<JobResult | undefined> {
    for (;;) {
      const p = this.guesses.get(k);
      if (p) return this.hurried(p);
      if (this.ctx.stopped() || this.launcherDone || this.next > k) return undefined;
      this.wanted = k;
      this.slotWaker?.();
      await new Promise<void>((r) => this.launchWaiters.push(r));
    }
  }

  /** Chunk k's guess was used: its continuations stay, for the output to take. */
  used(k: number): void {
    this.guesses.delete(k);
    this.wakeLauncher();
  }

  /** Chunk k's guess was dropped (its result already released): its continuations go too. */
  dropped(k: number): void {
    this.guesses.delete(k);
    for (const [key, c] of this.continuations) {
      if (c.k !== k) continue;
      this.continuations.delete(key);
      c.p.then(
        (r) => this.ctx.pool.release(r),
        () => undefined,
      );
    }
    this.wakeLauncher();
  }

  /** The eager continuation from state `at` towards `stop`, taken out, or undefined when there is none. */
  takeContinuation(at: JobStart, stop: number): Promise<JobResult> | undefined {
    const key = contKey(at, stop);
    const c = this.continuations.get(key);
    if (c === undefined) return undefined;
    this.continuations.delete(key);
    this.wakeLauncher();
    this.ctx.stats.eagerJobs++;
    if (this.knownWindow.delete(c.p)) this.ctx.stats.eagerKnownWindow++;
    return this.hurried(c.p);
  }

  /**
   * `p`, whose job the output now waits for: launched as speculative, it may still be queued behind
   * the running places other pools' waits are owed, so the pool runs it as it runs the output's jobs.
   */
  private hurried(p: Promise<JobResult>): Promise<JobResult> {
    const lease = this.leases.get(p);
    if (lease) this.ctx.pool.hurry(lease);
    return p;
  }

  /** Lets a launcher waiting for room see that the stream stopped. */
  wakeLauncher(): void {
    const w = this.roomWaiter;
    this.roomWaiter = undefined;
    w?.();
  }

  private async launch(): Promise<void> {
    const { ctx } = this;
    const { input, plan } = ctx;
    while (!ctx.stopped()) {
      while (this.guesses.size + this.continuations.size >= this.maxAhead && !ctx.stopped()) await new Promise<void>((r) => (this.roomWaiter = r));
      const k = this.next;
      const startBit = plan.bit(k);
      const stop = plan.bit(k + 1);
      const start = Math.floor(startBit / 8);
      const want = Math.ceil(stop / 8) + ctx.overrun;
      await input.ready(want);
      if (ctx.stopped()) return;
      if (input.ended && start >= input.written) return;
      const end = Math.min(input.written, want);
      const generation = ctx.pool.budget.generation;
      // The guess the output waits for is the stream's next job: like an exact job it has its slot
      // past the budget, or a budget smaller than a slot (or spent on other streams' guesses) would
      // leave the output waiting for a guess that waits for room.
      const urgent = this.wanted === k && this.launchWaiters.length > 0;
      const slot = urgent ? ctx.copyInput(start, end) : ctx.tryCopyInput(start, end);
      if (slot === undefined) {
        // The process's slot budget is spent: wait for a slot to come back (or for the output to
        // need this guess), then look again.
        await Promise.race([ctx.pool.slotFreed(generation), new Promise<void>((r) => (this.slotWaker = r))]);
        this.slotWaker = undefined;
        continue;
      }
      const { data, lease } = slot;
      this.next++;
      const cp = plan.checkpoint(k);
      // At a checkpoint: decode from it with its window. Else: search for a boundary from the chunk's start.
      const from: JobStart = cp
        ? { kind: St.Block, bit: cp.bit, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 }
        : { kind: -1, bit: 8 * start, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 };
      const p = ctx.pool.run(
        { ...from, data, dataOffset: start, final: input.ended && end === input.written, stopKey: stop, cap: ctx.cap, window: cp ? cp.window : null },
        lease,
        urgent, // and a running place past the bound: guesses of other streams yield theirs to waiters
        ctx.owner,
      );
      this.leases.set(p, lease);
      p.then(
        (r) => {
          if (this.guesses.has(k) && r.status !== Status.NoStart && r.status !== Status.Error) this.continueEagerly(k, r, stop);
        },
        () => undefined,
      );
      this.guesses.set(k, p);
      this.notifyLaunch();
    }
  }

  /** Launches the continuation of a job of chunk k's that stopped at its cap or data end, when there is room. */
  private continueEagerly(k: number, r: JobResult, stop: number): void {
    const { ctx } = this;
    const { input } = ctx;
    if (ctx.stopped() || (r.status !== Status.Cap && r.status !== Status.Need)) return;
    if (this.guesses.size + this.continuations.size >= this.maxAhead + ctx.pool.threads) return;
    const from = Math.floor(r.end.bit / 8);
    const to = Math.min(input.written, Math.ceil(stop / 8) + ctx.overrun);
    if (from < input.kept || to <= from || (r.status === Status.Need && to <= from + 64 && !input.ended)) return;
    const slot = ctx.tryCopyInput(from, to);
    if (slot === undefined) return; // no room in the budget: the output runs it when it gets there
    const { data, lease } = slot;
    // The guess's own bytes give the window once they are all known (then no markers at all).
    const window = knownTail(r);
    const job: JobInput = { ...r.end, data, dataOffset: from, final: input.ended && to === input.written, stopKey: stop, cap: ctx.cap, window };
    const p = ctx.pool.run(job, lease, false, ctx.owner);
    this.leases.set(p, lease);
    if (window) this.knownWindow.add(p);
    p.then(
      (next) => {
        if (this.continuations.has(contKey(r.end, stop))) this.continueEagerly(k, next, stop);
      },
      () => undefined,
    );
    this.continuations.set(contKey(r.end, stop), { k, p });
  }

  private notifyLaunch(): void {
    const ws = this.launchWaiters;
    this.launchWaiters = [];
    for (const w of ws) w();
  }
}

/** The key of a continuation: its exact start state and its stop. */
function contKey(st: JobStart, stop: number): string {
  return `${st.kind}:${st.bit}:${st.left}:${stop}`;
}
