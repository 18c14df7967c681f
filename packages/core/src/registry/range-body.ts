// One range response's checks and body: Content-Length, Content-Encoding and Content-Range checked
// before a byte is read, then the body streamed to the sink at its offsets, bounded by the range.
import { FastpullError, isFastpullError } from '../errors.js';
import type { ChunkContext, Cursor } from './fetch-context.js';
import type { RegistryResponse } from './message.js';
import type { RunningRange } from './range-order.js';
import { consumeBody, discard, headerValue } from './response.js';

/**
 * Registry errors worth another try (a Content-Range that disagrees, as a proxy's cache can send
 * once): known here, kept out of the error's public `details`.
 */
const retryableErrors = new WeakSet<Error>();

export function isRetryable(e: unknown): boolean {
  if (!isFastpullError(e)) return true;
  return e.code === 'NETWORK_ERROR' || (e.code === 'REGISTRY_ERROR' && retryableErrors.has(e));
}

export function checkLength(ctx: ChunkContext, res: RegistryResponse, want: number): void {
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

export function checkContentRange(ctx: ChunkContext, res: RegistryResponse, start: number, end: number): void {
  const header = headerValue(res.headers['content-range']) ?? '';
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header.trim());
  if (!m || Number(m[1]) !== start || Number(m[2]) !== end - 1 || (m[3] !== '*' && Number(m[3]) !== ctx.desc.size)) {
    void discard(res);
    const e = new FastpullError(
      'REGISTRY_ERROR',
      `${ctx.what}: Content-Range ${JSON.stringify(header)} does not match the request for bytes ${start}-${end - 1}/${ctx.desc.size}`,
    );
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
export async function writeBody(ctx: ChunkContext, res: RegistryResponse, cursor: Cursor, end: number, spent?: { yieldedMs: number }): Promise<void> {
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
    throw new FastpullError('NETWORK_ERROR', `${ctx.what}: connection failed at offset ${pos}: ${(e as Error).message}`, {
      cause: e,
      details: { offset: pos },
    });
  } finally {
    leave?.();
  }
  if (pos !== end) {
    throw new FastpullError('NETWORK_ERROR', `${ctx.what}: response ended at offset ${pos}, want ${end}`, { details: { offset: pos } });
  }
}
