// A network rate limit: a token bucket that the readers of registry responses draw from before they
// read on. A reader that must wait stops reading its socket, so the kernel's receive buffer fills and
// TCP slows the sender; nothing the limit holds back is buffered here. Several pulls may share one
// bucket (a daemon's budget for the node's link); each may also have one of its own, and a read then
// waits for both.
//
// Priorities share the bucket unequally: a waiting read of a higher rank goes before every waiting
// read of a lower one, so a pull that someone waits on is not held back by the share a background
// pull would otherwise take. Lower ranks are not starved outright: while they wait, they get one byte
// for every LOWER_SHARE bytes the ranks above them are granted, since a layer a lower pull has started
// holds an unpack worker, and a download that stood still would keep that worker from the higher pull.
//
// Without a limit nothing here runs: a pull with none passes no limiter down, and an unlimited
// limiter answers take() with one comparison.
import { FastpullError } from '../errors.js';
import type { Ranked } from './scheduler.js';

/** The clock a limiter runs on: injectable, so its arithmetic is tested without waiting. */
export interface RateClock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls `fn` after `ms` milliseconds; returns what cancel() takes. */
  schedule(fn: () => void, ms: number): unknown;
  /** Cancels what schedule() returned. */
  cancel(handle: unknown): void;
}

/** Options of a {@link RateLimiter}. */
export interface RateLimiterOptions {
  /**
   * Bytes that may go at once after the bucket has stood full (default {@link defaultBurst}). A pull
   * under the limit takes at least (bytes - burst) / rate seconds.
   */
  readonly burst?: number;
  /** Default: performance.now() and setTimeout. */
  readonly clock?: RateClock;
}

/**
 * Bytes a lower rank gets for each byte granted above it while it waits: a floor of 1/33 of the rate
 * that keeps a started layer of a background pull moving while a pull above it takes the rest.
 */
export const LOWER_SHARE = 32;

/** The smallest burst: two of the range client's socket reads (128 KiB each), so no read waits for more than a full bucket. */
export const MIN_BURST = 256 * 1024;

/**
 * The burst of a limit when none is given: 50 ms of the rate, at least {@link MIN_BURST}. Smaller
 * bursts wake the limiter's timer more often for nothing smoother to show; larger ones let a
 * background pull take the link for longer at once.
 * @example defaultBurst(50 * 1024 ** 2) // 2621440 (2.5 MiB)
 */
export function defaultBurst(bytesPerSecond: number): number {
  return Math.max(MIN_BURST, Math.ceil(bytesPerSecond / 20));
}

// The timer is kept referenced: a read waiting on it may be all that is left to do (a manifest read
// whole, its connection already idle and unreferenced), and the process must not exit under it.
const realClock: RateClock = {
  now: () => performance.now(),
  schedule: (fn, ms) => setTimeout(fn, ms),
  cancel: (h) => clearTimeout(h as NodeJS.Timeout),
};

interface Waiter {
  readonly n: number;
  readonly resolve: () => void;
}

/** Ranks a limiter orders: low (0), normal (1), high (2); a rank outside is clamped. */
const RANKS = 3;

/**
 * A budget of bytes per second for reads from registries, shared by whoever holds it: pass one to
 * several pulls (`PullOptions.rateLimit`) and their layer bytes, manifests and configs together stay
 * under it. The rate may change while pulls run (a daemon's reload); 0 lifts the limit.
 * @example
 * const link = new RateLimiter(50 * 1024 ** 2); // 50 MiB/s for both pulls together
 * await Promise.all([pull(a, { root, rateLimit: link }), pull(b, { root, rateLimit: link })]);
 */
export class RateLimiter {
  private rate: number;
  private burstSize: number;
  private readonly fixedBurst: number | undefined;
  private readonly clock: RateClock;
  private tokens: number;
  private stamp: number;
  private readonly queues: Waiter[][] = Array.from({ length: RANKS }, () => []);
  private waiters = 0;
  /** Bytes the ranks below the top waiting one have earned while it was served (see LOWER_SHARE). */
  private credit = 0;
  private timer: unknown;
  private granted = 0;

  /** @param bytesPerSecond - the rate; 0: no limit (until {@link setRate}). */
  constructor(bytesPerSecond: number, options: RateLimiterOptions = {}) {
    this.rate = checkRate(bytesPerSecond, 'rate limit');
    if (options.burst !== undefined && (!Number.isSafeInteger(options.burst) || options.burst < 1)) {
      throw new FastpullError('INVALID_ARGUMENT', `rate limit burst ${options.burst}: want a whole number of bytes above zero`);
    }
    this.fixedBurst = options.burst;
    this.burstSize = options.burst ?? defaultBurst(this.rate);
    this.clock = options.clock ?? realClock;
    this.tokens = this.burstSize;
    this.stamp = this.clock.now();
  }

  /** The rate in bytes per second; 0: no limit. */
  get bytesPerSecond(): number {
    return this.rate;
  }

  /** Bytes that may go at once from a full bucket. */
  get burst(): number {
    return this.burstSize;
  }

  /** Reads waiting for the bucket now. */
  get waiting(): number {
    return this.waiters;
  }

  /** Bytes granted so far (every take counted once it may go). */
  get bytesGranted(): number {
    return this.granted;
  }

  /**
   * Changes the rate from now on, for reads waiting now too; 0 lifts the limit (every waiting read
   * goes at once). The bucket keeps what it holds, up to the new burst; coming from no limit, it
   * starts full, as a new limiter's does.
   */
  setRate(bytesPerSecond: number): void {
    const rate = checkRate(bytesPerSecond, 'rate limit');
    this.refill();
    const was = this.rate;
    this.rate = rate;
    this.burstSize = this.fixedBurst ?? defaultBurst(rate);
    this.tokens = was === 0 ? this.burstSize : Math.min(this.tokens, this.burstSize);
    this.rearm();
  }

  /**
   * Counts `n` bytes read at `rank` (a pull's priority; default a normal pull's): undefined when the
   * reader may read on at once, else a promise to wait for before it reads again. A read goes when
   * no read of its rank or above waits and the bucket holds min(n, burst); it then takes n, which may
   * leave the bucket below zero for the next.
   */
  take(n: number, rank: Ranked | number = 1): Promise<void> | undefined {
    if (this.rate === 0) {
      this.granted += n;
      return undefined;
    }
    const r = rankOf(rank);
    this.refill();
    if (!this.waitingFrom(r) && this.tokens >= Math.min(n, this.burstSize)) {
      this.spend(n, r);
      return undefined;
    }
    return new Promise<void>((resolve) => {
      this.queues[r]!.push({ n, resolve });
      this.waiters++;
      this.rearm();
    });
  }

  /** Milliseconds until the next waiting read may go (0: it may now; undefined: none waits). */
  get nextGrantMs(): number | undefined {
    const next = this.next();
    if (next === undefined) return undefined;
    this.refill();
    return Math.max(0, ((Math.min(next.waiter.n, this.burstSize) - this.tokens) * 1000) / this.rate);
  }

  private refill(): void {
    const now = this.clock.now();
    if (this.rate > 0) this.tokens = Math.min(this.burstSize, this.tokens + ((now - this.stamp) * this.rate) / 1000);
    this.stamp = now;
  }

  private spend(n: number, rank: number): void {
    this.tokens -= n;
    this.granted += n;
    // A lower rank waiting while this one goes earns its share.
    if (this.waitingBelow(rank)) this.credit += n / LOWER_SHARE;
  }

  private waitingFrom(rank: number): boolean {
    for (let r = rank; r < RANKS; r++) if (this.queues[r]!.length > 0) return true;
    return false;
  }

  private waitingBelow(rank: number): boolean {
    for (let r = 0; r < rank; r++) if (this.queues[r]!.length > 0) return true;
    return false;
  }

  /** The read to go next: the top rank's first, unless the rank below has earned its turn. */
  private next(): { waiter: Waiter; rank: number; earned: boolean } | undefined {
    let top = RANKS - 1;
    while (top >= 0 && this.queues[top]!.length === 0) top--;
    if (top < 0) return undefined;
    let below = top - 1;
    while (below >= 0 && this.queues[below]!.length === 0) below--;
    if (below >= 0 && this.credit >= this.queues[below]![0]!.n) return { waiter: this.queues[below]![0]!, rank: below, earned: true };
    return { waiter: this.queues[top]![0]!, rank: top, earned: false };
  }

  /** Grants what the bucket allows, in order, and sets the timer for the next waiting read. */
  private pump = (): void => {
    this.timer = undefined;
    this.refill();
    for (;;) {
      const next = this.next();
      if (next === undefined) {
        this.credit = 0;
        return;
      }
      const need = Math.min(next.waiter.n, this.burstSize);
      if (this.rate > 0 && this.tokens < need) {
        this.timer = this.clock.schedule(this.pump, Math.max(1, Math.ceil(((need - this.tokens) * 1000) / this.rate)));
        return;
      }
      this.queues[next.rank]!.shift();
      this.waiters--;
      if (next.earned) this.credit -= next.waiter.n;
      if (this.rate > 0) this.spend(next.waiter.n, next.rank);
      else this.granted += next.waiter.n;
      next.waiter.resolve();
    }
  };

  private rearm(): void {
    if (this.timer !== undefined) this.clock.cancel(this.timer);
    this.pump();
  }
}

/** A pull's own limit, or a limiter it shares with others: what PullOptions.rateLimit takes. */
export type RateLimit = number | RateLimiter;

/**
 * What one reader draws from: the limiters over it (a pull's own, then one it shares), at its rank.
 * Absent where no limit applies, so an unlimited pull calls nothing per read.
 */
export interface ByteThrottle {
  /** As RateLimiter.take: undefined, or a promise to wait for before reading on. */
  take(n: number): Promise<void> | undefined;
  /** Reads waiting now (the pull's watchdogs count time spent so as no stall). */
  readonly waiting: number;
}

/**
 * The throttle of one pull over `limits` (undefined and 0 entries dropped), at the priority `rank`
 * (read at each take, so a raised pull goes first from then on); undefined when none limits.
 * @example const throttle = throttleOf([5e6, daemonLimiter], ticket);
 */
export function throttleOf(limits: readonly (RateLimit | undefined)[], rank: Ranked): ByteThrottle | undefined {
  const limiters = limits.flatMap((l) => (l === undefined || l === 0 ? [] : [typeof l === 'number' ? new RateLimiter(l) : l]));
  if (limiters.length === 0) return undefined;
  let waiting = 0;
  const settle = (): void => void waiting--;
  const chain = (i: number, n: number): Promise<void> | undefined => {
    for (; i < limiters.length; i++) {
      const wait = limiters[i]!.take(n, rank);
      if (wait !== undefined) return wait.then(() => chain(i + 1, n));
    }
    return undefined;
  };
  return {
    take(n) {
      const wait = chain(0, n);
      if (wait === undefined) return undefined;
      waiting++;
      return wait.finally(settle);
    },
    get waiting() {
      return waiting;
    },
  };
}

function checkRate(bytesPerSecond: number, what: string): number {
  if (!Number.isSafeInteger(bytesPerSecond) || bytesPerSecond < 0) {
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${show(bytesPerSecond)}: want a whole number of bytes per second (0: no limit)`);
  }
  return bytesPerSecond;
}

function rankOf(rank: Ranked | number): number {
  const r = typeof rank === 'number' ? rank : rank.rank;
  return Math.max(0, Math.min(RANKS - 1, Math.floor(r)));
}

function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}
