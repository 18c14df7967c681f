// Where a registry request is sent: the client's own connections (nodehttp.ts, and the range client
// for blobs), or a caller's undici dispatcher (RegistryClientOptions.dispatcher), through that
// dispatcher's own request API. The library never loads undici itself: nothing in a pull needs it
// (proxies are the client's own, proxy.ts and tunnel.ts), and a caller who hands over a dispatcher
// has loaded undici already (docs/architecture.md, "Figures behind the defaults", for the figures).
import type { Dispatcher } from 'undici';
import type { HeaderFields, HttpMethod, RegistryResponse } from './message.js';
import { NodeHttpPool } from './nodehttp.js';

/** Where a registry request goes: the client's own connections, or a caller's undici dispatcher. */
export type HttpPool = NodeHttpPool | Dispatcher;

/** One request: what {@link sendRequest} takes besides its URL. */
export interface SendOptions {
  readonly dispatcher: HttpPool;
  readonly method: HttpMethod;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly signal: AbortSignal | null;
  /**
   * A GET of a blob's bytes, whose body the client's own connections may hand over as the
   * response's `direct` (NodeHttpPool.requestBlob).
   */
  readonly blob?: boolean;
}

/** Sends one request through `options.dispatcher`; resolves once the response's head came. */
export function sendRequest(url: URL, options: SendOptions): Promise<RegistryResponse> {
  const { dispatcher, blob, ...rest } = options;
  if (dispatcher instanceof NodeHttpPool) return blob === true ? dispatcher.requestBlob(url, rest) : dispatcher.request(url, rest);
  return throughDispatcher(dispatcher, url, rest);
}

/** A request through a caller's undici dispatcher, its answer as the project's response. */
async function throughDispatcher(dispatcher: Dispatcher, url: URL, options: Omit<SendOptions, 'dispatcher' | 'blob'>): Promise<RegistryResponse> {
  const { method, headers, body, signal } = options;
  const res = await dispatcher.request({
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    signal,
  });
  return { statusCode: res.statusCode, headers: headerFields(res.headers), body: res.body };
}

/** undici's headers as the project's: the fields it left undefined dropped. */
function headerFields(headers: Record<string, string | string[] | undefined>): HeaderFields {
  const out: HeaderFields = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value;
  return out;
}
