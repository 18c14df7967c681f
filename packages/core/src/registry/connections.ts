// What the registry client's own connections share, node:http's (nodehttp.ts) and the range
// client's (directhttp.ts): their options, and the error an aborted request fails with.
import type { ProxyRules } from './proxy.js';

/** How the client's own connections connect. */
export interface NodeHttpPoolOptions {
  /** Connections per origin at most. */
  readonly connections: number;
  /** A request fails when its connection carries no byte for this long (headers or body). */
  readonly idleTimeoutMs: number;
  /** An unused kept-alive connection is closed after this long. */
  readonly keepAliveTimeoutMs: number;
  /** A connection (TCP and TLS) not made within this long fails. */
  readonly dialTimeoutMs: number;
  /** TLS: verify the server's certificate (default true). */
  readonly rejectUnauthorized?: boolean;
  /** TLS: certificate authorities to trust instead of the system's. */
  readonly ca?: readonly Buffer[];
  /** TLS: a client certificate and its key. */
  readonly cert?: Buffer;
  readonly key?: Buffer;
  /** The proxies requests go through (HTTP_PROXY, HTTPS_PROXY, NO_PROXY); none when unset. */
  readonly proxy?: ProxyRules;
  /** false: blob bodies come through node:http, not straight off the socket (Tuning.directRanges, for comparison). */
  readonly directRanges?: boolean;
}

/** The error an aborted request fails with, as node's own (name AbortError), the signal's reason as its cause. */
export function requestAbortError(signal?: AbortSignal | null): Error {
  const e = new Error('The operation was aborted', signal ? { cause: signal.reason } : {});
  e.name = 'AbortError';
  return e;
}
