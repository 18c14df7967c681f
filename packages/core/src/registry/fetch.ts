// Ranged, parallel blob download: the blob is split into chunks fetched over several connections,
// each response written at its offset as it arrives, so memory stays flat whatever the blob size.
// A retry asks only for what its chunk still lacks, a chunk that straggles is re-issued, and
// ranges already in the sink (`have`, a resumed download) are not fetched again.
import { setMaxListeners } from 'node:events';
import type { RegistryResponse } from './message.js';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import { isRetryableStatus, parseRetryAfter, RETRY_AFTER_MAX_MS, retryDelayMs, sleep } from '../util/retry.js';
import type { RegistryClient } from './client.js';
import { consumeBody, discard, headerValue, responseError } from './response.js';
import type { RangeRequest } from './range-request.js';
import type { ByteThrottle } from './ratelimit.js';
import { FetchScheduler, sharedFetchScheduler, type Ranked } from './scheduler.js';

export type { RangeRequest } from './range-request.js';

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
  /** Bytes per second under which a range is a straggler (see DEFAULT_STRAGGLER_FLOOR). */
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

/**
 * Bytes per range request. The rate is flat over 4 to 64 MiB on loopback (docs/architecture.md,
 * "Figures behind the defaults"). 16 MiB keeps enough ranges to run 16 in parallel on a 256 MiB layer, and each
 * straggler or resume loses at most one range, while real networks' round trips favour fewer requests.
 */
export const DEFAULT_CHUNK_SIZE = 16 * 1024 * 1024;

/** Attempts per chunk; a retry asks only for the bytes still missing. */
const DEFAULT_ATTEMPTS = 4;

/**
 * Default {@link FetchOptions.orderLead}: four chunks. A 1 GiB layer of fp16-like weights pulled
 * from a loopback registry, caches dropped, 2 cores: without it 13 of the first 16 ranges got 8 MiB/s
 * each while three others fetched far ahead, so the bytes from offset 0 (what the unpacker follows)
 * stalled (docs/architecture.md, "Figures behind the defaults").
 */
export const DEFAULT_ORDER_LEAD = 64 * 1024 * 1024;

/**
 * The longest a range waits for the earliest one before reading its next piece of body: a range
 * that yields still moves (a 64 KiB piece per wait is 1.3 MB/s), far above the straggler floor, so
 * yielding never makes a range look stalled, and a slow earliest range cannot stop the others.
 */
const ORDER_MAX_WAIT_MS = 50;
/** How often a yielding range looks again. */
const ORDER_TICK_MS = 5;

/** The scheduler's key for a reference: its registry (mirrors share the global limit). */
function schedulerKey(ref: Reference): string {
  return ref.registry;
}

interface Range {
  readonly start: number;
  /** Exclusive. */
  readonly end: number;
}

/** A range of the download's plan: its position among the chunks, and when it asked for a connection (for onRange). */
interface Chunk extends Range {
  readonly chunk: number;
  readonly queuedAt: number;
}

/**
 * Downloads a blob into `sink`. Blobs larger than one chunk are fetched as parallel Range requests;
 * a server that ignores Range (200 with the whole body) is used as one stream. The caller verifies
 * the digest of what landed (the unpacker hashes the file in the same pass that extracts it).
 * Ranges are retried, and re-issued when they straggle. Throws INVALID_ARGUMENT for a chunk size
 * under 64 KiB, the registry error codes (NOT_FOUND, UNAUTHORIZED, NETWORK_ERROR, ...),
 * SIZE_MISMATCH when the registry sends more or less than the descriptor says, and ABORTED.
 * @example
 * const ingest = await store.content.newIngest(desc);
 * await fetchBlob(client, parseReference('127.0.0.1:5000/app:1'), desc, ingest, { have: ingest.resumed });
 * await store.content.commit(ingest); // verifies size and digest
 */
export async function fetchBlob(client: RegistryClient, ref: Reference, desc: Descriptor, sink: RandomAccessSink, options: FetchOptions = {}): Promise<void> {
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  if (!Number.isSafeInteger(chunkSize) || chunkSize < 64 * 1024) throw new FastpullError('INVALID_ARGUMENT', `chunk size ${chunkSize}: want an integer of at least 64 KiB`);
  const scheduler = options.scheduler ?? sharedFetchScheduler();
  const host = schedulerKey(ref);
  const limit = <T>(fn: () => Promise<T>, bytes: number, signal?: AbortSignal) => scheduler.run(host, bytes, fn, signal, options.rank);
  const orderLead = options.orderLead ?? DEFAULT_ORDER_LEAD;
  if (!Number.isSafeInteger(orderLead) || orderLead < 0) throw new FastpullError('INVALID_ARGUMENT', `order lead ${orderLead}: want an integer of 0 or more`);
  const ctx: ChunkContext = {
    client,
    ref,
    desc,
    sink,
    options,
    what: `blob ${desc.digest} of ${ref.registry}/${ref.repository}`,
    ...(orderLead > 0 ? { order: new RangeOrder(orderLead) } : {}),
  };
  const missing = missingRanges(desc.size, options.have ?? []);
  if (missing.length === 0) return;

  if (missing.length === 1 && missing[0]!.start === 0 && desc.size <= chunkSize) {
    const queuedAt = performance.now();
    await limit(() => fetchRange(ctx, { start: 0, end: desc.size, chunk: 0, queuedAt }, false), desc.size, options.signal);
    return;
  }
  const chunks: Chunk[] = [];
  const queuedAt = performance.now();
  for (const m of missing) {
    for (let start = m.start; start < m.end; start += chunkSize) chunks.push({ start, end: Math.min(m.end, start + chunkSize), chunk: chunks.length, queuedAt });
  }
  // The first chunk probes Range support; the others start once the server has shown it honours it.
  const first = await limit(() => fetchRange(ctx, chunks[0]!, true, true), chunks[0]!.end - chunks[0]!.start, options.signal);
  if (first === 'whole') return;
  const ranges = chunks.slice(1);
  const inner = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, inner.signal]) : inner.signal;
  setMaxListeners(0, signal); // one listener per chunk in flight
  const sub: ChunkContext = { ...ctx, options: { ...options, signal } };
  let failure: unknown;
  // They ask for connections now, after the probe.
  const queued = performance.now();
  const paced = async (r: Chunk): Promise<void> => {
    await options.pace?.(r.start);
    await limit(() => fetchRange(sub, { ...r, queuedAt: queued }, true), r.end - r.start, signal);
  };
  const tasks = ranges.map((r) =>
    paced(r).catch((e: unknown) => {
      // The first failure stops the other chunks; all are settled before the caller sees it, so no
      // write lands in the sink after fetchBlob returns.
      if (failure === undefined) failure = e;
      inner.abort(e);
    }),
  );
  await Promise.all(tasks);
  if (failure !== undefined) throw failure as unknown;
}

interface ChunkContext {
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
interface Cursor {
  pos: number;
  /** Waits on the rate limit so far: a window in which one began proves nothing about the registry. */
  holds: number;
  /** Waiting on the rate limit now. */
  holding: boolean;
}

/** A request of a range under way, as {@link RangeOrder} sees it. */
interface RunningRange {
  /** Where this request's body starts. */
  readonly from: number;
  /** Where its next byte lands. */
  readonly cursor: { readonly pos: number };
}

/**
 * In-order priority among one download's ranges. The unpacker follows the bytes landed from offset 0,
 * so a byte at the earliest range in flight is worth more than one far past it; yet ranges in
 * parallel share the reading thread and the path, and one that got ahead tends to stay ahead (its
 * connection's window grew while the others' did not). So a range that is more than `lead` bytes past
 * the earliest range's next byte, and has received more bytes than that range since their requests
 * went out, waits a little before reading each piece of its body (at most ORDER_MAX_WAIT_MS, less
 * once it is no longer ahead): what it leaves unread goes to the earliest range. Ranges that move at
 * the same pace never wait, so a download whose connections are each capped (the usual reason for
 * parallel ranges) keeps them all busy.
 */
export class RangeOrder {
  private readonly running = new Set<RunningRange>();

  /** @param lead - bytes a range may run past the earliest one's next byte without yielding. */
  constructor(readonly lead: number) {}

  /** Counts a request from now until the returned function is called. */
  enter(range: RunningRange): () => void {
    this.running.add(range);
    return () => void this.running.delete(range);
  }

  /** Whether `range` is to yield now: far past the earliest range in flight, and gaining on it. */
  ahead(range: RunningRange): boolean {
    let first: RunningRange | undefined;
    for (const r of this.running) if (first === undefined || r.from < first.from) first = r;
    if (first === undefined || first === range) return false;
    if (range.cursor.pos - first.cursor.pos <= this.lead) return false;
    return range.cursor.pos - range.from > first.cursor.pos - first.from;
  }

  /** Waits while `range` is {@link ahead}, at most ORDER_MAX_WAIT_MS; resolves at once otherwise. */
  async yieldFor(range: RunningRange): Promise<number> {
    if (!this.ahead(range)) return 0;
    const started = performance.now();
    let waited = 0;
    do {
      await new Promise<void>((resolve) => setTimeout(resolve, ORDER_TICK_MS));
      waited = performance.now() - started;
    } while (waited < ORDER_MAX_WAIT_MS && this.ahead(range));
    return waited;
  }
}

/**
 * Fetches one range with retries; a retry asks only for what is still missing. Returns 'whole' when
 * the server answered a ranged request with the complete blob (and that was written).
 */
async function fetchRange(ctx: ChunkContext, range: Chunk, ranged: boolean, probe = false): Promise<'range' | 'whole'> {
  const attempts = ctx.options.attempts ?? DEFAULT_ATTEMPTS;
  const cursor: Cursor = { pos: range.start, holds: 0, holding: false };
  let lastError: unknown;
  let retryAfter: number | undefined;
  let stragglers = 0;
  // Set once the server answered with the whole blob (it ignored Range): from then on this request
  // stands for the whole blob, and a retry after a broken connection asks for the rest of it.
  let whole = false;
  // For onRange: requests sent so far, and why the next one goes out.
  let sent = 0;
  let reason: RangeRequest['reason'] = 'first';
  for (let attempt = 0; attempt < attempts; attempt++) {
    throwIfAborted(ctx.options.signal, ctx.what);
    if (attempt > 0) await sleep(retryDelayMs(attempt, retryAfter), ctx.options.signal);
    retryAfter = undefined;
    const watchdog = new Watchdog(ctx, cursor);
    let origin: string | undefined;
    const record = ctx.options.onRange ? { sentAt: performance.now(), start: cursor.pos, end: whole ? ctx.desc.size : range.end, offset: cursor.pos, status: 0, yieldedMs: 0 } : undefined;
    let outcome: RangeRequest['outcome'] = 'error';
    let code: string | undefined;
    try {
      const pos = cursor.pos;
      const end = whole ? ctx.desc.size : range.end;
      const useRange = ranged || pos > range.start;
      const headers: Record<string, string> = useRange ? { range: `bytes=${pos}-${end - 1}` } : {};
      const res = await ctx.client.request(ctx.ref, `blobs/${ctx.desc.digest}`, { headers, signal: watchdog.signal, onEndpoint: (o) => (origin = o), blob: true });
      if (record) record.status = res.statusCode;
      if (res.statusCode === 206) {
        checkContentRange(ctx, res, pos, end);
        await writeBody(ctx, res, cursor, end, record);
        outcome = 'done';
        return whole ? 'whole' : 'range';
      }
      if (res.statusCode === 200) {
        // A server that ignores Range sends the whole blob. That is usable by the request that may
        // stand for the whole blob: the blob's only request, the first one (the other ranges have
        // not started; a resumed download then starts over), or a retry of a whole-blob read cut
        // off mid-body, which starts over at 0 (the same bytes land at the same offsets again; the
        // digest is checked as always). Any other range is running beside others: an error.
        if (ranged && !probe && !whole) {
          await discard(res);
          throw new FastpullError('REGISTRY_ERROR', `${ctx.what}: server ignored the Range request for bytes ${pos}-${end - 1}`);
        }
        checkLength(ctx, res, ctx.desc.size);
        cursor.pos = 0;
        if (record) record.offset = 0;
        whole = true;
        await writeBody(ctx, res, cursor, ctx.desc.size, record);
        outcome = 'done';
        return 'whole';
      }
      retryAfter = parseRetryAfter(headerValue(res.headers['retry-after']));
      const err = await responseError(res, ctx.what);
      code = err.code;
      // A server that asks for a longer pause than we wait is answered with the error now.
      if (!isRetryableStatus(res.statusCode) || (retryAfter ?? 0) > RETRY_AFTER_MAX_MS) throw err;
      lastError = err;
      if (attempt + 1 < attempts) ctx.options.onRetry?.(err);
    } catch (e) {
      code = isFastpullError(e) ? e.code : undefined;
      if (ctx.options.signal?.aborted) outcome = 'aborted';
      if (watchdog.fired && !ctx.options.signal?.aborted) {
        outcome = 'straggler';
        // A straggler: its remainder goes out again at once, on a fresh connection (aborting the
        // request closed its socket), without spending one of the attempts meant for errors.
        ctx.options.onStraggler?.();
        // A slow mirror goes behind the other hosts, so the remainder is asked of the next one.
        if (origin !== undefined) ctx.client.demote(ctx.ref, origin);
        if (++stragglers <= MAX_STRAGGLER_REISSUES) attempt--;
        const why = watchdog.stalled ? `stalled at offset ${cursor.pos}: no byte for ${watchdog.stallMs} ms` : `from offset ${cursor.pos} stayed below ${watchdog.floor} bytes/s for ${watchdog.windowMs} ms`;
        lastError = new FastpullError('NETWORK_ERROR', `${ctx.what}: the range ${why}`, {
          cause: e,
          details: { offset: cursor.pos, straggler: true },
        });
        continue;
      }
      if (!isRetryable(e)) throw e;
      lastError = e;
      if (attempt + 1 < attempts) ctx.options.onRetry?.(e);
    } finally {
      watchdog.stop();
      if (record) {
        const { sentAt, start, end, offset, status, yieldedMs } = record;
        const bytes = cursor.pos - offset;
        ctx.options.onRange!({
          chunk: range.chunk,
          attempt: sent,
          reason,
          outcome,
          start,
          end,
          offset,
          bytes,
          ...(status ? { status } : {}),
          ...(code ? { code } : {}),
          queuedAt: range.queuedAt,
          sentAt,
          endedAt: performance.now(),
          ...(yieldedMs > 0 ? { yieldedMs } : {}),
        });
      }
      sent++;
      reason = outcome === 'straggler' ? 'reissue' : 'retry';
    }
  }
  throw lastError instanceof Error ? lastError : new FastpullError('NETWORK_ERROR', `${ctx.what}: failed after ${attempts} attempts`);
}

/** Re-issues of one chunk's remainder for being too slow, on top of its error attempts. */
const MAX_STRAGGLER_REISSUES = 8;
/**
 * The straggler floor: a range that receives fewer than this many bytes per second over a whole
 * window is cancelled and its remainder asked for again. Low enough that a slow but moving link is
 * left alone (16 connections at this floor is 256 KiB/s), high enough to catch a stalled one.
 */
export const DEFAULT_STRAGGLER_FLOOR = 16 * 1024;
/** The window over which the straggler floor is measured, in milliseconds. */
export const DEFAULT_STRAGGLER_WINDOW_MS = 10_000;

/**
 * A range whose body stops is re-issued after this long without a byte: a stalled connection
 * (a dead peer, a stuck proxy) is far likelier than a healthy one idle for seconds mid-body.
 */
export const DEFAULT_STALL_TIMEOUT_MS = 3_000;

/**
 * Watches one request: aborts it when its progress stays below the floor for a window, or when its
 * body stops for the stall timeout after bytes came.
 */
class Watchdog {
  readonly floor: number;
  readonly windowMs: number;
  readonly stallMs: number;
  readonly signal: AbortSignal;
  fired = false;
  /** Fired by the stall timeout (else by the floor). */
  stalled = false;
  private readonly controller = new AbortController();
  private readonly timers: NodeJS.Timeout[] = [];
  private mark: number;

  constructor(ctx: ChunkContext, cursor: Cursor) {
    this.floor = ctx.options.stragglerFloor ?? DEFAULT_STRAGGLER_FLOOR;
    this.windowMs = ctx.options.stragglerWindowMs ?? DEFAULT_STRAGGLER_WINDOW_MS;
    this.stallMs = ctx.options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    this.signal = ctx.options.signal ? AbortSignal.any([ctx.options.signal, this.controller.signal]) : this.controller.signal;
    this.mark = cursor.pos;
    const fire = (stalled: boolean): void => {
      if (this.fired) return;
      this.fired = true;
      this.stalled = stalled;
      this.controller.abort(new Error(stalled ? 'stalled' : 'straggler'));
    };
    // The floor is judged over windows timed by finer ticks: a tick that comes late means this
    // thread was busy (bytes may be waiting unread), so that window proves nothing and starts again.
    const floorTickMs = Math.max(25, Math.min(1000, this.windowMs / 4));
    let windowAt = performance.now();
    let floorTickAt = windowAt;
    // Time the rate limit held the range back counts as a late tick: the registry was not slow.
    let floorHolds = cursor.holds;
    const held = (seen: number): boolean => cursor.holding || cursor.holds !== seen;
    this.timers.push(
      setInterval(() => {
        const now = performance.now();
        const late = now - floorTickAt > 2 * floorTickMs || held(floorHolds);
        floorHolds = cursor.holds;
        floorTickAt = now;
        if (!late && now - windowAt < this.windowMs) return;
        if (!late && cursor.pos - this.mark < (this.floor * (now - windowAt)) / 1000) fire(false);
        this.mark = cursor.pos;
        windowAt = now;
      }, floorTickMs),
    );
    if (this.stallMs > 0) {
      const start = cursor.pos;
      const tickMs = Math.max(25, Math.min(500, this.stallMs / 4));
      let last = cursor.pos;
      let movedAt = performance.now();
      let tickAt = movedAt;
      let stallHolds = cursor.holds;
      this.timers.push(
        setInterval(() => {
          const now = performance.now();
          // A tick that comes late means this thread was busy: bytes may be waiting unread, so
          // the silence proves nothing; start counting again.
          const late = now - tickAt > 2 * tickMs || held(stallHolds);
          stallHolds = cursor.holds;
          tickAt = now;
          if (cursor.pos !== last || late) {
            last = cursor.pos;
            movedAt = now;
          } else if (last > start && now - movedAt >= this.stallMs) {
            fire(true);
          }
        }, tickMs),
      );
    }
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
  }
}

/**
 * Registry errors worth another try (a Content-Range that disagrees, as a proxy's cache can send
 * once): known here, kept out of the error's public `details`.
 */
const retryableErrors = new WeakSet<Error>();

function isRetryable(e: unknown): boolean {
  if (!isFastpullError(e)) return true;
  return e.code === 'NETWORK_ERROR' || (e.code === 'REGISTRY_ERROR' && retryableErrors.has(e));
}

function checkLength(ctx: ChunkContext, res: RegistryResponse, want: number): void {
  const encoding = headerValue(res.headers['content-encoding']);
  if (encoding !== undefined && encoding !== 'identity') {
    void discard(res);
    throw new FastpullError('REGISTRY_ERROR', `${ctx.what}: server applied Content-Encoding ${encoding}, which would change the bytes hashed`);
  }
  const length = headerValue(res.headers['content-length']);
  if (length !== undefined && Number(length) !== want) {
    void discard(res);
    throw new FastpullError('SIZE_MISMATCH', `${ctx.what}: Content-Length ${length}, want ${want}`, { details: { want, got: Number(length) } });
  }
}

function checkContentRange(ctx: ChunkContext, res: RegistryResponse, start: number, end: number): void {
  const header = headerValue(res.headers['content-range']) ?? '';
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header.trim());
  if (!m || Number(m[1]) !== start || Number(m[2]) !== end - 1 || (m[3] !== '*' && Number(m[3]) !== ctx.desc.size)) {
    void discard(res);
    const e = new FastpullError('REGISTRY_ERROR', `${ctx.what}: Content-Range ${JSON.stringify(header)} does not match the request for bytes ${start}-${end - 1}/${ctx.desc.size}`);
    retryableErrors.add(e);
    throw e;
  }
  checkLength(ctx, res, end - start);
}

/**
 * Streams a body to the sink from `cursor.pos`, refusing bytes past `end`. The cursor advances as
 * bytes land, so a retry after a broken connection asks only for the remainder. Time spent yielding
 * to the earliest range (see RangeOrder) is added to `spent`.
 */
async function writeBody(ctx: ChunkContext, res: RegistryResponse, cursor: Cursor, end: number, spent?: { yieldedMs: number }): Promise<void> {
  let pos = cursor.pos;
  const running: RunningRange = { from: pos, cursor };
  const leave = ctx.order?.enter(running);
  const order = ctx.order;
  const throttle = ctx.options.throttle;
  // Before the next piece is read: while this waits, the body is not read and its connection soon stops.
  const yieldToOrder = (): Promise<void> | undefined => {
    if (order === undefined || pos >= end || !order.ahead(running)) return undefined;
    return order.yieldFor(running).then((ms) => {
      if (spent !== undefined) spent.yieldedMs += ms;
    });
  };
  const unheld = (): Promise<void> | undefined => {
    cursor.holding = false;
    return yieldToOrder();
  };
  const landed = (n: number): Promise<void> | undefined => {
    pos += n;
    cursor.pos = pos;
    ctx.options.onBytes?.(n);
    const hold = throttle?.take(n);
    if (hold === undefined) return yieldToOrder();
    cursor.holds++;
    cursor.holding = true;
    return hold.then(unheld);
  };
  const take = (chunk: Buffer): Promise<void> | undefined => {
    if (pos + chunk.length > end) {
      throw new FastpullError('SIZE_MISMATCH', `${ctx.what}: server sent more than the ${end - pos} bytes expected at offset ${pos}`);
    }
    if (ctx.sink.writeNow?.(chunk, pos) === true) return landed(chunk.length);
    return ctx.sink.write(chunk, pos).then(() => landed(chunk.length));
  };
  try {
    await (res.direct ? res.direct.consume(take) : consumeBody(res.body, take));
  } catch (e) {
    res.body.destroy();
    if (isFastpullError(e)) throw e;
    if (ctx.options.signal?.aborted) throw new FastpullError('ABORTED', `${ctx.what}: aborted`, { cause: e });
    throw new FastpullError('NETWORK_ERROR', `${ctx.what}: connection failed at offset ${pos}: ${(e as Error).message}`, { cause: e, details: { offset: pos } });
  } finally {
    leave?.();
  }
  if (pos !== end) {
    throw new FastpullError('NETWORK_ERROR', `${ctx.what}: response ended at offset ${pos}, want ${end}`, { details: { offset: pos } });
  }
}

/** The parts of [0, size) not covered by `have`, in order. */
export function missingRanges(size: number, have: readonly (readonly [number, number])[]): Range[] {
  const sorted = [...have].filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  const out: Range[] = [];
  let pos = 0;
  for (const [a, b] of sorted) {
    if (a > pos) out.push({ start: pos, end: Math.min(a, size) });
    pos = Math.max(pos, b);
    if (pos >= size) break;
  }
  if (pos < size) out.push({ start: pos, end: size });
  return out.filter((r) => r.end > r.start);
}
