// What a long-lived puller (LocalService, so fastpulld) keeps from one pull to the next: the
// connections to registries and, per credentials provider, the tokens they handed out. A pull that
// builds its own client pays a TCP (and TLS) handshake per connection and a token request per
// repository every time; kubelet pulling a pod's images one after another pays it per image.
// hosts.toml is still read per operation, as containerd reads config_path per pull, so an edited
// file takes effect at the next pull; a host with TLS settings of its own keeps its pool for as
// long as those settings and the bytes of their files stay the same.
import { Authorizer, type CredentialsProvider } from './auth.js';
import { DEFAULT_CONNECTIONS_PER_HOST, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_USER_AGENT, KEEP_ALIVE_TIMEOUT_MS } from './defaults.js';
import type { SharedPools } from './endpoints.js';
import { DEFAULT_DIAL_TIMEOUT_MS } from './hostsconfig.js';
import { NodeHttpPool } from './nodehttp.js';
import { ProxyRules, type ProxySettings } from './proxy.js';
import type { Tuning } from '../tuning.js';

/** Options of {@link RegistryConnections}: what every client sharing them gets alike. */
export interface RegistryConnectionsOptions {
  /** Connections per registry origin; default {@link DEFAULT_CONNECTIONS_PER_HOST}. */
  readonly connectionsPerHost?: number;
  /** The User-Agent header; default `fastpull/<VERSION>`. */
  readonly userAgent?: string;
  /** A response whose headers, or next body bytes, take longer than this fails (and is retried). */
  readonly idleTimeoutMs?: number;
  /** The proxies (see proxyEnvironment()); default none. */
  readonly proxy?: ProxySettings;
  /** Measuring knobs (tuning.ts): the connections read `directRanges`; default none. */
  readonly tuning?: Pick<Tuning, 'directRanges'>;
}

/** Hosts with TLS settings of their own whose pools are kept (a node names a handful in hosts.toml). */
export const MAX_SHARED_TLS_POOLS = 32;

/** Stands for "no credentials provider" as a key of the token caches. */
const ANONYMOUS: CredentialsProvider = () => undefined;

/**
 * Registry connections and tokens shared by the clients built on them (RegistryClientOptions
 * `connections`), for a process that pulls many times. Tokens are shared only between clients
 * given the very same credentials provider (the same function): a pull with credentials of its own
 * never uses, nor leaves behind, a token another caller's credentials obtained. Idle connections
 * close after a few seconds as a client's do; close() ends the rest.
 * @example
 * const shared = new RegistryConnections();
 * const client = new RegistryClient({ connections: shared, credentials });
 * // ... use client, then client.close() (which leaves the shared connections open) ...
 * await shared.close();
 */
export class RegistryConnections implements SharedPools {
  /** The pool of every host without TLS settings of its own in hosts.toml. */
  readonly pool: NodeHttpPool;
  /** The User-Agent header of every client on these connections. */
  readonly userAgent: string;
  /** How long a response may send nothing before it fails, for every pool made here. */
  readonly idleTimeoutMs: number;
  /** Connections per registry origin of every pool made here. */
  readonly connectionsPerHost: number;
  /** The proxies of every pool made here; undefined when none applies. */
  readonly proxy: ProxyRules | undefined;
  /** false: blob bodies go through node:http (Tuning.directRanges); undefined: the default. */
  readonly directRanges: boolean | undefined;
  private readonly authorizers = new WeakMap<CredentialsProvider, Authorizer>();
  /** Pools of hosts with TLS settings of their own in hosts.toml, by what made them. */
  private readonly tlsPools = new Map<string, NodeHttpPool>();
  /** Pools forgotten while maybe in use; closed once as many again were forgotten after them. */
  private readonly dropped: NodeHttpPool[] = [];

  constructor(options: RegistryConnectionsOptions = {}) {
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.connectionsPerHost = options.connectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST;
    // Settings that proxy nothing leave the pools as they are without them.
    const rules = options.proxy ? new ProxyRules(options.proxy) : undefined;
    this.proxy = rules?.active ? rules : undefined;
    this.directRanges = options.tuning?.directRanges;
    this.pool = new NodeHttpPool({
      connections: this.connectionsPerHost,
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      idleTimeoutMs: this.idleTimeoutMs,
      dialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS,
      ...(this.proxy ? { proxy: this.proxy } : {}),
      ...(this.directRanges === false ? { directRanges: false } : {}),
    });
  }

  /** The Authorization state (tokens, Basic origins) of clients given `credentials`. */
  authorizer(credentials: CredentialsProvider | undefined): Authorizer {
    const key = credentials ?? ANONYMOUS;
    let found = this.authorizers.get(key);
    if (!found) {
      found = new Authorizer(this.pool, credentials, this.userAgent);
      this.authorizers.set(key, found);
    }
    return found;
  }

  /**
   * The pool kept under `key` (a host's TLS settings, see Endpoints), made by `make` the first time.
   * At most {@link MAX_SHARED_TLS_POOLS} are kept: past that the oldest is forgotten, not closed, since
   * a running pull may still use it; its idle connections close on their own.
   */
  tlsPool(key: string, make: () => NodeHttpPool): NodeHttpPool {
    let found = this.tlsPools.get(key);
    if (!found) {
      if (this.tlsPools.size >= MAX_SHARED_TLS_POOLS) {
        const [oldest, pool] = this.tlsPools.entries().next().value!;
        this.tlsPools.delete(oldest);
        this.dropped.push(pool);
        if (this.dropped.length > MAX_SHARED_TLS_POOLS) void this.dropped.shift()!.close();
      }
      found = make();
      this.tlsPools.set(key, found);
    }
    return found;
  }

  /** Closes the connections; clients built on them fail from then on. */
  async close(): Promise<void> {
    await Promise.all([this.pool, ...this.tlsPools.values(), ...this.dropped].map((p) => p.close()));
    this.tlsPools.clear();
    this.dropped.length = 0;
  }
}
