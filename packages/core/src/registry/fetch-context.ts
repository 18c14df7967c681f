// The shapes one blob download passes between its steps: where its bytes go, its options, the ranges
// of its plan, and the state each request of a range shares with its watchdog.
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import type { RegistryClient } from './client.js';
import type { RangeOrder } from './range-order.js';
import type { RangeRequest } from './range-request.js';
import type { ByteThrottle } from './ratelimit.js';
import type { FetchScheduler, Ranked } from './scheduler.js';

/** Where downloaded bytes go: positional writes into one file. */
export interface RandomAccessSink {
  /**
   * Writes `data` at byte `position`; chunks arrive in any order, possibly concurrently. `data` is
   * valid until the promise settles (it may be a view of a connection's read buffer, reused for
   * the next read): copy what is to be kept longer.
   */
  write(data: Uint8Array, position: number): Promise<void>;
  /**
   * Writes `data` at `position` before returning, and returns true; or writes nothing and returns
   * false when it cannot now (then {@link write} does). Optional: spares the download a promise per
   * network read. `data` is valid until it returns.
   */
  writeNow?(data: Uint8Array, position: number): boolean;
}

/** Options of {@link fetchBlob}. */
export interface FetchOptions {
  /** Bytes per range request. 16 MiB ranges measured best on loopback (docs/architecture.md, figures). */
  readonly chunkSize?: number;
  /** The scheduler of requests in flight; default the process-wide one. */
  readonly scheduler?: FetchScheduler;
  /** Where this blob's requests queue among others waiting for the scheduler (a pull's priority); default a normal pull's. */
  readonly rank?: Ranked;
  /** Stops the download (ABORTED) once every request in flight has settled. */
  readonly signal?: AbortSignal;
  /** Called with the number of new bytes written, from any chunk. */
  readonly onBytes?: (n: number) => void;
  /** Attempts per chunk for transport errors and retryable statuses. */
  readonly attempts?: number;
  /** Ranges [start, end) already in the sink (a resumed download): only the rest is fetched. */
  readonly have?: readonly (readonly [number, number])[];
  /** Bytes per second under which a range is a straggler (see DEFAULT_STRAGGLER_FLOOR, range-watchdog.ts). */
  readonly stragglerFloor?: number;
  /** The window over which the straggler floor is measured, in milliseconds. */
  readonly stragglerWindowMs?: number;
  /**
   * A range whose body stops, no byte for this long after bytes came, is a straggler at once,
   * without waiting for the floor's window (default 3 s; 0: off). Slow first bytes do not count.
   */
  readonly stallTimeoutMs?: number;
  /** Called when a straggling range is cancelled and re-issued. */
  readonly onStraggler?: () => void;
  /** Called when a range request failed in a way worth retrying and is about to be retried. */
  readonly onRetry?: (error: unknown) => void;
  /** Called when each HTTP request for a range has ended, whatever its outcome (for traces). */
  readonly onRange?: (request: RangeRequest) => void;
  /**
   * Bytes a range may run ahead of the earliest range in flight before it yields to it (default
   * DEFAULT_ORDER_LEAD; 0: ranges never yield). See {@link RangeOrder}.
   */
  readonly orderLead?: number;
  /**
   * Called with each range's first byte before the range asks for a connection (every range after
   * the first): the range waits for the promise it returns, if any. Lets a caller hold the download
   * back to a reader's pace.
   */
  readonly pace?: (start: number) => Promise<void> | undefined;
  /**
   * The network rate limit the body reads draw from: a read that must wait leaves the socket unread
   * meanwhile (TCP then slows the sender), and the time held counts as no stall. Absent: no limit.
   */
  readonly throttle?: ByteThrottle;
}

export interface Range {
  readonly start: number;
  /** Exclusive. */
  readonly end: number;
}

/** A range of the download's plan: its position among the chunks, and when it asked for a connection (for onRange). */
export interface Chunk extends Range {
  readonly chunk: number;
  readonly queuedAt: number;
}

/** What every request of one download shares. */
export interface ChunkContext {
  readonly client: RegistryClient;
  readonly ref: Reference;
  readonly desc: Descriptor;
  readonly sink: RandomAccessSink;
  readonly options: FetchOptions;
  readonly what: string;
  /** Where the download's ranges yield to the earliest one; absent: they never do. */
  readonly order?: RangeOrder;
}

/** Where a range's next byte lands, and whether a rate limit holds it back (its watchdog's view). */
export interface Cursor {
  pos: number;
  /** Waits on the rate limit so far: a window in which one began proves nothing about the registry. */
  holds: number;
  /** Waiting on the rate limit now. */
  holding: boolean;
}
