// One connection of the range client (directhttp.ts is their pool): a GET at a time, kept alive,
// its reads landing in one buffer per connection (net's `onread`, which TLS sockets honour too) and
// handed to the answer under way: its head to the parser (http1.ts), its body to the body it makes
// (directbody.ts). Through a proxy: TLS inside a CONNECT tunnel (tunnel.ts) for HTTPS, the proxy
// itself in absolute form with its Proxy-Authorization for plain HTTP.
import { type Socket, connect as netConnect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { requestAbortError, type NodeHttpPoolOptions } from './connections.js';
import { BufferedBody, DirectBodyImpl, StreamBody, replayBody, type BodyConnection, type FedBody } from './directbody.js';
import { framingOf, HeadReader, type Framing, type Head, type HeaderFields } from './http1.js';
import type { RegistryResponse, ResponseBody } from './message.js';
import type { Proxy } from './proxy.js';
import { tlsOptions } from './tlsoptions.js';

/** Bytes each connection reads into at most (TLS hands over one record, 16 KiB, at a time). */
const READ_BUFFER_BYTES = 128 * 1024;

/** How a connection reaches its registry through a proxy: a CONNECT tunnel for HTTPS, the proxy itself for plain HTTP. */
export interface Via {
  readonly proxy: Proxy;
  readonly tunnel?: Socket;
}

/** A failure of a kept-alive connection before any byte of the answer came: worth one more try. */
export class StaleConnection extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

export interface ConnectionHooks {
  /** The connection finished a response and can take another request. */
  idle(c: Connection): void;
  /** The connection is closed. */
  gone(c: Connection): void;
}

/** What the connection does with the bytes it reads. */
type Phase = 'idle' | 'head' | 'body' | 'closed';

/** One HTTP/1.1 connection, one request at a time. */
export class Connection implements BodyConnection {
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
  private current: IncomingResponse | undefined;
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
    this.dialTimer = setTimeout(
      () => this.destroy(new Error(`connect timeout: no connection to ${url.host} within ${options.dialTimeoutMs} ms`)),
      options.dialTimeoutMs,
    );
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
    this.socket.on('error', (e: Error) => this.destroy(e));
    this.socket.on('end', () => this.destroy(new Error('the server closed the connection')));
    this.socket.on('close', () => this.destroy(new Error('the connection closed')));
  }

  /** Whether it can take a request now. */
  get usable(): boolean {
    return this.phase === 'idle' && !this.socket.destroyed;
  }

  /** Sends a GET; resolves with its answer once the head came. */
  send(url: URL, headers: Record<string, string>, signal: AbortSignal | null): Promise<RegistryResponse> {
    const fresh = this.sent === 0;
    this.sent++;
    this.phase = 'head';
    this.socket.ref();
    this.socket.setTimeout(this.options.idleTimeoutMs);
    return new Promise<RegistryResponse>((resolve, reject) => {
      const exchange = new IncomingResponse(this, fresh, resolve, reject);
      this.current = exchange;
      if (signal) {
        const onAbort = (): void => this.destroy(requestAbortError(signal));
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

  /** The answer's head was read: what comes now is its body. */
  reading(): void {
    this.phase = 'body';
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
class IncomingResponse {
  unlisten: (() => void) | undefined;
  private readonly heads = new HeadReader();
  private settled = false;
  /** Whether any byte of the answer came. */
  private answered = false;
  /** The answer's body as it is read. */
  private body: FedBody | undefined;

  constructor(
    private readonly conn: Connection,
    private readonly fresh: boolean,
    private readonly resolve: (res: RegistryResponse) => void,
    private readonly reject: (e: Error) => void,
  ) {}

  onBytes(buffer: Buffer, n: number): void {
    this.answered = true;
    if (this.body) {
      this.body.onBytes(buffer.subarray(0, n));
      return;
    }
    let got: { head: Head; rest: Buffer } | undefined;
    let framing: Framing;
    try {
      got = this.heads.push(buffer.subarray(0, n));
      if (got === undefined) return;
      framing = framingOf(got.head);
    } catch (e) {
      this.conn.destroy(e as Error);
      return;
    }
    this.onHead(got.head, framing, got.rest);
  }

  /**
   * A 200 or 206 with a Content-Length: its body for `take` (`direct`); another success: its body as
   * a stream; any other answer: its body read whole (up to a cap) first.
   */
  private onHead(head: Head, framing: Framing, rest: Buffer): void {
    const { status, headers } = head;
    this.conn.reading();
    if ((status === 200 || status === 206) && framing.kind === 'length') {
      const body = new DirectBodyImpl(this.conn, framing.length, framing.reusable, () => this.unlisten?.());
      this.body = body;
      // The caller takes the body later: until then nothing is read, and what came with the head is kept.
      this.conn.pause();
      body.onBytes(rest);
      this.settled = true;
      this.resolve(response(status, headers, body.stub(), body));
      return;
    }
    if (status >= 200 && status < 300 && (framing.kind === 'chunked' || framing.kind === 'close')) {
      const body = new StreamBody(this.conn, framing, () => this.unlisten?.());
      this.body = body;
      body.onBytes(rest);
      this.settled = true;
      this.resolve(response(status, headers, body));
      return;
    }
    this.body = new BufferedBody(this.conn, framing, (bytes, error) => {
      this.unlisten?.();
      this.settled = true;
      this.resolve(response(status, headers, replayBody(bytes, error)));
    });
    this.body.onBytes(rest);
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
}

function response(statusCode: number, headers: HeaderFields, body: ResponseBody, direct?: DirectBodyImpl): RegistryResponse {
  return direct ? { statusCode, headers, body, direct } : { statusCode, headers, body };
}

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
