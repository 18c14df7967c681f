// Back-off between retries: exponential with full jitter, abortable.
import { FastpullError } from '../errors.js';

/** First retry waits about this long; each next one doubles it. */
export const BACKOFF_BASE_MS = 200;
/** No single wait is longer than this. */
export const BACKOFF_MAX_MS = 10_000;

/** The wait before retry number `attempt` (1 for the first retry): base * 2^(attempt-1), jittered to 50-150%. */
export function backoffMs(attempt: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1)) * (0.5 + Math.random());
}

/** The longest Retry-After fastpull waits for; a registry asking for more fails the request. */
export const RETRY_AFTER_MAX_MS = 60_000;

/**
 * Milliseconds a Retry-After header asks for (RFC 9110: delay-seconds or an HTTP-date), or
 * undefined when absent or unreadable. `now` is for tests.
 */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d{1,10}$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at) || !/[a-z]/i.test(v)) return undefined;
  return Math.max(0, at - now);
}

/** The wait before retry `attempt`: the back-off, or longer when the server asked for it. */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined): number {
  const backoff = backoffMs(attempt);
  return retryAfterMs === undefined ? backoff : Math.max(backoff, retryAfterMs);
}

/** Statuses worth another try: timeouts, rate limits and server errors. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new FastpullError('ABORTED', 'aborted while waiting to retry', { cause: signal.reason }));
      return;
    }
    const t = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }
    function onAbort() {
      clearTimeout(t);
      reject(new FastpullError('ABORTED', 'aborted while waiting to retry', { cause: signal?.reason }));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
