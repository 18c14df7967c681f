// Ranged, parallel blob download: the blob is split into chunks fetched over several connections,
// each response written at its offset as it arrives, so memory stays flat whatever the blob size.
// A retry asks only for what its chunk still lacks, a chunk that straggles is re-issued, and
// ranges already in the sink (`have`, a resumed download) are not fetched again.
import { setMaxListeners } from 'node:events';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import { isRetryableStatus, parseRetryAfter, RETRY_AFTER_MAX_MS, retryDelayMs, sleep } from '../util/retry.js';
import type { RegistryClient } from './client.js';
import type { Chunk, ChunkContext, Cursor, FetchOptions, RandomAccessSink, Range } from './fetch-context.js';
import type { RegistryResponse } from './message.js';
import { checkContentRange, checkLength, isRetryable, writeBody } from './range-body.js';
import { DEFAULT_ORDER_LEAD, RangeOrder } from './range-order.js';
import type { RangeRequest } from './range-request.js';
import { MAX_STRAGGLER_REISSUES, Watchdog } from './range-watchdog.js';
import { discard, headerValue, responseError } from './response.js';
import { sharedFetchScheduler } from './scheduler.js';

export type { RangeRequest } from './range-request.js';

/**
 * Bytes per range request. The rate is flat over 4 to 64 MiB on loopback (docs/architecture.md,
 * "Figures behind the defaults"). 16 MiB keeps enough ranges to run 16 in parallel on a 256 MiB layer, and each
 * straggler or resume loses at most one range, while real networks' round trips favour fewer requests.
 */
export const DEFAULT_CHUNK_SIZE = 16 * 1024 * 1024;

/** Attempts per chunk; a retry asks only for the bytes still missing. */
const DEFAULT_RANGE_ATTEMPTS = 4;

/** The scheduler's key for a reference: its registry (mirrors share the global limit). */
function schedulerKey(ref: Reference): string {
  return ref.registry;
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
  if (!Number.isSafeInteger(chunkSize) || chunkSize < 64 * 1024)
    throw new FastpullError('INVALID_ARGUMENT', `chunk size ${chunkSize}: want an integer of at least 64 KiB`);
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
    for (let start = m.start; start < m.end; start += chunkSize)
      chunks.push({ start, end: Math.min(m.end, start + chunkSize), chunk: chunks.length, queuedAt });
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

/** What onRange reports of one request, gathered while it runs. */
interface RangeRecord {
  readonly sentAt: number;
  readonly start: number;
  readonly end: number;
  offset: number;
  status: number;
  yieldedMs: number;
}

/**
 * Fetches one range with retries; a retry asks only for what is still missing. Returns 'whole' when
 * the server answered a ranged request with the complete blob (and that was written).
 */
async function fetchRange(ctx: ChunkContext, range: Chunk, ranged: boolean, probe = false): Promise<'range' | 'whole'> {
  const attempts = ctx.options.attempts ?? DEFAULT_RANGE_ATTEMPTS;
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
    const record: RangeRecord | undefined = ctx.options.onRange
      ? { sentAt: performance.now(), start: cursor.pos, end: whole ? ctx.desc.size : range.end, offset: cursor.pos, status: 0, yieldedMs: 0 }
      : undefined;
    let outcome: RangeRequest['outcome'] = 'error';
    let code: string | undefined;
    try {
      const pos = cursor.pos;
      const end = whole ? ctx.desc.size : range.end;
      const useRange = ranged || pos > range.start;
      const headers: Record<string, string> = useRange ? { range: `bytes=${pos}-${end - 1}` } : {};
      const res = await ctx.client.request(ctx.ref, `blobs/${ctx.desc.digest}`, {
        headers,
        signal: watchdog.signal,
        onEndpoint: (o) => (origin = o),
        blob: true,
      });
      if (record) record.status = res.statusCode;
      if (res.statusCode === 206) {
        checkContentRange(ctx, res, pos, end);
        await writeBody(ctx, res, cursor, end, record);
        outcome = 'done';
        return whole ? 'whole' : 'range';
      }
      if (res.statusCode === 200) {
        await checkWhole(ctx, res, { pos, end, alone: !ranged || probe || whole });
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
        // A straggler: its remainder goes out again at once, without spending one of the attempts meant for errors.
        if (++stragglers <= MAX_STRAGGLER_REISSUES) attempt--;
        lastError = straggled(ctx, watchdog, cursor, origin, e);
        continue;
      }
      if (!isRetryable(e)) throw e;
      lastError = e;
      if (attempt + 1 < attempts) ctx.options.onRetry?.(e);
    } finally {
      watchdog.stop();
      if (record) reportRange(ctx, range, record, { attempt: sent, reason, outcome, bytes: cursor.pos - record.offset, ...(code ? { code } : {}) });
      sent++;
      reason = outcome === 'straggler' ? 'reissue' : 'retry';
    }
  }
  throw lastError instanceof Error ? lastError : new FastpullError('NETWORK_ERROR', `${ctx.what}: failed after ${attempts} attempts`);
}

/**
 * Checks a 200 answer to a request for bytes [pos, end): the whole blob, to be written from offset 0.
 * A server that ignores Range sends the whole blob. That is usable by the request that may stand for
 * the whole blob (`alone`): the blob's only request, the first one (the other ranges have not
 * started; a resumed download then starts over), or a retry of a whole-blob read cut off mid-body,
 * which starts over at 0 (the same bytes land at the same offsets again; the digest is checked as
 * always). Any other range is running beside others: an error.
 */
async function checkWhole(ctx: ChunkContext, res: RegistryResponse, asked: { pos: number; end: number; alone: boolean }): Promise<void> {
  if (!asked.alone) {
    await discard(res);
    throw new FastpullError('REGISTRY_ERROR', `${ctx.what}: server ignored the Range request for bytes ${asked.pos}-${asked.end - 1}`);
  }
  checkLength(ctx, res, ctx.desc.size);
}

/**
 * A request its watchdog cancelled: the error that stands for it until the remainder lands. Aborting
 * the request closed its socket, so the remainder goes out on a fresh connection; a slow mirror goes
 * behind the other hosts, so the remainder is asked of the next one.
 */
function straggled(ctx: ChunkContext, watchdog: Watchdog, cursor: Cursor, origin: string | undefined, cause: unknown): FastpullError {
  ctx.options.onStraggler?.();
  if (origin !== undefined) ctx.client.demote(ctx.ref, origin);
  const why = watchdog.stalled
    ? `stalled at offset ${cursor.pos}: no byte for ${watchdog.stallMs} ms`
    : `from offset ${cursor.pos} stayed below ${watchdog.floor} bytes/s for ${watchdog.windowMs} ms`;
  return new FastpullError('NETWORK_ERROR', `${ctx.what}: the range ${why}`, {
    cause,
    details: { offset: cursor.pos, straggler: true },
  });
}

/** Reports one ended request of `range` to onRange. */
function reportRange(
  ctx: ChunkContext,
  range: Chunk,
  record: RangeRecord,
  ended: Pick<RangeRequest, 'attempt' | 'reason' | 'outcome' | 'bytes' | 'code'>,
): void {
  const { sentAt, start, end, offset, status, yieldedMs } = record;
  ctx.options.onRange!({
    chunk: range.chunk,
    attempt: ended.attempt,
    reason: ended.reason,
    outcome: ended.outcome,
    start,
    end,
    offset,
    bytes: ended.bytes,
    ...(status ? { status } : {}),
    ...(ended.code ? { code: ended.code } : {}),
    queuedAt: range.queuedAt,
    sentAt,
    endedAt: performance.now(),
    ...(yieldedMs > 0 ? { yieldedMs } : {}),
  });
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
