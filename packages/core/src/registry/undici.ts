// Where a registry request is sent: the client's own connections (nodehttp.ts), or a caller's undici
// dispatcher, through undici, which is then loaded on first use rather than with the library.
import { createRequire } from 'node:module';
import type { Dispatcher } from 'undici';
import type { HeaderFields, HttpMethod, RegistryResponse } from './message.js';
import { NodeHttpPool } from './nodehttp.js';

/** Where a registry request goes: the client's own connections, or a caller's undici dispatcher. */
export type HttpPool = NodeHttpPool | Dispatcher;

type AgentClass = typeof import('undici').Agent;

/** What of undici the registry client uses. */
export interface HttpClient {
  readonly Agent: AgentClass;
  /** undici's `request(url, options)`, through `options.dispatcher`. */
  request(url: URL, options: { dispatcher: Dispatcher; method: HttpMethod; headers: Record<string, string>; body?: string; signal: AbortSignal | null }): Promise<RegistryResponse>;
}

let loaded: HttpClient | undefined;

/**
 * Sends one request through `options.dispatcher`: the client's own connections answer it
 * themselves, a caller's undici dispatcher through undici's request (undici is loaded only then).
 * `blob`: a GET of a blob's bytes, whose body the client's own connections may hand over as the
 * response's `direct` (NodeHttpPool.requestBlob).
 */
export function sendRequest(
  url: URL,
  options: { dispatcher: HttpPool; method: HttpMethod; headers: Record<string, string>; body?: string; signal: AbortSignal | null; blob?: boolean },
): Promise<RegistryResponse> {
  const { dispatcher, blob, ...rest } = options;
  if (!(dispatcher instanceof NodeHttpPool)) return undici().request(url, { ...rest, dispatcher });
  return blob === true ? dispatcher.requestBlob(url, rest) : dispatcher.request(url, rest);
}

/**
 * undici's Agent and request, required on first use. Loading undici is most of what importing this
 * library costs, paid by every command that never talks to a registry (`fastpull mounts`, `images`,
 * `version`, a pull through fastpulld) and by fastpulld until its first pull; and its index loads all
 * of it (fetch, WebSocket, EventSource, cookies, mocks, caches: 112 files), about three times what
 * the dispatchers and the request API alone take, which is what a pull waits for while it resolves
 * its image (docs/architecture.md, "Figures behind the defaults"). So only those are loaded, as undici's index joins them
 * (its API methods on the Dispatcher prototype); the whole module where its files are laid out
 * otherwise. It is CommonJS: a synchronous require serves the constructors and calls that need it,
 * and an import of undici elsewhere (tests, a caller's own dispatcher) shares the same classes.
 */
export function undici(): HttpClient {
  return (loaded ??= load());
}

function load(): HttpClient {
  const require = createRequire(import.meta.url);
  let Agent: AgentClass;
  try {
    Agent = require('undici/lib/dispatcher/agent') as AgentClass;
    const base = require('undici/lib/dispatcher/dispatcher') as { prototype: object };
    Object.assign(base.prototype, require('undici/lib/api') as object);
  } catch {
    Agent = (require('undici') as typeof import('undici')).Agent;
  }
  return {
    Agent,
    request: async (url, { dispatcher, ...options }) => {
      const res = await dispatcher.request({ ...options, origin: url.origin, path: `${url.pathname}${url.search}` });
      return { statusCode: res.statusCode, headers: headerFields(res.headers), body: res.body };
    },
  };
}

/** undici's headers as the project's: the fields it left undefined dropped. */
function headerFields(headers: Record<string, string | string[] | undefined>): HeaderFields {
  const out: HeaderFields = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value;
  return out;
}
