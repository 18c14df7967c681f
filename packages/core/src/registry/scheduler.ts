// One scheduler for every blob request of the process: a global limit on requests in flight, a limit
// per host, and a budget of bytes asked for but not yet landed, so that several pulls (the daemon
// runs many) share the node's network and memory instead of each taking its own.
import { FastpullError } from '../errors.js';

/** Limits of a {@link FetchScheduler}; each must be a positive integer. */
export interface FetchSchedulerOptions {
  /** Requests in flight across all hosts. */
  readonly maxRequests?: number;
  /** Requests in flight to one host. */
  readonly maxPerHost?: number;
  /** Bytes of ranges in flight (asked for, not yet landed). One request is always let through. */
  readonly maxBytes?: number;
}

/**
 * 16 requests of 16 MiB reached 589 MB/s on loopback, 0.75x curl (docs/architecture.md, figures): that saturates one
 * Node main thread; more only adds memory. Per host the same, so one registry can use it all; a
 * mirror and its upstream share the global limit. 512 MiB of ranges in flight is 32 full chunks.
 */
export const DEFAULT_MAX_REQUESTS = 16;
/** Default {@link FetchSchedulerOptions.maxPerHost}: one registry may use every request slot. */
export const DEFAULT_MAX_PER_HOST = 16;
/** Default {@link FetchSchedulerOptions.maxBytes}: 512 MiB of ranges in flight. */
export const DEFAULT_MAX_BYTES = 512 * 1024 * 1024;

interface Waiter {
  readonly host: string;
  readonly bytes: number;
  readonly rank: Ranked | undefined;
  readonly seq: number;
  readonly grant: () => void;
}

/** What orders waiting requests: higher rank first (a pull's priority; it may rise while it waits). */
export interface Ranked {
  readonly rank: number;
}

/** The rank of a request that names none: a normal pull's. */
const NORMAL_RANK = 1;

/**
 * Shares the network among blob downloads: a limit on requests in flight, one per host, and a
 * budget of bytes asked for but not yet landed. Throws INVALID_ARGUMENT for a limit that is not a
 * positive integer; a withdrawn wait rejects with ABORTED.
 * @example
 * const scheduler = new FetchScheduler({ maxRequests: 4, maxPerHost: 4 });
 * await pull('127.0.0.1:5000/app:1', { root, scheduler });
 */
export class FetchScheduler {
  /** Requests in flight across all hosts. */
  readonly maxRequests: number;
  /** Requests in flight to one host. */
  readonly maxPerHost: number;
  /** Bytes of ranges in flight. */
  readonly maxBytes: number;
  private requests = 0;
  private bytes = 0;
  private readonly perHost = new Map<string, number>();
  private readonly waiting: Waiter[] = [];
  private seq = 0;

  constructor(options: FetchSchedulerOptions = {}) {
    this.maxRequests = positive(options.maxRequests ?? DEFAULT_MAX_REQUESTS, 'maxRequests');
    this.maxPerHost = positive(options.maxPerHost ?? DEFAULT_MAX_PER_HOST, 'maxPerHost');
    this.maxBytes = positive(options.maxBytes ?? DEFAULT_MAX_BYTES, 'maxBytes');
  }

  /** Requests and bytes in flight now. */
  get inFlight(): { requests: number; bytes: number } {
    return { requests: this.requests, bytes: this.bytes };
  }

  /**
   * Runs `fn` once a slot for `host` and `bytes` is free: among those that fit, the highest `rank`
   * first (a normal pull's when none is given), then in arrival order. `signal` withdraws a waiting request.
   */
  async run<T>(host: string, bytes: number, fn: () => Promise<T>, signal?: AbortSignal, rank?: Ranked): Promise<T> {
    await this.acquire(host, bytes, signal, rank);
    try {
      return await fn();
    } finally {
      this.release(host, bytes);
    }
  }

  private fits(host: string, bytes: number): boolean {
    if (this.requests >= this.maxRequests) return false;
    if ((this.perHost.get(host) ?? 0) >= this.maxPerHost) return false;
    return this.requests === 0 || this.bytes + bytes <= this.maxBytes;
  }

  private take(host: string, bytes: number): void {
    this.requests++;
    this.bytes += bytes;
    this.perHost.set(host, (this.perHost.get(host) ?? 0) + 1);
  }

  private acquire(host: string, bytes: number, signal?: AbortSignal, rank?: Ranked): Promise<void> {
    if (signal?.aborted) return Promise.reject(new FastpullError('ABORTED', 'waiting for a connection: aborted', { cause: signal.reason }));
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new FastpullError('ABORTED', 'waiting for a connection: aborted', { cause: signal?.reason }));
        this.pump();
      };
      const waiter: Waiter = {
        host,
        bytes,
        rank,
        seq: this.seq++,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
      this.pump();
    });
  }

  private release(host: string, bytes: number): void {
    this.requests--;
    this.bytes -= bytes;
    const n = (this.perHost.get(host) ?? 1) - 1;
    if (n === 0) this.perHost.delete(host);
    else this.perHost.set(host, n);
    this.pump();
  }

  /**
   * Grants waiting requests that fit now, highest rank first, then oldest first; a host at its limit
   * does not block others. Ranks are read again each time: a waiting pull's may have risen.
   */
  private pump(): void {
    if (this.waiting.length > 1) this.waiting.sort((a, b) => (b.rank?.rank ?? NORMAL_RANK) - (a.rank?.rank ?? NORMAL_RANK) || a.seq - b.seq);
    for (let i = 0; i < this.waiting.length && this.requests < this.maxRequests;) {
      const w = this.waiting[i]!;
      if (this.fits(w.host, w.bytes)) {
        this.waiting.splice(i, 1);
        this.take(w.host, w.bytes);
        w.grant();
      } else {
        i++;
      }
    }
  }
}

function positive(n: number, name: string): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new FastpullError('INVALID_ARGUMENT', `fetch scheduler ${name} ${n}: want a positive integer`);
  return n;
}

let shared: FetchScheduler | undefined;

/**
 * The process-wide scheduler that pulls share unless given their own, with the default limits.
 * @example
 * const { requests, bytes } = sharedFetchScheduler().inFlight;
 */
export function sharedFetchScheduler(): FetchScheduler {
  shared ??= new FetchScheduler();
  return shared;
}
