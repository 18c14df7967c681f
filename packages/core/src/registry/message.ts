// What a request through the registry client answers, whichever connection read it (node:http's, the
// range client's, or a caller's dispatcher): the project's own response type.
import type { Readable } from 'node:stream';
import type { HeaderFields } from './http1.js';

export type { HeaderFields } from './http1.js';

/** The methods the registry client sends. */
export type HttpMethod = 'GET' | 'HEAD' | 'POST';

/** A response's body: a stream to read, destroy, or dump. */
export interface ResponseBody extends Readable {
  /** Reads and drops up to `limit` bytes so the connection can be reused, else closes it. */
  dump(options?: { limit?: number }): Promise<void>;
}

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

/** A registry's answer, once its head came. Its body must be consumed, destroyed or dumped. */
export interface RegistryResponse {
  /** The HTTP status. */
  readonly statusCode: number;
  /** Lower-case names; a repeated header as a list of its values. */
  readonly headers: HeaderFields;
  /** The body; empty when it comes through `direct`. */
  readonly body: ResponseBody;
  /** A 200's or 206's body with a Content-Length, read off the socket by the range client: consume it through this. */
  readonly direct?: DirectBody;
}

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
