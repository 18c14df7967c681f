// What a blob download reports of each HTTP request it makes, for traces: which bytes, why, how it ended, when.

/**
 * One HTTP request of a blob download, as `FetchOptions.onRange` (fetch-context.ts) reports it. A chunk of the
 * blob is asked for once, then again for its remainder after an error (`retry`) or after it
 * straggled (`reissue`); the bytes of all requests of a download, `[offset, offset + bytes)`, cover
 * the blob once (a server that ignores Range makes the exception: a retry of its whole-blob answer
 * starts again at 0). Times are `performance.now()` of the calling thread.
 */
export interface RangeRequest {
  /** The chunk this request is for, by position in the download (0 the first). */
  readonly chunk: number;
  /** The chunk's requests before this one (0: its first). */
  readonly attempt: number;
  /** Why it was sent: the chunk's first request, a retry after an error, a re-issue of a straggler. */
  readonly reason: 'first' | 'retry' | 'reissue';
  /** How it ended: every byte asked for landed, it failed, it was cancelled as a straggler, or the download stopped. */
  readonly outcome: 'done' | 'error' | 'straggler' | 'aborted';
  /** First byte asked for (0 for a request of the whole blob, without a Range header). */
  readonly start: number;
  /** End of the bytes asked for, exclusive. */
  readonly end: number;
  /** Where this request's bytes landed from (0 when the server answered with the whole blob). */
  readonly offset: number;
  /** Body bytes it wrote. */
  readonly bytes: number;
  /** HTTP status of the answer (absent: no answer came). */
  readonly status?: number;
  /** The error's code when it failed (`NETWORK_ERROR`...). */
  readonly code?: string;
  /** When the chunk asked the scheduler for a connection (its first request waits for one). */
  readonly queuedAt: number;
  /** When the request was sent. */
  readonly sentAt: number;
  /** When it ended. */
  readonly endedAt: number;
  /**
   * Milliseconds it spent yielding to the download's earliest range, being far ahead of it (see
   * `FetchOptions.orderLead`); absent when it never did.
   */
  readonly yieldedMs?: number;
}
