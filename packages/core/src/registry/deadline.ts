// The deadline of a registry's small documents (manifests, indexes, configs, referrers lists): each is
// read whole, its retries and their waits included, within the metadata timeout. The idle timeout
// alone never ends a read whose registry keeps sending a byte now and then; layer ranges have their
// own guards (the straggler floor and the pull's no-progress watchdog).
import { FastpullError } from '../errors.js';

/**
 * How long one document may take. As long as the layers' no-progress timeout: a document is at most
 * a few MiB, and its retries may wait up to a minute for a registry's Retry-After.
 */
export const DEFAULT_METADATA_TIMEOUT_MS = 120_000;

/** A metadata timeout as given: a positive, finite number of milliseconds. */
export function checkMetadataTimeout(ms: number, what = 'metadataTimeoutMs'): number {
  if (!Number.isFinite(ms) || ms <= 0) throw new FastpullError('INVALID_ARGUMENT', `${what} ${ms}: want a positive number of milliseconds`);
  return ms;
}

/**
 * Runs `read` with a signal that fires when `signal` does or `timeoutMs` has passed; a read ended by
 * the deadline fails NETWORK_ERROR with `details.timeoutMs`, not ABORTED, and is not tried again.
 */
export async function withinDeadline<T>(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  what: string,
  read: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const inner = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    inner.abort();
  }, timeoutMs);
  const onAbort = (): void => inner.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await read(inner.signal);
  } catch (e) {
    if (!timedOut || signal?.aborted) throw e;
    throw new FastpullError('NETWORK_ERROR', `${what}: not read whole within the metadata timeout (${seconds(timeoutMs)}): the registry sends it too slowly`, {
      cause: e,
      details: { timeoutMs },
    });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

function seconds(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}
