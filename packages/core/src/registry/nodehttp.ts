// The registry client's own connections: node:http and node:https agents, answering with the
// project's response (message.ts: status, headers, a body to iterate, destroy or dump), as the range
// client and a caller's dispatcher do, so that the transport, the token exchange and the ranged fetch
// read any of them the same way. A caller's undici dispatcher
// (RegistryClientOptions.dispatcher) still goes through undici.
//
// Why not undici for our own: a blob's bytes are most of what a pull moves through this process's
// main thread, and undici's HTTP/1.1 client copies every socket read into its WebAssembly parser's
// memory and out again, then through its body stream. node:http's parser is native and copies each
// body piece once, and taken from 'data' events instead of `for await` (consumeBody in response.ts)
// it costs less CPU still (docs/architecture.md, "Figures behind the defaults").
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { requestAbortError, type NodeHttpPoolOptions } from './connections.js';
import { DirectConnections } from './directhttp.js';
import { dumpBody, type HttpMethod, type RegistryResponse } from './message.js';
import type { Proxy } from './proxy.js';

export type { NodeHttpPoolOptions } from './connections.js';
import { tlsOptions } from './tlsoptions.js';
import { openTunnel } from './tunnel.js';

/** What a request through a {@link NodeHttpPool} takes. */
export interface NodeHttpRequestOptions {
  readonly method: HttpMethod;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly signal: AbortSignal | null;
}

/** A response body as the registry code reads it: iterated, destroyed, or dumped. */
export type NodeHttpBody = IncomingMessage & {
  /** Reads and drops up to `limit` bytes (default 128 KiB) so the connection can be reused, else closes it. */
  dump(options?: { limit?: number }): Promise<void>;
};

/**
 * Connections to registries through node:http and node:https, kept alive and bounded per origin.
 * `request` resolves once the response's headers came, with a body that must be consumed,
 * destroyed or dumped.
 * @example
 * const pool = new NodeHttpPool({ connections: 16, idleTimeoutMs: 30_000, keepAliveTimeoutMs: 10_000, dialTimeoutMs: 30_000 });
 * const res = await pool.request(new URL('http://127.0.0.1:5000/v2/'), { method: 'GET', headers: {}, signal: null });
 * await res.body.dump();
 * await pool.close();
 */
export class NodeHttpPool {
  private readonly http: HttpAgent;
  private readonly https: HttpsAgent;
  /** Connections to a proxy for plain HTTP requests, made on first use. */
  private viaProxy: HttpAgent | undefined;
  /** TLS connections through CONNECT tunnels, made on first use. */
  private tunnelled: TunnelAgent | undefined;
  private closed = false;
  /** Connections for blob ranges, whose bodies are read straight off the socket (directhttp.ts). */
  private direct: DirectConnections | undefined;

  constructor(private readonly options: NodeHttpPoolOptions) {
    const common = { keepAlive: true, maxSockets: options.connections, timeout: options.keepAliveTimeoutMs, scheduling: 'lifo' as const };
    this.http = new HttpAgent(common);
    this.https = new HttpsAgent({ ...common, ...tlsOptions(options) });
  }

  /** Sends one request; rejects on a transport failure before the headers came (or when aborted). */
  request(url: URL, options: NodeHttpRequestOptions): Promise<RegistryResponse> {
    if (this.closed) return Promise.reject(new Error('the connection pool is closed'));
    const tls = url.protocol === 'https:';
    let opts: RequestOptions = {
      protocol: url.protocol,
      hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port || (tls ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: options.method,
      headers: options.body !== undefined ? { ...options.headers, 'content-length': String(Buffer.byteLength(options.body)) } : options.headers,
      agent: tls ? this.https : this.http,
    };
    const proxy = this.options.proxy?.forUrl(url);
    if (proxy) opts = this.throughProxy(opts, url, proxy);
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(requestAbortError(signal));
    return new Promise((resolve, reject) => {
      let req: ClientRequest;
      try {
        req = (tls ? httpsRequest : httpRequest)(opts);
      } catch (e) {
        reject(e);
        return;
      }
      let dial: NodeJS.Timeout | undefined;
      const stopDial = () => {
        if (dial) clearTimeout(dial);
        dial = undefined;
      };
      req.on('socket', (socket) => {
        // A socket from the pool is connected already; a new one gets the dial timeout until it is
        // (for TLS, until its handshake ended).
        if ((socket as { connecting?: boolean }).connecting !== true) return;
        dial = setTimeout(
          () => req.destroy(new Error(`connect timeout: no connection to ${url.host} within ${this.options.dialTimeoutMs} ms`)),
          this.options.dialTimeoutMs,
        );
        dial.unref();
        socket.once(tls ? 'secureConnect' : 'connect', stopDial);
      });
      // The signal stops the request, or the body once it is being read; not node's `signal` option,
      // which destroys the request even after its response ended, its socket back in the pool
      // (an 'error' nobody listens to any more).
      let response: IncomingMessage | undefined;
      const onAbort = (): void => {
        const e = requestAbortError(signal);
        if (response === undefined) req.destroy(e);
        else if (!response.complete) response.destroy(e);
      };
      const unlisten = (): void => signal?.removeEventListener('abort', onAbort);
      signal?.addEventListener('abort', onAbort, { once: true });
      req.once('close', unlisten);
      req.setTimeout(this.options.idleTimeoutMs, () => req.destroy(new Error(`timeout: no data from ${url.host} for ${this.options.idleTimeoutMs} ms`)));
      req.on('error', (e) => {
        stopDial();
        reject(e);
      });
      req.on('response', (res: IncomingMessage) => {
        stopDial();
        response = res;
        res.once('close', unlisten);
        // An error after the headers reaches whoever reads the body; without a listener it would throw.
        res.on('error', () => {});
        resolve({ statusCode: res.statusCode ?? 0, headers: responseHeaders(res), body: withDump(res) });
      });
      req.end(options.body);
    });
  }

  /**
   * A GET of a blob or a range of one, whose body the caller writes where it belongs: sent on a
   * connection whose reads land in one buffer (directhttp.ts), a 200 or 206 with a Content-Length
   * then has its body in the response's `direct`, read off the socket in place. Any other answer
   * is an ordinary response (a success without a length as a stream, any other answer's body read
   * first, up to 64 KiB). With `directRanges: false` it goes through node:http like any request.
   */
  requestBlob(url: URL, options: NodeHttpRequestOptions): Promise<RegistryResponse> {
    if (this.options.directRanges === false || options.method !== 'GET' || options.body !== undefined) return this.request(url, options);
    if (this.closed) return Promise.reject(new Error('the connection pool is closed'));
    this.direct ??= new DirectConnections(this.options);
    return this.direct.request(url, options.headers, options.signal);
  }

  /** Closes every connection; later requests fail. */
  async close(): Promise<void> {
    this.closed = true;
    this.direct?.close();
    this.http.destroy();
    this.https.destroy();
    this.viaProxy?.destroy();
    this.tunnelled?.destroy();
  }

  /**
   * A request's options sent through `proxy`: HTTPS on a TLS connection to the registry inside a
   * CONNECT tunnel; plain HTTP to the proxy itself, with the absolute URL as the request target.
   */
  private throughProxy(opts: RequestOptions, url: URL, proxy: Proxy): RequestOptions {
    const common = { keepAlive: true, maxSockets: this.options.connections, timeout: this.options.keepAliveTimeoutMs, scheduling: 'lifo' as const };
    if (url.protocol === 'https:') {
      this.tunnelled ??= new TunnelAgent({ ...common, ...tlsOptions(this.options) }, this.options.dialTimeoutMs);
      return { ...opts, agent: this.tunnelled, proxy } as RequestOptions;
    }
    this.viaProxy ??= new HttpAgent(common);
    const headers: Record<string, string> = { ...(opts.headers as Record<string, string>), host: url.host };
    if (proxy.authorization) headers['proxy-authorization'] = proxy.authorization;
    return { ...opts, hostname: proxy.hostname, port: proxy.port, path: url.href, headers, agent: this.viaProxy };
  }
}

/**
 * node:https connections made inside CONNECT tunnels: the agent keeps them alive per registry as
 * its own, and each new one is a tunnel through the request's proxy with TLS to the registry in it
 * (its name as the server name, the pool's CA and client certificate).
 */
class TunnelAgent extends HttpsAgent {
  constructor(
    options: ConstructorParameters<typeof HttpsAgent>[0],
    private readonly dialTimeoutMs: number,
  ) {
    super(options);
  }

  // node's agent takes the connection through the callback when createConnection returns none.
  override createConnection(options: RequestOptions, done?: (e: Error | null, socket: Duplex) => void): undefined {
    const { proxy, ...tls } = options as ConnectionOptions & { proxy: Proxy };
    openTunnel(proxy, tls.host!, Number(tls.port), { dialTimeoutMs: this.dialTimeoutMs }).then(
      (socket) => done!(null, tlsConnect({ ...tls, socket })),
      (e: Error) => done!(e, undefined as unknown as Duplex),
    );
    return undefined;
  }
}

/** Headers as the project's response holds them: lower-case names, a repeated header as a list. */
function responseHeaders(res: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(res.headersDistinct)) {
    if (values === undefined) continue;
    out[name] = values.length === 1 ? values[0]! : values;
  }
  return out;
}

function withDump(res: IncomingMessage): NodeHttpBody {
  const body = res as NodeHttpBody;
  body.dump = ({ limit } = {}) => dumpBody(res, limit);
  return body;
}
