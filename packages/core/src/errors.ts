// The one error class of fastpull. Its `code` is public API: match on it, never on messages.

/**
 * Stable error codes. Adding a code is a feature; renaming one is a breaking change.
 * docs/errors.md describes each one.
 */
export const ErrorCodes = [
  'INVALID_ARGUMENT',
  'INVALID_REFERENCE',
  'INVALID_DIGEST',
  'INVALID_MANIFEST',
  'INVALID_LAYER',
  'MANIFEST_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'PLATFORM_NOT_FOUND',
  'NOT_FOUND',
  'UNAUTHORIZED',
  'DENIED',
  'RATE_LIMITED',
  'REGISTRY_ERROR',
  'NETWORK_ERROR',
  'INSECURE_REGISTRY',
  'DIGEST_MISMATCH',
  'SIZE_MISMATCH',
  'HOSTILE_LAYER',
  'NO_SPACE',
  'PERMISSION_DENIED',
  'ABORTED',
  'INTERNAL',
  'ALREADY_EXISTS',
  'FAILED_PRECONDITION',
  'SIGNATURE_MISSING',
  'SIGNATURE_INVALID',
  'TOO_MANY_LAYERS',
] as const;

/**
 * One of {@link ErrorCodes}: the kind of a {@link FastpullError}, stable across releases.
 */
export type ErrorCode = (typeof ErrorCodes)[number];

/**
 * Every failure fastpull reports. `code` says what kind of failure it is; `message` says what was
 * being done and with what; `cause` keeps the underlying error.
 *
 * @example
 * try { await pull('ubuntu:24.04', { root }) }
 * catch (e) { if (isFastpullError(e) && e.code === 'NOT_FOUND') console.error('no such image') }
 */
export class FastpullError extends Error {
  /** What kind of failure this is; match on it, never on `message`. */
  readonly code: ErrorCode;
  /** Extra facts for machines (HTTP status, digest wanted/got, ...). Never holds secrets. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FastpullError';
    this.code = code;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }

  /** The error as JSON for logs and `--json` output: code, message and details (no stack, no cause). */
  toJSON(): { code: ErrorCode; message: string; details: Readonly<Record<string, unknown>> } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

/**
 * True when `e` is a FastpullError (by its name and code, so errors from another copy of this
 * module count too).
 * @example
 * try {
 *   await pull('app:1', { root });
 * } catch (e) {
 *   if (isFastpullError(e) && e.code === 'UNAUTHORIZED') console.error('log in first');
 *   else throw e;
 * }
 */
export function isFastpullError(e: unknown): e is FastpullError {
  return e instanceof FastpullError || (e instanceof Error && e.name === 'FastpullError' && typeof (e as { code?: unknown }).code === 'string');
}

/**
 * Any thrown value as a FastpullError: itself when it is one, else INTERNAL with its message (a bug:
 * every failure fastpull expects has a code of its own). The one way to serialise an error for logs,
 * `--json` and the wire is `asFastpullError(e).toJSON()`.
 * @example
 * catch (e) { console.log(JSON.stringify({ type: 'error', ...asFastpullError(e).toJSON() })) }
 */
export function asFastpullError(e: unknown): FastpullError {
  if (isFastpullError(e)) return e;
  return new FastpullError('INTERNAL', e instanceof Error ? e.message : String(e), { cause: e });
}

/** Turns an abort signal's reason into an ABORTED error, keeping the reason as the cause. */
export function abortError(signal: AbortSignal | undefined, what: string): FastpullError {
  return new FastpullError('ABORTED', `${what}: aborted`, { cause: signal?.reason });
}

/** Throws ABORTED when the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw abortError(signal, what);
}

/** Maps filesystem errors with a well-known meaning onto fastpull codes; others become `fallback`. */
export function fromFsError(e: unknown, what: string, fallback: ErrorCode = 'INTERNAL'): FastpullError {
  if (isFastpullError(e)) return e;
  const errno = (e as NodeJS.ErrnoException | undefined)?.code;
  const code: ErrorCode = errno === 'ENOSPC' || errno === 'EDQUOT' ? 'NO_SPACE' : fallback;
  const reason = e instanceof Error ? e.message : String(e);
  return new FastpullError(code, `${what}: ${reason}`, { cause: e });
}
