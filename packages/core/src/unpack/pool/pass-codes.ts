// What a pass and its caller agree on without loading the unpacker: the error details a failed pass
// carries, and the slots of the state a worker shares with the pool. The main thread imports these;
// the unpacker itself (unpack/layer.ts and what it imports) loads only where a pass runs.

/**
 * Errors of a pass that say all there is: a blob that fails to decompress or extract otherwise may
 * be corrupt, and the caller's truthful error is then the digest mismatch (pull/verify.ts).
 */
export const UNDIAGNOSED_CODES: ReadonlySet<string> = new Set(['ABORTED', 'NO_SPACE', 'UNSUPPORTED_MEDIA_TYPE']);

/**
 * The detail of a failed pass's error that holds the blob's digest (as a string), computed by
 * reading the blob to its end, where the pass was granted to free part of the file and the caller
 * can no longer hash it; absent otherwise (and where the rest could not be read).
 */
export const BLOB_DIGEST_DETAIL = 'blobDigest';

/**
 * Slots of a task's shared state (a BigInt64Array over `state`), which the worker writes and the pool
 * reads without messages: the compressed bytes the pass has read; the milliseconds it spent waiting
 * for the download in waits that ended; when the wait it is in began (Date.now(), 0: not waiting).
 */
export const STATE_CONSUMED = 0;
export const STATE_WAITED_MS = 1;
export const STATE_WAITING_SINCE = 2;
export const STATE_SLOTS = 3;
