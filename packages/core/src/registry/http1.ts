// The range client's HTTP/1.1 response parsing, pure: bytes in, a head, a framing and body bytes
// out, no sockets and no timers (the connection, directconn.ts, feeds it what it reads). Strict where
// a lenient reading could put a kept-alive connection out of step with its server: a malformed
// status line, header line or Content-Length is refused, not guessed at. Where this differs from
// Node's own parser (llhttp), on purpose, directhttp-differential.test.ts writes the rule down.

/** A response head larger than this is refused (node's default limit for headers is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024;
/** A chunk size line (with its extensions) or a trailer line longer than this is refused. */
const MAX_CHUNK_LINE = 4096;

/** Header names in lower case; a repeated header as a list of its values, in order. */
export type HeaderFields = Record<string, string | string[]>;

/** A response's status line and header fields. */
export interface Head {
  readonly status: number;
  readonly headers: HeaderFields;
  /** Whether the connection may carry another request after this answer (its version and Connection field). */
  readonly keepAlive: boolean;
}

/**
 * How a response's body is delimited (RFC 9112, 6.3): none (204, 304, a HEAD's answer); a
 * Content-Length; chunks; or up to the connection's close. `reusable`: whether the connection may
 * carry another request after the body.
 */
export type Framing =
  | { readonly kind: 'empty'; readonly reusable: boolean }
  | { readonly kind: 'length'; readonly length: number; readonly reusable: boolean }
  | { readonly kind: 'chunked'; readonly reusable: boolean }
  | { readonly kind: 'close'; readonly reusable: false };

/** Parses a response head (status line and header lines, without the blank line). */
export function parseHead(text: string): Head {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
  if (!m) throw new Error(`not an HTTP/1.x status line: ${JSON.stringify((lines[0] ?? '').slice(0, 100))}`);
  const headers: HeaderFields = {};
  for (const line of lines.slice(1)) {
    // A line that starts with white space continues the one before (obs-fold), which RFC 9112
    // (5.2) lets a client refuse; a bare LF inside a line is no line break here, and no field holds one.
    const colon = line.indexOf(':');
    if (colon <= 0 || /^\s/.test(line) || /[\r\n\0]/.test(line)) throw new Error(`a malformed header line: ${JSON.stringify(line.slice(0, 100))}`);
    // No white space between the name and its colon (RFC 9112, 5.1).
    const name = line.slice(0, colon).toLowerCase();
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) throw new Error(`a malformed header name: ${JSON.stringify(name.slice(0, 100))}`);
    const value = line.slice(colon + 1).trim();
    const had = headers[name];
    headers[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  const connection = String(headers.connection ?? '').toLowerCase();
  const keepAlive = m[1] === '1' ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
  return { status: Number(m[2]), headers, keepAlive };
}

/**
 * The Content-Length: undefined when absent, null when malformed or repeated. A list of copies
 * that agree, which RFC 9110 (8.6) lets a recipient take, is refused as Node's parser refuses it:
 * one reading of an answer's length for every connection of the client.
 */
export function contentLength(headers: HeaderFields): number | undefined | null {
  const raw = headers['content-length'];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw) || !/^\d{1,15}$/.test(raw)) return null;
  return Number(raw);
}

/**
 * How the body of `head` is delimited (RFC 9112, 6.3), for a request of `method`. Throws on a
 * Content-Length that is malformed or contradicts itself.
 */
export function framingOf(head: Head, method = 'GET'): Framing {
  const { status, headers, keepAlive } = head;
  // A malformed or repeated Content-Length is refused whatever else frames the answer.
  const length = contentLength(headers);
  if (length === null) throw new Error('the response has an invalid Content-Length');
  // 204, 304 and a HEAD's answer end at their head whatever their fields say.
  if (status === 204 || status === 304 || method === 'HEAD') return { kind: 'empty', reusable: keepAlive };
  const te = headers['transfer-encoding'];
  if (te !== undefined) {
    // Transfer-Encoding overrides Content-Length; a response framed both ways may be smuggling
    // another answer after it, so its connection is never used again.
    const reusable = keepAlive && length === undefined;
    // Chunked must be the last coding; without it the body runs to the close.
    if (/(^|,)\s*chunked\s*$/i.test(String(te))) return { kind: 'chunked', reusable };
    return { kind: 'close', reusable: false };
  }
  if (length === undefined) return { kind: 'close', reusable: false };
  return { kind: 'length', length, reusable: keepAlive };
}

/**
 * Gathers the bytes of a response head, skipping 1xx answers (100 Continue, 103 Early Hints) that
 * come before the final one. Throws on a malformed head or one over {@link MAX_HEAD_BYTES}.
 */
export class HeadReader {
  private pending = Buffer.alloc(0);

  /** Bytes as they come: the final head and the bytes after it once it is whole, else undefined. */
  push(bytes: Buffer): { head: Head; rest: Buffer } | undefined {
    this.pending = this.pending.length === 0 ? Buffer.from(bytes) : Buffer.concat([this.pending, bytes]);
    for (;;) {
      const end = this.pending.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.pending.length > MAX_HEAD_BYTES) throw new Error(`response head larger than ${MAX_HEAD_BYTES} bytes`);
        return undefined;
      }
      if (end > MAX_HEAD_BYTES) throw new Error(`response head larger than ${MAX_HEAD_BYTES} bytes`);
      const head = parseHead(this.pending.subarray(0, end).toString('latin1'));
      const rest = this.pending.subarray(end + 4);
      if (head.status >= 100 && head.status < 200) {
        this.pending = Buffer.from(rest);
        continue;
      }
      this.pending = Buffer.alloc(0);
      return { head, rest };
    }
  }
}

/** Decodes Transfer-Encoding: chunked. Throws on a malformed chunk. */
export class ChunkedDecoder {
  private pending = Buffer.alloc(0);
  /** Bytes left in the current chunk's data (then its CRLF); -1: a size line is due. */
  private left = -1;
  private trailers = false;
  private finished = false;

  /** Whether the last chunk and the trailer section came. */
  get done(): boolean {
    return this.finished;
  }

  /**
   * The body's bytes in `bytes` (views of it, or of what was kept from before), and whether the
   * body ended; what comes after its end is left out: `extra` counts it.
   */
  push(bytes: Buffer): { data: Buffer[]; done: boolean; extra: number } {
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, bytes]) : bytes;
    const data: Buffer[] = [];
    while (!this.finished) {
      // Each step takes what it can from the front of `buf`, or null: it needs more bytes.
      const next = this.trailers ? this.trailer(buf) : this.left < 0 ? this.sizeLine(buf) : this.left > 0 ? this.chunkData(buf, data) : this.dataEnd(buf);
      if (next === null) break;
      buf = next;
    }
    if (this.finished) {
      this.pending = Buffer.alloc(0);
      return { data, done: true, extra: buf.length };
    }
    this.pending = Buffer.from(buf);
    return { data, done: false, extra: 0 };
  }

  /** One line of `buf` (without its CRLF) and what follows it, or null while it is not whole. */
  private line(buf: Buffer): { line: Buffer; rest: Buffer } | null {
    const eol = buf.indexOf('\r\n');
    if (eol < 0) {
      if (buf.length > MAX_CHUNK_LINE) throw new Error('a chunk size or trailer line too long');
      return null;
    }
    if (eol > MAX_CHUNK_LINE) throw new Error('a chunk size or trailer line too long');
    return { line: buf.subarray(0, eol), rest: buf.subarray(eol + 2) };
  }

  private trailer(buf: Buffer): Buffer | null {
    const l = this.line(buf);
    if (l === null) return null;
    if (l.line.length === 0) this.finished = true;
    return l.rest;
  }

  private sizeLine(buf: Buffer): Buffer | null {
    const l = this.line(buf);
    if (l === null) return null;
    // Hex digits, then extensions (ignored) after a semicolon.
    const m = /^([0-9a-fA-F]{1,12})(;.*)?$/.exec(l.line.toString('latin1'));
    if (!m) throw new Error('a malformed chunk size');
    const size = parseInt(m[1]!, 16);
    if (size === 0) this.trailers = true;
    else this.left = size;
    return l.rest;
  }

  private chunkData(buf: Buffer, data: Buffer[]): Buffer | null {
    if (buf.length === 0) return null;
    const take = buf.subarray(0, this.left);
    data.push(take);
    this.left -= take.length;
    return buf.subarray(take.length);
  }

  /** The CRLF after a chunk's data. */
  private dataEnd(buf: Buffer): Buffer | null {
    if (buf.length < 2) return null;
    if (buf[0] !== 13 || buf[1] !== 10) throw new Error('a chunk without its CRLF');
    this.left = -1;
    return buf.subarray(2);
  }
}

/**
 * A body's bytes by its framing (not 'empty'): `push` gives back the body's part of what came and
 * whether the body ended; `end` says whether the connection's close ends it properly (only a body
 * that runs to the close) or cuts it.
 */
export class BodyDecoder {
  private readonly chunks: ChunkedDecoder | undefined;
  private remaining: number | undefined;
  private ended = false;

  constructor(framing: Framing) {
    this.chunks = framing.kind === 'chunked' ? new ChunkedDecoder() : undefined;
    this.remaining = framing.kind === 'length' ? framing.length : framing.kind === 'empty' ? 0 : undefined;
    if (this.remaining === 0) this.ended = true;
  }

  /** Whether the body is whole. */
  get done(): boolean {
    return this.ended;
  }

  /** The body's part of `bytes`, whether it ended, and how many bytes came after its end. Throws on a malformed chunk. */
  push(bytes: Buffer): { data: Buffer[]; done: boolean; extra: number } {
    if (this.ended) return { data: [], done: true, extra: bytes.length };
    if (this.chunks) {
      const out = this.chunks.push(bytes);
      this.ended = out.done;
      return out;
    }
    if (this.remaining === undefined) return { data: bytes.length > 0 ? [bytes] : [], done: false, extra: 0 };
    const take = bytes.subarray(0, this.remaining);
    this.remaining -= take.length;
    this.ended = this.remaining === 0;
    return { data: take.length > 0 ? [take] : [], done: this.ended, extra: bytes.length - take.length };
  }

  /** The connection closed: true when that ends the body whole (it had ended, or runs to the close). */
  closeEnds(): boolean {
    return this.ended || (this.chunks === undefined && this.remaining === undefined);
  }
}
