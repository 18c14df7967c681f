// Range bodies read straight off the socket. A blob's ranges are most of the bytes a pull moves
// through its process, and node:http hands each socket read to its parser, which copies the body
// piece into a fresh Buffer and pushes it through a stream (IncomingMessage): a 64 KiB allocation,
// a young-generation object and several calls per read, then garbage for the collector. Here a
// range GET goes out on a connection of our own whose reads land in one buffer per connection
// (net's `onread`, which TLS sockets honour too), and a 206's body is handed to the caller as views
// of that buffer, which it writes at their offsets before the next read: a fraction of node:http's
// CPU per byte (docs/architecture.md, "3. Fetch" and "Figures behind the defaults").
//
// Only what a range GET needs: HTTP/1.1, one request at a time per connection, kept alive, a 206
// with a Content-Length as the body read this way. Any other answer (a challenge, a redirect, an
// error, a chunked body) is read whole up to a cap and handed over as an ordinary response, as
// node:http would. The request logic (endpoints, tokens, redirects, retries) is the transport's.
//
// Through a proxy (the pool's ProxyRules): HTTPS ranges on TLS inside a CONNECT tunnel (tunnel.ts),
// plain HTTP ranges sent to the proxy in absolute form with its Proxy-Authorization. A connection
// without a proxy is made and read exactly as before.
import { Socket, connect as netConnect } from 'node:net';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { Dispatcher } from 'undici';
import type { NodeHttpPoolOptions } from './nodehttp.js';
import { tlsOptions } from './tlsoptions.js';
import type { Proxy } from './proxy.js';
import { openTunnel } from './tunnel.js';

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

/** A response from {@link DirectConnections}: `direct` is set for a 206 whose body is to be consumed through it. */
export type DirectResponse = Dispatcher.ResponseData & { readonly direct?: DirectBody };

/** Bytes each connection reads into at most (TLS hands over one record, 16 KiB, at a time). */
const READ_BUFFER_BYTES = 128 * 1024;
/** A response head larger than this is refused (node's default limit for headers is 16 KiB). */
const MAX_HEAD_BYTES = 64 * 1024;
/** A response that is not read straight off the socket is kept up to this many bytes of body. */
const BUFFERED_BODY_CAP = 64 * 1024;

/**
 * Connections of one pool's options (its TLS settings and timeouts) for range GETs, kept alive per
 * origin. The caller bounds how many requests run at once (the fetch scheduler).
 */
export class DirectConnections {
  private readonly idle = new Map<string, Connection[]>();
  private readonly all = new Set<Connection>();
  /** Connections per origin (dialling, busy or idle): at most the pool's `connections`. */
  private readonly live = new Map<string, number>();
  /** Requests waiting for a connection of their origin, first come first served. */
  private readonly waiting = new Map<string, Waiter[]>();
  private closed = false;

  constructor(private readonly options: NodeHttpPoolOptions) {}

  /**
   * Sends a GET and resolves once its answer's head came: a 200 or 206 with a Content-Length has
   * its body in `direct`; another success (a body without a length) is asked for again through
   * `fallback`; any other answer's body (up to 64 KiB) is the response's `body`. Rejects on a
   * transport failure before the head (a connection that was kept alive and turns out closed is
   * replaced once), or when `signal` aborts. At most `connections` connections per origin: a
   * request beyond waits for one of them.
   */
  async request(url: URL, headers: Record<string, string>, signal: AbortSignal | null, fallback: () => Promise<Dispatcher.ResponseData>): Promise<DirectResponse> {
    if (this.closed) throw new Error('the connection pool is closed');
    if (signal?.aborted) throw abortError(signal);
    const key = `${url.protocol}//${url.host}`;
    const proxy = this.options.proxy?.forUrl(url);
    try {
      return await (await this.acquire(url, key, signal, proxy)).send(url, headers, signal, fallback);
    } catch (e) {
      // A kept-alive connection the server closed meanwhile fails before any byte of an answer:
      // the request goes out once more (on a new connection, unless another idle one is there).
      if (!(e instanceof StaleConnection)) throw e;
      if (signal?.aborted) throw e.cause;
    }
    return (await this.acquire(url, key, signal, proxy)).send(url, headers, signal, fallback);
  }

  /** Closes every connection; later requests fail. */
  close(): void {
    this.closed = true;
    for (const c of this.all) c.destroy(new Error('the connection pool is closed'));
    this.idle.clear();
    for (const list of this.waiting.values()) for (const w of list.splice(0)) w.give(new Error('the connection pool is closed'));
  }

  /** An idle connection of the origin, a new one while fewer than `connections` live, or the next one to come free. */
  private acquire(url: URL, key: string, signal: AbortSignal | null, proxy: Proxy | undefined): Promise<Connection> {
    const idle = this.takeIdle(key);
    if (idle) return Promise.resolve(idle);
    if ((this.live.get(key) ?? 0) < this.options.connections) return this.open(url, key, signal, proxy);
    return new Promise<Connection>((resolve, reject) => {
      const list = this.waiting.get(key) ?? [];
      this.waiting.set(key, list);
      const onAbort = (): void => {
        const i = list.indexOf(waiter);
        if (i >= 0) list.splice(i, 1);
        reject(abortError(signal));
      };
      const waiter: Waiter = {
        give: (c) => {
          signal?.removeEventListener('abort', onAbort);
          if (c instanceof Error) reject(c);
          else if (c) resolve(c);
          else this.open(url, key, signal, proxy).then(resolve, reject);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      list.push(waiter);
    });
  }

  private takeIdle(key: string): Connection | undefined {
    const list = this.idle.get(key);
    while (list && list.length > 0) {
      const c = list.pop()!;
      if (c.usable) return c;
    }
    return undefined;
  }

  /** A new connection: dialled at once, or (HTTPS through a proxy) once its tunnel is open. */
  private open(url: URL, key: string, signal: AbortSignal | null, proxy: Proxy | undefined): Promise<Connection> {
    if (proxy === undefined || url.protocol !== 'https:') return Promise.resolve(this.dial(url, key, proxy && { proxy }));
    this.live.set(key, (this.live.get(key) ?? 0) + 1);
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    return openTunnel(proxy, host, Number(url.port || 443), { dialTimeoutMs: this.options.dialTimeoutMs, signal }).then(
      (tunnel) => {
        this.live.set(key, this.live.get(key)! - 1);
        if (!this.closed) return this.dial(url, key, { proxy, tunnel });
        tunnel.destroy();
        throw new Error('the connection pool is closed');
      },
      (e: unknown) => {
        // Its place goes to a request waiting for one, as when a connection closes.
        this.live.set(key, this.live.get(key)! - 1);
        if (!this.closed) this.waiting.get(key)?.shift()?.give(undefined);
        throw e;
      },
    );
  }

  private dial(url: URL, key: string, via: Via | undefined): Connection {
    this.live.set(key, (this.live.get(key) ?? 0) + 1);
    let conn: Connection;
    try {
      conn = this.connect(url, key, via);
    } catch (e) {
      this.live.set(key, this.live.get(key)! - 1);
      throw e;
    }
    this.all.add(conn);
    return conn;
  }

  private connect(url: URL, key: string, via: Via | undefined): Connection {
    return new Connection(url, this.options, via, {
      idle: (c) => {
        if (this.closed) {
          c.destroy(new Error('the connection pool is closed'));
          return;
        }
        // A request waiting for a connection of this origin takes it at once.
        const waiter = this.waiting.get(key)?.shift();
        if (waiter) {
          waiter.give(c);
          return;
        }
        const list = this.idle.get(key) ?? [];
        list.push(c);
        this.idle.set(key, list);
      },
      gone: (c) => {
        this.all.delete(c);
        this.live.set(key, (this.live.get(key) ?? 1) - 1);
        const list = this.idle.get(key);
        const i = list?.indexOf(c) ?? -1;
        if (i >= 0) list!.splice(i, 1);
        // Its place goes to a request waiting for one: it dials anew.
        if (!this.closed) this.waiting.get(key)?.shift()?.give(undefined);
      },
    });
  }
}

/** How a connection reaches its registry through a proxy: a CONNECT tunnel for HTTPS, the proxy itself for plain HTTP. */
interface Via {
  readonly proxy: Proxy;
  readonly tunnel?: Socket;
}

/** A request waiting for a connection: given one that came free, leave to dial (undefined), or an error. */
interface Waiter {
  give(c: Connection | undefined | Error): void;
}

/** A failure of a kept-alive connection before any byte of the answer came: worth one more try. */
class StaleConnection extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

interface ConnectionHooks {
  /** The connection finished a response and can take another request. */
  idle(c: Connection): void;
  /** The connection is closed. */
  gone(c: Connection): void;
}

/** What the connection does with the bytes it reads. */
type Phase = 'idle' | 'head' | 'direct' | 'buffered' | 'closed';

/** One HTTP/1.1 connection, one request at a time. */
class Connection {
  private readonly socket: Socket | TLSSocket;
  /** Where reads land: `a`, or `b` while a piece of `a` is held by the caller (a write in flight). */
  private readonly a = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  private b: Buffer | undefined;
  /** The memory of the read buffer a piece held by the caller lies in. */
  private held: ArrayBufferLike | undefined;
  private phase: Phase = 'idle';
  /** Requests sent on it so far. */
  private sent = 0;
  /** Whether the connection was ever connected (a dial timeout stops once it is). */
  private connected = false;
  private dialTimer: NodeJS.Timeout | undefined;
  /** The request under way: how its head and body are read. */
  private current: Exchange | undefined;
  /** Plain HTTP through a proxy: requests name their absolute URL and carry the proxy's credentials. */
  private readonly proxied: Proxy | undefined;
  /** The body's taker holds a piece (see wait()): the socket's silence is ours. */
  private takerHolds = false;
  private timeoutWhileHeld = false;

  constructor(
    url: URL,
    private readonly options: NodeHttpPoolOptions,
    via: Via | undefined,
    private readonly hooks: ConnectionHooks,
  ) {
    const tls = url.protocol === 'https:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = Number(url.port || (tls ? 443 : 80));
    const onread = {
      buffer: () => this.nextBuffer(),
      callback: (n: number, buf: Uint8Array): boolean => {
        this.onRead(n, buf as Buffer);
        return true;
      },
    };
    this.proxied = !tls ? via?.proxy : undefined;
    this.socket = tls
      ? tlsConnect({
          // TLS sockets honour net's `onread` too (node's types leave it out of TLS options).
          ...({ onread } as object),
          // Through a proxy: TLS inside the tunnel, with the registry's name all the same.
          ...(via?.tunnel ? { socket: via.tunnel, host } : { host, port }),
          ...(isIp(host) ? {} : { servername: host }),
          ALPNProtocols: ['http/1.1'],
          ...tlsOptions(options),
        })
      : this.proxied
        ? netConnect({ host: this.proxied.hostname, port: this.proxied.port, onread })
        : netConnect({ host, port, onread });
    // TLS started on a tunnel's socket leaves `onread` aside (node passes it on only to sockets it
    // connects itself): its reads come as 'data' chunks, each taken as one read.
    if (via?.tunnel) this.socket.on('data', (chunk: Buffer) => this.onRead(chunk.length, chunk));
    this.socket.setNoDelay(true);
    this.dialTimer = setTimeout(() => this.destroy(new Error(`connect timeout: no connection to ${url.host} within ${options.dialTimeoutMs} ms`)), options.dialTimeoutMs);
    this.dialTimer.unref();
    this.socket.once(tls ? 'secureConnect' : 'connect', () => {
      this.connected = true;
      if (this.dialTimer) clearTimeout(this.dialTimer);
      this.dialTimer = undefined;
    });
    this.socket.on('timeout', () => {
      if (this.takerHolds) {
        this.timeoutWhileHeld = true;
        return;
      }
      // Idle in the pool: closed quietly; during a request: no byte for the idle timeout.
      if (this.phase === 'idle') this.destroy(new Error('kept alive too long'));
      else this.destroy(new Error(`timeout: no data from ${url.host} for ${options.idleTimeoutMs} ms`));
    });
    this.socket.on('error', (e) => this.destroy(e));
    this.socket.on('end', () => this.destroy(new Error('the server closed the connection')));
    this.socket.on('close', () => this.destroy(new Error('the connection closed')));
  }

  /** Whether it can take a request now. */
  get usable(): boolean {
    return this.phase === 'idle' && !this.socket.destroyed;
  }

  /** Sends a GET; resolves with its answer once the head came. */
  send(url: URL, headers: Record<string, string>, signal: AbortSignal | null, fallback: () => Promise<Dispatcher.ResponseData>): Promise<DirectResponse> {
    const fresh = this.sent === 0;
    this.sent++;
    this.phase = 'head';
    this.socket.ref();
    this.socket.setTimeout(this.options.idleTimeoutMs);
    return new Promise<DirectResponse>((resolve, reject) => {
      const exchange = new Exchange(this, fresh, resolve, reject, fallback);
      this.current = exchange;
      if (signal) {
        const onAbort = (): void => this.destroy(abortError(signal));
        signal.addEventListener('abort', onAbort, { once: true });
        exchange.unlisten = () => signal.removeEventListener('abort', onAbort);
      }
      const proxy = this.proxied;
      let head = proxy
        ? `GET ${url.protocol}//${url.host}${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n${proxy.authorization ? `proxy-authorization: ${proxy.authorization}\r\n` : ''}`
        : `GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`;
      for (const [name, value] of Object.entries(headers)) {
        if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) {
          this.destroy(new Error(`header ${JSON.stringify(name)} holds a line break`));
          return;
        }
        if (name.toLowerCase() !== 'host') head += `${name}: ${value}\r\n`;
      }
      this.socket.write(`${head}\r\n`);
      this.socket.resume();
    });
  }

  /** Closes the connection; the request under way fails with `e`. */
  destroy(e: Error): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    if (this.dialTimer) clearTimeout(this.dialTimer);
    this.socket.destroy();
    const x = this.current;
    this.current = undefined;
    x?.fail(e, this.connected);
    this.hooks.gone(this);
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    if (this.phase !== 'closed') this.socket.resume();
  }

  /**
   * Stops reading while the body's taker holds a piece (a write, a rate limit): the silence is ours,
   * not the server's, so the idle timeout waits until {@link unwait}.
   */
  wait(): void {
    this.socket.pause();
    this.takerHolds = true;
  }

  unwait(): void {
    this.takerHolds = false;
    // A timeout let pass while held is armed again: the server's silence counts from now.
    if (this.timeoutWhileHeld && this.phase !== 'closed') this.socket.setTimeout(this.options.idleTimeoutMs);
    this.timeoutWhileHeld = false;
  }

  /** The request under way ended with its body read in full: the connection is kept when it may be. */
  finish(keep: boolean): void {
    this.current = undefined;
    if (this.phase === 'closed') return;
    if (!keep) {
      this.destroy(new Error('not kept alive'));
      return;
    }
    this.phase = 'idle';
    // Kept for the next request, without keeping the process alive (as node's agents do), and read
    // from meanwhile (a body's last take may have paused it): a close or stray bytes from the
    // server drop it now rather than fail the next request.
    this.socket.unref();
    this.socket.setTimeout(this.options.keepAliveTimeoutMs);
    this.socket.resume();
    this.hooks.idle(this);
  }

  setPhase(phase: 'direct' | 'buffered'): void {
    this.phase = phase;
  }

  /**
   * Keeps the reads off `buf` until {@link release}: a piece of it is being written by the caller
   * after the read that brought it returned.
   */
  hold(memory: ArrayBufferLike): void {
    this.held = memory;
  }

  release(): void {
    this.held = undefined;
  }

  /** The buffer the next read lands in (node asks after each read). */
  private nextBuffer(): Buffer {
    if (this.held !== this.a.buffer) return this.a;
    this.b ??= Buffer.allocUnsafe(READ_BUFFER_BYTES);
    return this.b;
  }

  private onRead(n: number, buf: Buffer): void {
    const x = this.current;
    if (x === undefined || this.phase === 'idle') {
      // Bytes nobody asked for: the connection is out of step with its server.
      this.destroy(new Error('the server sent bytes outside of a response'));
      return;
    }
    x.onBytes(buf, n);
  }
}

/** One request's answer, read as its bytes come. */
class Exchange {
  unlisten: (() => void) | undefined;
  private head = Buffer.alloc(0);
  private settled = false;
  /** Whether any byte of the answer came. */
  private answered = false;
  /** The answer's body as it is read: direct (handed to take) or buffered. */
  private body: DirectBodyImpl | BufferedBody | undefined;

  constructor(
    private readonly conn: Connection,
    private readonly fresh: boolean,
    private readonly resolve: (res: DirectResponse | Promise<DirectResponse>) => void,
    private readonly reject: (e: Error) => void,
    private readonly fallback: () => Promise<Dispatcher.ResponseData>,
  ) {}

  onBytes(buffer: Buffer, n: number): void {
    this.answered = true;
    if (this.body) {
      this.body.onBytes(buffer.subarray(0, n));
      return;
    }
    this.head = this.head.length === 0 ? Buffer.from(buffer.subarray(0, n)) : Buffer.concat([this.head, buffer.subarray(0, n)]);
    for (;;) {
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.head.length > MAX_HEAD_BYTES) this.conn.destroy(new Error(`response head larger than ${MAX_HEAD_BYTES} bytes`));
        return;
      }
      let parsed: Head;
      try {
        parsed = parseHead(this.head.subarray(0, end).toString('latin1'));
      } catch (e) {
        this.conn.destroy(e as Error);
        return;
      }
      const rest = this.head.subarray(end + 4);
      // 1xx answers (100 Continue, 103 Early Hints) come before the real one.
      if (parsed.status >= 100 && parsed.status < 200) {
        this.head = Buffer.from(rest);
        continue;
      }
      this.head = Buffer.alloc(0);
      this.onHead(parsed, rest);
      return;
    }
  }

  private onHead(head: Head, rest: Buffer): void {
    const { status, headers } = head;
    // 204 and 304 end at their head whatever their fields say (RFC 9112, 6.3).
    const headOnly = status === 204 || status === 304;
    // Transfer-Encoding overrides Content-Length (RFC 9112, 6.3): a response framed both ways is read
    // per its Transfer-Encoding, and as it may be smuggling another answer after it, its connection
    // is closed afterwards, never used again.
    const encoded = !headOnly && headers['transfer-encoding'] !== undefined;
    const doublyFramed = encoded && headers['content-length'] !== undefined;
    const length = headOnly ? 0 : encoded ? undefined : contentLength(headers);
    const chunked = encoded && /(^|,)\s*chunked\s*$/i.test(String(headers['transfer-encoding']));
    const keep = head.keepAlive && !doublyFramed && (chunked || length !== undefined);
    if (length === null) {
      this.conn.destroy(new Error('the response has an invalid Content-Length'));
      return;
    }
    if ((status === 200 || status === 206) && length !== undefined && !chunked) {
      const body = new DirectBodyImpl(this.conn, length, keep, () => this.done());
      this.body = body;
      this.conn.setPhase('direct');
      // The caller takes the body later: until then nothing is read, and what came with the head is kept.
      this.conn.pause();
      body.onBytes(rest);
      this.settle();
      this.resolve(response(status, headers, body.stub(), body));
      return;
    }
    const noBody = headOnly || length === 0;
    if (status >= 200 && status < 300 && !noBody) {
      // A body without a length (chunked, or up to the close): read in full through node:http.
      this.settle();
      this.unlisten?.();
      this.conn.destroy(new Error('asked for again through node:http'));
      this.resolve(this.fallback());
      return;
    }
    const buffered = new BufferedBody(this.conn, noBody ? 0 : length, chunked, keep, (bytes, error) => {
      this.done();
      this.settle();
      this.resolve(response(status, headers, replayBody(bytes, error)));
    });
    this.body = buffered;
    this.conn.setPhase('buffered');
    buffered.onBytes(rest);
  }

  /** The connection failed: before the answer, the request fails; after it, its body does. */
  fail(e: Error, connected: boolean): void {
    this.unlisten?.();
    if (this.body) {
      this.body.fail(e);
      return;
    }
    if (this.settled) return;
    this.settled = true;
    // A reused connection that fails with nothing answered: its server closed it while it sat idle.
    this.reject(!this.fresh && connected && !this.answered && e.name !== 'AbortError' ? new StaleConnection(e) : e);
  }

  private done(): void {
    this.unlisten?.();
  }

  private settle(): void {
    this.settled = true;
  }
}

/** A 206's body, handed to the caller's `take` as it is read. */
class DirectBodyImpl implements DirectBody {
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
    private readonly conn: Connection,
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
  stub(): Readable {
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

/** A body read whole into memory (up to the cap): any answer that is not a 206 with a length. */
class BufferedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Body bytes still due (Content-Length); undefined: chunked or until the connection closes. */
  private remaining: number | undefined;
  private readonly chunkDecoder: ChunkedDecoder | undefined;
  private ended = false;

  constructor(
    private readonly conn: Connection,
    length: number | undefined,
    chunked: boolean,
    private readonly keep: boolean,
    private readonly onEnd: (bytes: Buffer, error?: string) => void,
  ) {
    this.remaining = chunked ? undefined : length;
    this.chunkDecoder = chunked ? new ChunkedDecoder() : undefined;
    if (this.remaining === 0) queueMicrotask(() => this.end());
  }

  onBytes(bytes: Buffer): void {
    if (this.ended || bytes.length === 0) return;
    if (this.chunkDecoder) {
      let out: { data: Buffer[]; done: boolean };
      try {
        out = this.chunkDecoder.push(bytes);
      } catch (e) {
        this.finishWith((e as Error).message);
        return;
      }
      for (const d of out.data) this.keepBytes(d);
      if (out.done) this.end();
      else if (this.size > BUFFERED_BODY_CAP) this.finishWith(undefined, false);
      return;
    }
    const take = this.remaining === undefined ? bytes : bytes.subarray(0, this.remaining);
    this.keepBytes(take);
    if (this.remaining !== undefined) {
      this.remaining -= take.length;
      if (take.length < bytes.length) {
        this.finishWith(undefined, false);
        return;
      }
      if (this.remaining === 0) {
        this.end();
        return;
      }
    }
    if (this.size > BUFFERED_BODY_CAP) this.finishWith(undefined, false);
  }

  private keepBytes(b: Buffer): void {
    if (this.size <= BUFFERED_BODY_CAP) this.chunks.push(Buffer.from(b));
    this.size += b.length;
  }

  private end(): void {
    this.finishWith(undefined, this.keep);
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
    // A body without a length ends when the connection does.
    if (this.remaining === undefined && this.chunkDecoder === undefined) {
      this.finishWith(undefined, false);
      return;
    }
    this.finishWith(e.message, false);
  }
}

/** Decodes Transfer-Encoding: chunked. */
class ChunkedDecoder {
  private pending = Buffer.alloc(0);
  /** Bytes left in the current chunk's data (then its CRLF); -1: a size line is due. */
  private left = -1;
  private trailers = false;

  push(bytes: Buffer): { data: Buffer[]; done: boolean } {
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, bytes]) : bytes;
    const data: Buffer[] = [];
    for (;;) {
      if (this.trailers) {
        // Trailer lines until an empty one.
        const eol = buf.indexOf('\r\n');
        if (eol < 0) break;
        const line = buf.subarray(0, eol);
        buf = buf.subarray(eol + 2);
        if (line.length === 0) return { data, done: true };
        continue;
      }
      if (this.left < 0) {
        const eol = buf.indexOf('\r\n');
        if (eol < 0) {
          if (buf.length > 4096) throw new Error('a chunk size line too long');
          break;
        }
        const m = /^([0-9a-fA-F]{1,12})(;.*)?$/.exec(buf.subarray(0, eol).toString('latin1'));
        if (!m) throw new Error('a malformed chunk size');
        const size = parseInt(m[1]!, 16);
        buf = buf.subarray(eol + 2);
        if (size === 0) {
          this.trailers = true;
          continue;
        }
        this.left = size;
        continue;
      }
      if (this.left > 0) {
        if (buf.length === 0) break;
        const take = buf.subarray(0, this.left);
        data.push(take);
        this.left -= take.length;
        buf = buf.subarray(take.length);
        if (this.left > 0) break;
      }
      // The CRLF after a chunk's data.
      if (buf.length < 2) break;
      if (buf[0] !== 13 || buf[1] !== 10) throw new Error('a chunk without its CRLF');
      buf = buf.subarray(2);
      this.left = -1;
    }
    this.pending = Buffer.from(buf);
    return { data, done: false };
  }
}

interface Head {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  /** Whether the connection may carry another request after this answer. */
  readonly keepAlive: boolean;
}

/** Parses a response head (status line and headers, without the blank line). */
export function parseHead(text: string): Head {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
  if (!m) throw new Error(`not an HTTP/1.x status line: ${JSON.stringify((lines[0] ?? '').slice(0, 100))}`);
  const headers: Record<string, string | string[]> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0 || /^\s/.test(line)) throw new Error(`a malformed header line: ${JSON.stringify(line.slice(0, 100))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) throw new Error(`a malformed header name: ${JSON.stringify(name.slice(0, 100))}`);
    const value = line.slice(colon + 1).trim();
    const had = headers[name];
    headers[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  const connection = String(headers.connection ?? '').toLowerCase();
  const keepAlive = m[1] === '1' ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
  return { status: Number(m[2]), headers, keepAlive };
}

/** The Content-Length: undefined when absent, null when malformed or contradictory. */
function contentLength(headers: Record<string, string | string[]>): number | undefined | null {
  const raw = headers['content-length'];
  if (raw === undefined) return undefined;
  const values = (Array.isArray(raw) ? raw : [raw]).flatMap((v) => v.split(',')).map((v) => v.trim());
  if (!values.every((v) => /^\d{1,15}$/.test(v))) return null;
  const n = Number(values[0]);
  return values.every((v) => Number(v) === n) ? n : null;
}

function response(statusCode: number, headers: Record<string, string | string[]>, body: Readable, direct?: DirectBody): DirectResponse {
  return { statusCode, headers, body, trailers: {}, opaque: null, context: {}, ...(direct ? { direct } : {}) } as unknown as DirectResponse;
}

/** A body read whole, replayed as a stream (that then fails with `error`, if the read did). */
function replayBody(bytes: Buffer, error: string | undefined): Readable {
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

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}

/** The error an aborted request fails with, as node's own (name AbortError), the signal's reason as its cause. */
export function abortError(signal?: AbortSignal | null): Error {
  const e = new Error('The operation was aborted', signal ? { cause: signal.reason } : {});
  e.name = 'AbortError';
  return e;
}
