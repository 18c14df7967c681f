// The TLS settings of a connection pool (hosts.toml's ca, client and skip_verify), as node:https and
// node:tls take them: one reading for the pool's agents, its range connections and its tunnels.
import type { ConnectionOptions } from 'node:tls';
import type { NodeHttpPoolOptions } from './connections.js';

/** TLS settings of a pool's options. */
export function tlsOptions(options: NodeHttpPoolOptions): ConnectionOptions {
  return {
    rejectUnauthorized: options.rejectUnauthorized ?? true,
    ...(options.ca && options.ca.length > 0 ? { ca: [...options.ca] } : {}),
    ...(options.cert ? { cert: options.cert } : {}),
    ...(options.key ? { key: options.key } : {}),
  };
}
