// Reading registry responses: header values, small capped bodies, and the error a failed response means.
import type { Readable } from 'node:stream';
import { finished } from 'node:stream';
import type { RegistryResponse } from './message.js';
import { FastpullError, isFastpullError } from '../errors.js';
import { readCapped } from './auth.js';
import type { ByteThrottle } from './ratelimit.js';
import { ERROR_BODY_CAP } from './defaults.js';

/** The first value of a header undici may hand over as a list. */
export function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Reads a whole small body (capped). A transport failure mid-body (reset, idle timeout) is
 * NETWORK_ERROR with `details.body`, which the small reads retry; an abort is ABORTED.
 */
export async function readBody(
  res: RegistryResponse,
  cap: number,
  what: string,
  code: 'MANIFEST_TOO_LARGE' | 'REGISTRY_ERROR',
  signal: AbortSignal | undefined,
  throttle?: ByteThrottle,
): Promise<Buffer> {
  try {
    return await readCapped(res.body, cap, what, code, throttle);
  } catch (e) {
    if (isFastpullError(e)) throw e;
    res.body.destroy();
    if (signal?.aborted) throw new FastpullError('ABORTED', `${what}: aborted`, { cause: e });
    throw new FastpullError('NETWORK_ERROR', `${what}: connection failed while reading the response: ${(e as Error).message}`, {
      cause: e,
      details: { body: true },
    });
  }
}

/** Drops a body that is not wanted, reading at most a little of it so the connection can be reused. */
export async function discard(res: RegistryResponse): Promise<void> {
  try {
    await res.body.dump({ limit: ERROR_BODY_CAP });
  } catch {
    // The connection is being dropped anyway.
  }
}

/** Turns a non-success response into the matching error, reading the distribution error body (capped). */
export async function responseError(res: RegistryResponse, what: string): Promise<FastpullError> {
  let detail = '';
  try {
    const body = await readCapped(res.body, ERROR_BODY_CAP, what);
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    const first = parsed.errors?.[0];
    if (first) detail = `: ${[first.code, first.message].filter(Boolean).join(' ')}`.slice(0, 300);
  } catch {
    await discard(res);
  }
  const status = res.statusCode;
  const details = { status };
  switch (status) {
    case 401:
      return new FastpullError('UNAUTHORIZED', `${what}: unauthorized (HTTP 401)${detail}`, { details });
    case 403:
      return new FastpullError('DENIED', `${what}: access denied (HTTP 403)${detail}`, { details });
    case 404:
      return new FastpullError('NOT_FOUND', `${what}: not found${detail}`, { details });
    case 429: {
      const retryAfter = headerValue(res.headers['retry-after']);
      return new FastpullError('RATE_LIMITED', `${what}: rate limited by the registry (HTTP 429)${retryAfter ? `, retry after ${retryAfter}` : ''}${detail}`, {
        details: { status, ...(retryAfter ? { retryAfter } : {}) },
      });
    }
    default:
      return new FastpullError('REGISTRY_ERROR', `${what}: registry answered HTTP ${status}${detail}`, { details });
  }
}

/**
 * Hands each chunk of `body` to `take` in order, from its 'data' events: `take` returns undefined
 * when it is done with the chunk, or a promise it is to be waited for (the body pauses meanwhile
 * and what it still emits waits in order). Resolves once the body ended and every chunk was taken;
 * rejects with the body's error, its premature close, or what `take` threw.
 *
 * Rather than `for await` over the body: that costs a promise and a trip through the stream's
 * async iterator per network read, and the ranged fetch takes a 64 KiB read every few
 * microseconds, which costs CPU a pull is short of (docs/architecture.md, "Figures behind the
 * defaults").
 */
export function consumeBody(body: Readable, take: (chunk: Buffer) => Promise<void> | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const queue: Buffer[] = [];
    let waiting = false;
    let ended = false;
    let settled = false;
    const settle = (e?: unknown): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      stop();
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the body's error or the caller's, passed on as it came
      if (e !== undefined) reject(e);
      else resolve();
    };
    // Takes queued chunks until one must be waited for; true once the queue is empty.
    const drain = (): boolean => {
      while (queue.length > 0 && !settled) {
        let wait: Promise<void> | undefined;
        try {
          wait = take(queue.shift()!);
        } catch (e) {
          settle(e);
          return false;
        }
        if (wait !== undefined) {
          waiting = true;
          body.pause();
          wait.then(
            () => {
              waiting = false;
              if (!drain()) return;
              if (ended) settle();
              else body.resume();
            },
            (e: unknown) => settle(e),
          );
          return false;
        }
      }
      return !settled;
    };
    const onData = (chunk: Buffer): void => {
      queue.push(chunk);
      if (!waiting) drain();
    };
    const stop = finished(body, (err) => {
      if (err) settle(err);
      else {
        ended = true;
        if (!waiting && queue.length === 0) settle();
      }
    });
    body.on('data', onData);
  });
}
