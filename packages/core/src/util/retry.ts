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
