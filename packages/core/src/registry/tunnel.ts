// A CONNECT tunnel through an HTTP proxy: the socket to the proxy, once the proxy answered 2xx, is a
// byte pipe to the registry, in which the caller starts TLS with the registry's name. Only the
// Proxy-Authorization header crosses the proxy in clear; the registry's credentials go inside TLS.
import { connect, type Socket } from 'node:net';
import type { Proxy } from './proxy.js';

/** A CONNECT answer's head larger than this is refused. */
const MAX_CONNECT_HEAD = 16 * 1024;

/** The proxy refused the tunnel (a non-2xx answer to CONNECT): `status` is its status code. */
export class ProxyRefused extends Error {
  constructor(
    message: string,
    readonly proxy: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** Options of {@link openTunnel}. */
export interface TunnelOptions {
  /** The tunnel must be open (TCP to the proxy and its answer) within this long. */
  readonly dialTimeoutMs: number;
  readonly signal?: AbortSignal | null;
}

/**
 * Opens a tunnel to `host:port` through `proxy`: resolves with the socket, paused, holding no byte
 * of the registry's yet; rejects with {@link ProxyRefused} when the proxy answers otherwise than 2xx,
 * or with the connection's failure. Errors name the proxy without its credentials.
 */
export function openTunnel(proxy: Proxy, host: string, port: number, options: TunnelOptions): Promise<Socket> {
  const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return new Promise<Socket>((resolve, reject) => {
    const socket = connect({ host: proxy.hostname, port: proxy.port });
    let head = Buffer.alloc(0);
    const fail = (e: Error): void => {
      cleanup();
      socket.destroy();
      reject(e);
    };
    const timer = setTimeout(
      () => fail(new Error(`connect timeout: no tunnel to ${target} through the proxy ${proxy.name} within ${options.dialTimeoutMs} ms`)),
      options.dialTimeoutMs,
    );
    const onAbort = (): void => fail(options.signal!.reason instanceof Error ? options.signal!.reason : new Error('aborted'));
    const onError = (e: Error): void => fail(new Error(`through the proxy ${proxy.name}: ${e.message}`));
    const onEnd = (): void => fail(new Error(`the proxy ${proxy.name} closed the connection before it answered CONNECT ${target}`));
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_CONNECT_HEAD) fail(new Error(`the proxy ${proxy.name} answered CONNECT ${target} with a head over ${MAX_CONNECT_HEAD} bytes`));
        return;
      }
      const line = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(line);
      const status = m ? Number(m[1]) : 0;
      if (status < 200 || status > 299) {
        const said = m ? `${status}${m[2] ? ` ${m[2].slice(0, 100)}` : ''}` : JSON.stringify(line.slice(0, 100));
        // 407 is the standard answer; some proxies (tinyproxy) answer CONNECT without credentials with 401.
        const hint =
          status === 407 || status === 401
            ? proxy.authorization
              ? ' (the credentials in the proxy URL were refused)'
              : ' (it wants credentials: http://user:password@host:port)'
            : '';
        fail(new ProxyRefused(`the proxy ${proxy.name} refused CONNECT ${target}: ${said}${hint}`, proxy.name, status));
        return;
      }
      // The registry speaks only after the client's TLS hello: bytes after the head are not its.
      if (end + 4 !== head.length) {
        fail(new Error(`the proxy ${proxy.name} sent bytes after its answer to CONNECT ${target}`));
        return;
      }
      cleanup();
      socket.pause();
      resolve(socket);
    };
    function cleanup(): void {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
    }
    if (options.signal?.aborted) {
      onAbort();
      return;
    }
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
    socket.setNoDelay(true);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${proxy.authorization ? `proxy-authorization: ${proxy.authorization}\r\n` : ''}\r\n`);
  });
}
