// Range bodies read straight off the socket. A blob's ranges are most of the bytes a pull moves
// through its process, and node:http hands each socket read to its parser, which copies the body
// piece into a fresh Buffer and pushes it through a stream (IncomingMessage): a 64 KiB allocation,
// a young-generation object and several calls per read, then garbage for the collector. Here a
// range GET goes out on a connection of our own whose reads land in one buffer per connection, and
// a 206's body is handed to the caller as views of that buffer, which it writes at their offsets
// before the next read: a fraction of node:http's CPU per byte (docs/architecture.md, "3. Fetch"
// and "Figures behind the defaults").
//
// Only what a range GET needs: HTTP/1.1, one request at a time per connection, kept alive. The
// parts: http1.ts parses (head, Content-Length, chunks), directconn.ts is one connection,
// directbody.ts the bodies it reads, and this file the pool of connections per origin. The request
// logic (endpoints, tokens, redirects, retries) is the transport's.
import { requestAbortError, type NodeHttpPoolOptions } from './connections.js';
import { Connection, StaleConnection, type Via } from './directconn.js';
import type { RegistryResponse } from './message.js';
import type { Proxy } from './proxy.js';
import { openTunnel } from './tunnel.js';

export type { DirectBody, RegistryResponse } from './message.js';

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
   * its body in `direct`; another success (chunks, or up to the close) has it as a stream in
   * `body`; any other answer's body is read first (up to 64 KiB) and is the response's `body`. Rejects on a
   * transport failure before the head (a connection that was kept alive and turns out closed is
   * replaced once), or when `signal` aborts. At most `connections` connections per origin: a
   * request beyond waits for one of them.
   */
  async request(url: URL, headers: Record<string, string>, signal: AbortSignal | null): Promise<RegistryResponse> {
    if (this.closed) throw new Error('the connection pool is closed');
    if (signal?.aborted) throw requestAbortError(signal);
    const key = `${url.protocol}//${url.host}`;
    const proxy = this.options.proxy?.forUrl(url);
    try {
      return await (await this.acquire(url, key, signal, proxy)).send(url, headers, signal);
    } catch (e) {
      // A kept-alive connection the server closed meanwhile fails before any byte of an answer:
      // the request goes out once more (on a new connection, unless another idle one is there).
      if (!(e instanceof StaleConnection)) throw e;
      if (signal?.aborted) throw e.cause;
    }
    return (await this.acquire(url, key, signal, proxy)).send(url, headers, signal);
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
        reject(requestAbortError(signal));
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

/** A request waiting for a connection: given one that came free, leave to dial (undefined), or an error. */
interface Waiter {
  give(c: Connection | undefined | Error): void;
}
