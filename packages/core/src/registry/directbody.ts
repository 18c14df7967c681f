// The bodies of the range client's answers, fed by their connection (directconn.ts) as it reads:
// a 200 or 206 with a Content-Length handed to the caller's `take` as views of the read buffer; a
// success without a length (chunks, or up to the close) as a stream; any other answer read whole
// up to a cap, then replayed.
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { BodyDecoder, type Framing } from './http1.js';
import { dumpBody, type DirectBody } from './message.js';

/** A response that is not read straight off the socket is kept up to this many bytes of body. */
const BUFFERED_BODY_CAP = 64 * 1024;

/** What a body needs of its connection. */
export interface BodyConnection {
  /** Closes the connection; the body under way fails with `e` (through its `fail`). */
  destroy(e: Error): void;
  /** The body was read in full: the connection is kept for the next request if `keep`, else closed. */
  finish(keep: boolean): void;
  pause(): void;
  resume(): void;
  /** The body's taker holds a piece: reads stop, and the connection's silence is not the server's. */
  wait(): void;
  unwait(): void;
  /** A piece of this memory is in use by the taker: reads go elsewhere until release. */
  hold(memory: ArrayBufferLike): void;
  release(): void;
}

/** A body its connection feeds: the bytes after the head, as they come, and the connection's failure. */
export interface FedBody {
  onBytes(bytes: Buffer): void;
  fail(e: Error): void;
}

/** A 200's or 206's body with a Content-Length, handed to the caller's `take` as it is read. */
export class DirectBodyImpl implements DirectBody, FedBody {
  private take: ((chunk: Buffer) => Promise<void> | undefined) | undefined;
  /** A take's promise is pending: the connection is paused and what still comes is queued. */
  private waiting = false;
  /** Copies of pieces that came while none could be taken (before consume, or during a wait). */
  private readonly queue: Buffer[] = [];
  /** Body bytes received (taken or queued), and taken. */
  private received = 0;
  private taken = 0;
  private failure: Error | undefined;
  private outcome: { resolve(): void; reject(e: Error): void } | undefined;
  private ended = false;

  constructor(
    private readonly conn: BodyConnection,
    readonly length: number,
    private readonly keep: boolean,
    private readonly onDone: () => void,
  ) {}

  consume(take: (chunk: Buffer) => Promise<void> | undefined): Promise<void> {
    if (this.take !== undefined) return Promise.reject(new Error('the body is being consumed already'));
    this.take = take;
    return new Promise<void>((resolve, reject) => {
      this.outcome = { resolve, reject };
      this.drain();
    });
  }

  /** Bytes of the body as they come (a view of the connection's read buffer, or bytes that came with the head). */
  onBytes(chunk: Buffer): void {
    if (this.failure !== undefined || chunk.length === 0) return;
    const room = this.length - this.received;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.received += part.length;
    if (part.length > 0) {
      if (this.take !== undefined && !this.waiting && this.queue.length === 0) this.give(part);
      else this.queue.push(Buffer.from(part));
    }
    // More than the Content-Length: the connection is out of step; the body itself is whole.
    if (part.length < chunk.length) this.conn.destroy(new Error('the server sent more than the Content-Length'));
    if (this.received === this.length && !this.waiting && this.queue.length === 0) this.end();
  }

  /** Takes queued pieces until one must be waited for; then ends, or reads on. */
  private drain(): void {
    while (this.failure === undefined && !this.waiting && this.queue.length > 0) this.give(this.queue.shift()!);
    if (this.failure !== undefined) {
      if (!this.waiting) this.reject();
      return;
    }
    if (this.waiting) return;
    if (this.taken === this.length) this.end();
    else if (this.take !== undefined) this.conn.resume();
  }

  private give(chunk: Buffer): void {
    this.taken += chunk.length;
    let wait: Promise<void> | undefined;
    try {
      wait = this.take!(chunk);
    } catch (e) {
      this.abandon(e as Error);
      return;
    }
    if (wait === undefined) return;
    // The piece stays in use after this returns: reads go to the other buffer, and stop for now.
    this.waiting = true;
    this.conn.hold(chunk.buffer);
    this.conn.wait();
    wait.then(
      () => {
        this.waiting = false;
        this.conn.release();
        this.conn.unwait();
        this.drain();
      },
      (e: unknown) => {
        this.waiting = false;
        this.conn.release();
        this.conn.unwait();
        this.abandon(e as Error);
      },
    );
  }

  private end(): void {
    if (this.ended || this.outcome === undefined) return;
    this.ended = true;
    const outcome = this.outcome;
    this.outcome = undefined;
    this.onDone();
    this.conn.finish(this.keep);
    outcome.resolve();
  }

  private reject(): void {
    const outcome = this.outcome;
    this.outcome = undefined;
    outcome?.reject(this.failure!);
  }

  /** `take` failed: the body is dropped with its connection, and consume rejects with that. */
  private abandon(e: Error): void {
    this.failure ??= e;
    this.conn.destroy(e);
    if (!this.waiting) this.reject();
  }

  /** The connection failed: a body not received in full fails (once a take under way settled). */
  fail(e: Error): void {
    if (this.received === this.length || this.ended) return;
    this.failure ??= e;
    if (!this.waiting) this.reject();
  }

  destroy(): void {
    if (this.ended) return;
    this.failure ??= new Error('the body was dropped');
    this.conn.destroy(this.failure);
  }

  /** The response's `body` for code that reads any response: empty; dumping or destroying it drops the body. */
  stub(): Readable & { dump(): Promise<void> } {
    const body = new Readable({ read() {} });
    body.push(null);
    return Object.assign(body, {
      destroy: (e?: Error) => {
        this.destroy();
        return Readable.prototype.destroy.call(body, e);
      },
      dump: async () => this.destroy(),
    });
  }
}

/**
 * A success's body without a length (chunks, or up to the close), as a stream: what the connection
 * reads is decoded and pushed, and the connection pauses while the reader lags.
 */
export class StreamBody extends Readable implements FedBody {
  private readonly decoder: BodyDecoder;
  private over = false;

  constructor(
    private readonly conn: BodyConnection,
    private readonly framing: Framing,
    private readonly onDone: () => void,
  ) {
    super();
    this.decoder = new BodyDecoder(framing);
    // Its failure reaches whoever reads it (a stream keeps it), also one that comes before the
    // response is handed over; without a listener it would throw.
    this.on('error', () => {});
  }

  override _read(): void {
    if (!this.over) this.conn.resume();
  }

  onBytes(bytes: Buffer): void {
    if (this.over || bytes.length === 0) return;
    let out: { data: Buffer[]; done: boolean; extra: number };
    try {
      out = this.decoder.push(bytes);
    } catch (e) {
      // A malformed chunk: the body fails with it (through fail()).
      this.conn.destroy(e as Error);
      return;
    }
    let more = true;
    // Copies: the pieces are views of the connection's read buffer, which the next read overwrites.
    for (const d of out.data) more = this.push(Buffer.from(d)) && more;
    if (out.done) {
      this.over = true;
      this.push(null);
      this.onDone();
      // Bytes past the body's end: the connection is out of step, the body itself is whole.
      this.conn.finish(this.framing.reusable && out.extra === 0);
      return;
    }
    if (!more) this.conn.pause();
  }

  /** The connection closed or failed: the end of a body that runs to the close, else its failure. */
  fail(e: Error): void {
    if (this.over) return;
    this.over = true;
    this.onDone();
    if (this.decoder.closeEnds()) this.push(null);
    else this.destroy(e);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.over) {
      this.over = true;
      this.onDone();
      this.conn.destroy(error ?? new Error('the body was dropped'));
    }
    callback(error);
  }

  /** Reads and drops up to `limit` bytes so the connection can be reused, else closes it. */
  dump(options: { limit?: number } = {}): Promise<void> {
    return dumpBody(this, options.limit);
  }
}

/** A body read whole into memory (up to the cap): any answer that is not a success read another way. */
export class BufferedBody implements FedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly decoder: BodyDecoder;
  private ended = false;

  constructor(
    private readonly conn: BodyConnection,
    private readonly framing: Framing,
    private readonly onEnd: (bytes: Buffer, error?: string) => void,
  ) {
    this.decoder = new BodyDecoder(framing);
    if (this.decoder.done) queueMicrotask(() => this.finishWith(undefined, framing.reusable));
  }

  onBytes(bytes: Buffer): void {
    if (this.ended || bytes.length === 0) return;
    let out: { data: Buffer[]; done: boolean; extra: number };
    try {
      out = this.decoder.push(bytes);
    } catch (e) {
      this.finishWith((e as Error).message);
      return;
    }
    for (const d of out.data) this.keepBytes(d);
    // Bytes past the body's end: the connection is out of step, the body itself is whole.
    if (out.extra > 0) this.finishWith(undefined, false);
    else if (out.done) this.finishWith(undefined, this.framing.reusable);
    else if (this.size > BUFFERED_BODY_CAP) this.finishWith(undefined, false);
  }

  private keepBytes(b: Buffer): void {
    if (this.size <= BUFFERED_BODY_CAP) this.chunks.push(Buffer.from(b));
    this.size += b.length;
  }

  /** The body ends here: with `error` (a failure after what was read), or whole; the connection is kept if `keep`. */
  private finishWith(error: string | undefined, keep = false): void {
    if (this.ended) return;
    this.ended = true;
    const bytes = Buffer.concat(this.chunks);
    this.conn.finish(keep && error === undefined);
    this.onEnd(bytes, error);
  }

  fail(e: Error): void {
    // A body that runs to the close ends when the connection does.
    this.finishWith(this.decoder.closeEnds() ? undefined : e.message, false);
  }
}

/** A body read whole, replayed as a stream (that then fails with `error`, if the read did). */
export function replayBody(bytes: Buffer, error: string | undefined): Readable & { dump(): Promise<void> } {
  let sent = false;
  const body = new Readable({
    read() {
      if (!sent) {
        sent = true;
        if (bytes.length > 0) {
          // The error, if any, comes at the next read: after the bytes that came before it.
          this.push(bytes);
          if (error === undefined) this.push(null);
          return;
        }
      }
      // Nothing (more) to give: a body cut before its first byte fails at once, or it would never end.
      if (error !== undefined) this.destroy(new Error(error));
      else this.push(null);
    },
  });
  return Object.assign(body, {
    async dump(): Promise<void> {
      body.resume();
      await finished(body).catch(() => {});
    },
  });
}
