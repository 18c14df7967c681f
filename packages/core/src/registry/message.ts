// What a request through the registry client's connections answers, whichever connection read it.
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';

/** A 206's body read off the socket: handed to `take` in pieces, in order. */
export interface DirectBody {
  /** Bytes the body holds (its Content-Length). */
  readonly length: number;
  /**
   * Hands each piece of the body to `take`, in order, then resolves; rejects with the connection's
   * failure, or what `take` threw or rejected with. A piece is a view of the connection's read
   * buffer: valid until `take` returns, or, when it returns a promise, until that settles (no read
   * happens meanwhile). Call once.
   */
  consume(take: (chunk: Buffer) => Promise<void> | undefined): Promise<void>;
  /** Drops the body and its connection (when it was not read to its end). */
  destroy(): void;
}

/** A response from the range client: `direct` is set for a 206 whose body is to be consumed through it. */
export type DirectResponse = Dispatcher.ResponseData & { readonly direct?: DirectBody };

/** How much of an unwanted body is read by default so that its connection can be reused. */
const DUMP_LIMIT = 128 * 1024;

/** Reads and drops up to `limit` bytes of `body` so its connection can be reused, else destroys it. */
export async function dumpBody(body: Readable, limit = DUMP_LIMIT): Promise<void> {
  let read = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      read += chunk.length;
      if (read > limit) {
        body.destroy();
        return;
      }
    }
  } catch {
    // The connection is being dropped anyway.
  }
}
