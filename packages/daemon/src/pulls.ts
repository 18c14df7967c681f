// Pulls shared between callers: concurrent requests for the same image are one pull. Each caller gets
// its progress from when it joined (a late one first gets `resolved` and each layer's latest state);
// a caller that goes away only stops receiving, and the pull is aborted when no caller is left (it
// keeps what it downloaded for the next pull to resume).
import {
  credentialsIdentity,
  FastpullError,
  PullCpuBudget,
  PullTicket,
  RateLimiter,
  type Credentials,
  type PullEvent,
  type PullPriority,
  type PullResult,
  type TraceDocument,
} from '@fastpull/core';

/** What makes two pull requests the same pull. */
export interface PullIdentity {
  /** The canonical reference. */
  readonly name: string;
  /** The canonical platform; unset: the host's. */
  readonly platform?: string | undefined;
  readonly plainHttp: boolean;
  readonly keepBlobs: boolean;
  readonly credentials?: Credentials | undefined;
  readonly trace: boolean;
}

/**
 * The key callers share a pull by. Only with the same credentials: nobody rides on a secret that is
 * not theirs (the key holds a hash of them, never the secret). A traced pull records its trace from
 * its start: callers share it only when all want one.
 */
export function pullKey(p: PullIdentity): string {
  return JSON.stringify([p.name, p.platform ?? '', p.plainHttp, p.keepBlobs, credentialsIdentity(p.credentials), p.trace]);
}

/** One caller of a shared pull. */
export interface PullSubscriber<R extends PullResult = PullResult> {
  /** A progress event (never `done`: see finish). */
  progress(event: PullEvent): void;
  /** The pull succeeded. */
  finish(result: R): void;
  /** The pull failed (ABORTED when the daemon is stopping). */
  fail(error: unknown): void;
  /** The pull's trace, when it recorded one: just before finish or fail. */
  trace?(trace: TraceDocument): void;
}

/**
 * What starting a pull needs: its signal, where its progress goes, where its trace goes (when the
 * pull records one, it hands it over before it settles), and its priority, which callers that join
 * later may raise.
 */
export type StartPull<R extends PullResult = PullResult> = (
  signal: AbortSignal,
  onProgress: (e: PullEvent) => void,
  onTrace: (trace: TraceDocument) => void,
  ticket: PullTicket,
  /** The pull's own rate limit, which callers that join later may loosen; absent: none. */
  limiter: RateLimiter | undefined,
  /** The pull's own CPU budget, which callers that join later may loosen; absent: none. */
  budget: PullCpuBudget | undefined,
) => Promise<R>;

/** What one caller asks of the pull's shares; each unset is the loosest (normal priority, no limit). */
export interface PullShares {
  readonly priority?: PullPriority;
  /** Bytes per second; 0 or unset: no limit. */
  readonly rateLimit?: number;
  /** Whole cores; unset: no budget. */
  readonly cpuBudget?: number;
}

/** What a shared pull reports when it settles. */
export interface PullOutcome<R extends PullResult = PullResult> {
  readonly key: string;
  readonly name: string;
  readonly result?: R;
  readonly error?: unknown;
  /** Callers that joined over its life. */
  readonly callers: number;
  /** Compressed bytes the progress events reported as fetched. */
  readonly bytesFetched: number;
  readonly durationMs: number;
  /** Its priority when it settled: the highest of its callers'. */
  readonly priority: PullPriority;
  /**
   * Milliseconds its layers spent in state `waiting` before they started, summed over its layers:
   * behind pulls of higher priority, or for another pull unpacking the same layer.
   */
  readonly queueWaitMs: number;
}

export interface PullHooks<R extends PullResult = PullResult> {
  /** A shared pull starts (not called for a caller that joins one). */
  readonly started?: (key: string, name: string) => void;
  /** Bytes fetched since the last call, as progress reports them. */
  readonly fetched?: (bytes: number) => void;
  /** A shared pull settled. */
  readonly settled?: (outcome: PullOutcome<R>) => void;
  /**
   * The last running pull settled and its callers have their answers: nothing is pulling now (the
   * daemon gives back the memory the pulls' buffers held then).
   */
  readonly idle?: () => void;
}

class SharedPull<R extends PullResult> {
  readonly subscribers = new Set<PullSubscriber<R>>();
  readonly controller = new AbortController();
  resolved: PullEvent | undefined;
  /** The latest event of each layer, by index. */
  readonly layers = new Map<number, PullEvent>();
  private readonly fetchedByLayer = new Map<number, number>();
  /** When each layer now waiting began to, by index. */
  private readonly waitingSince = new Map<number, number>();
  queueWaitMs = 0;
  bytesFetched = 0;
  callers = 0;
  trace: TraceDocument | undefined;
  settled = false;
  done!: Promise<void>;

  constructor(
    readonly key: string,
    readonly name: string,
    /** The pull's priority: the highest of its callers'. */
    readonly ticket: PullTicket,
    /** The pull's own rate limit: the loosest of its callers' (none once a caller without one joined). */
    readonly limiter: RateLimiter | undefined,
    /** The pull's own CPU budget: the loosest of its callers', as the rate limit. */
    readonly budget: PullCpuBudget | undefined,
  ) {}

  /**
   * A caller asking for `bytesPerSecond` (0: no limit) and `cpuBudget` cores (undefined: none)
   * joined: the pull reads as fast and unpacks on as many cores as the loosest of its callers
   * allows, as it runs at the highest of their priorities. A caller that leaves does not tighten
   * them again.
   */
  loosen(bytesPerSecond: number, cpuBudget: number | undefined): void {
    this.budget?.loosen(cpuBudget);
    const now = this.limiter?.bytesPerSecond ?? 0;
    if (now === 0) return;
    if (bytesPerSecond === 0 || bytesPerSecond > now) this.limiter!.setRate(bytesPerSecond);
  }

  /** Records an event and passes it on; returns the new bytes it reports fetched. */
  event(e: PullEvent): number {
    let fresh = 0;
    if (e.type === 'resolved') this.resolved = e;
    if (e.type === 'layer') {
      this.layers.set(e.index, e);
      this.waited(e.index, e.state === 'waiting');
      if (e.state === 'fetching') {
        const before = this.fetchedByLayer.get(e.index) ?? 0;
        if (e.bytes > before) {
          fresh = e.bytes - before;
          this.fetchedByLayer.set(e.index, e.bytes);
          this.bytesFetched += fresh;
        }
      }
    }
    for (const s of [...this.subscribers]) s.progress(e);
    return fresh;
  }

  /** Layer `index` is waiting now, or not: a wait that ends is added to queueWaitMs. */
  private waited(index: number, waiting: boolean): void {
    const since = this.waitingSince.get(index);
    if (waiting) {
      if (since === undefined) this.waitingSince.set(index, performance.now());
    } else if (since !== undefined) {
      this.queueWaitMs += performance.now() - since;
      this.waitingSince.delete(index);
    }
  }

  /** Ends the waits still open (the pull settled with layers waiting): they count up to now. */
  closeWaits(): number {
    for (const index of [...this.waitingSince.keys()]) this.waited(index, false);
    return this.queueWaitMs;
  }
}

/** The shared pulls of one daemon; `R` is what its pulls answer with. */
export class PullManager<R extends PullResult = PullResult> {
  private readonly running = new Map<string, SharedPull<R>>();
  /** Every pull not yet settled, including those aborted after their last caller left. */
  private readonly unsettled = new Set<SharedPull<R>>();

  constructor(private readonly hooks: PullHooks<R> = {}) {}

  /** Shared pulls running now (including those stopping after their last caller left). */
  get size(): number {
    return this.unsettled.size;
  }

  /** Callers of running pulls now. */
  get callers(): number {
    let n = 0;
    for (const p of this.running.values()) n += p.subscribers.size;
    return n;
  }

  /**
   * Joins the running pull of `key`, or starts one with `start`, with the caller's `shares`: a
   * caller that joins raises the pull's priority to its own when that is higher, and loosens its rate
   * limit and CPU budget to its own (none: lifted). Returns leave(): the subscriber gets nothing
   * more; when it was the last caller of an unfinished pull, the pull is aborted.
   */
  join(key: string, name: string, start: StartPull<R>, subscriber: PullSubscriber<R>, shares: PullShares = {}): { leave: () => void; joined: boolean } {
    const { priority = 'normal', rateLimit = 0, cpuBudget } = shares;
    let shared = this.running.get(key);
    const joined = shared !== undefined;
    if (!shared) {
      const limiter = rateLimit > 0 ? new RateLimiter(rateLimit) : undefined;
      shared = this.start(key, name, start, new PullTicket(priority), limiter, cpuBudget !== undefined ? new PullCpuBudget(cpuBudget) : undefined);
    } else {
      shared.ticket.raise(priority);
      shared.loosen(rateLimit, cpuBudget);
      // A late caller: what it missed, as the latest state of everything.
      if (shared.resolved) subscriber.progress(shared.resolved);
      for (const index of [...shared.layers.keys()].sort((a, b) => a - b)) subscriber.progress(shared.layers.get(index)!);
    }
    shared.subscribers.add(subscriber);
    shared.callers++;
    const pullOf = shared;
    return {
      joined,
      leave: () => {
        if (!pullOf.subscribers.delete(subscriber)) return;
        if (pullOf.subscribers.size === 0 && !pullOf.settled) {
          // Nobody waits for it: a new request starts afresh rather than joining one being stopped.
          if (this.running.get(key) === pullOf) this.running.delete(key);
          pullOf.controller.abort(new FastpullError('ABORTED', `pulling ${name}: every caller went away`));
        }
      },
    };
  }

  private start(
    key: string,
    name: string,
    start: StartPull<R>,
    ticket: PullTicket,
    limiter: RateLimiter | undefined,
    budget: PullCpuBudget | undefined,
  ): SharedPull<R> {
    const shared = new SharedPull<R>(key, name, ticket, limiter, budget);
    this.running.set(key, shared);
    this.unsettled.add(shared);
    this.hooks.started?.(key, name);
    const t0 = performance.now();
    const finish = (result: R | undefined, error: unknown): void => {
      shared.settled = true;
      this.unsettled.delete(shared);
      if (this.running.get(key) === shared) this.running.delete(key);
      this.hooks.settled?.({
        key,
        name,
        ...(result ? { result } : { error }),
        callers: shared.callers,
        bytesFetched: shared.bytesFetched,
        durationMs: performance.now() - t0,
        priority: shared.ticket.priority,
        queueWaitMs: shared.closeWaits(),
      });
      for (const s of [...shared.subscribers]) {
        if (shared.trace) s.trace?.(shared.trace);
        if (result) s.finish(result);
        else s.fail(error);
      }
      shared.subscribers.clear();
      // After the answers are on their way, unless a pull started meanwhile.
      if (this.unsettled.size === 0 && this.hooks.idle) setImmediate(() => this.unsettled.size === 0 && this.hooks.idle?.());
    };
    let running: Promise<R>;
    try {
      running = start(
        shared.controller.signal,
        (e) => {
          // `done` goes out with the result, once the pull has returned.
          if (e.type === 'done') return;
          const fresh = shared.event(e);
          if (fresh > 0) this.hooks.fetched?.(fresh);
        },
        (trace) => (shared.trace = trace),
        ticket,
        limiter,
        budget,
      );
    } catch (e) {
      running = Promise.reject(e);
    }
    shared.done = running.then(
      (r) => finish(r, undefined),
      (e: unknown) => finish(undefined, e),
    );
    return shared;
  }

  /** Aborts every running pull with `reason` (an ABORTED FastpullError). */
  abortAll(reason: FastpullError): void {
    for (const p of this.unsettled) p.controller.abort(reason);
  }

  /** Settles when every pull running now has settled. */
  async settled(): Promise<void> {
    await Promise.all([...this.unsettled].map((p) => p.done));
  }
}
