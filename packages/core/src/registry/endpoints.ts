// Which hosts a request for a reference goes to, in order: the mirrors of hosts.toml that have the
// capability the request needs, then the upstream; a host that straggled recently goes last.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { NodeHttpPool } from './nodehttp.js';
import type { HttpPool } from './undici.js';
import type { ProxyRules } from './proxy.js';
import { FastpullError, fromFsError } from '../errors.js';
import type { Reference } from '../oci/reference.js';
import { DEFAULT_CONNECTIONS_PER_HOST, DEFAULT_IDLE_TIMEOUT_MS, DEMOTION_MS, KEEP_ALIVE_TIMEOUT_MS } from './defaults.js';
import { registryEndpoint, type RegistryEndpoint } from './hosts.js';
import { DEFAULT_DIAL_TIMEOUT_MS, hostsFor, loadHostsConfig, type RegistryHost } from './hostsconfig.js';

/** What a request is for: 'resolve' (a tag to a digest) may go only to hosts with that capability. */
export type Operation = 'resolve' | 'pull';

/** One place a registry's content is asked for: the registry itself or a mirror. */
export interface Endpoint {
  /** `scheme://host[:port]`. */
  readonly origin: string;
  /** Path before `<repository>/...`: `/v2`, or the host's own path with override_path. */
  readonly prefix: string;
  /** Headers from hosts.toml, lower-case names, sent with every request to this host. */
  readonly headers: Readonly<Record<string, string>>;
  /** The connection pool for this host (its own when hosts.toml gives it TLS settings). */
  readonly dispatcher: HttpPool;
  /** The name the credentials provider is asked about. */
  readonly credentialsFor: string;
  /** Appended to every path: `?ns=<registry>` for a mirror, empty for the upstream. */
  readonly query: string;
}

/** Options of {@link Endpoints}. */
export interface EndpointsOptions {
  /** The pool for hosts without TLS settings of their own. */
  readonly dispatcher: HttpPool;
  /** Plain HTTP for the upstream (loopback registries use it anyway). */
  readonly plainHttp: boolean;
  /** containerd's registry host configuration directory, if any. */
  readonly hostsDir: string | undefined;
  /** Connections per origin of the pools made for hosts with TLS settings. */
  readonly connectionsPerHost?: number | undefined;
  /** Header and body idle timeout of those pools. */
  readonly idleTimeoutMs?: number | undefined;
  /** The proxies of those pools (the shared pool has them already). */
  readonly proxy?: ProxyRules | undefined;
  /** false: those pools read blob bodies through node:http (Tuning.directRanges). */
  readonly directRanges?: boolean | undefined;
  /** Where pools for hosts with TLS settings are kept across clients (a long-lived puller's); absent: this object's own. */
  readonly shared?: SharedPools | undefined;
}

/** Pools kept beyond one client, found by everything that made them (see RegistryConnections). */
export interface SharedPools {
  /** The pool made by `make` under `key`, made now if none is kept. */
  tlsPool(key: string, make: () => NodeHttpPool): NodeHttpPool;
}

/**
 * The endpoints of each registry, read from hosts.toml once per registry and operation and then
 * kept; the pools made for hosts with TLS settings live until close().
 */
export class Endpoints {
  /** Endpoints by `<registry> <operation>`; a failed load is forgotten so the next call reads again. */
  private readonly loaded = new Map<string, Promise<readonly Endpoint[]>>();
  /** Until when (epoch ms) a `<registry> <origin>` goes behind the other hosts. */
  private readonly demotedUntil = new Map<string, number>();
  /** Pools this object made and must close. */
  private readonly ownPools: NodeHttpPool[] = [];

  constructor(private readonly options: EndpointsOptions) {}

  /** The registry's own API endpoint for `ref` (mirrors aside). */
  upstream(ref: Reference): RegistryEndpoint {
    return registryEndpoint(ref.registry, { plainHttp: this.options.plainHttp });
  }

  /**
   * The places to ask for `op`, in order: mirrors from the hosts.toml of the hosts directory
   * (containerd's registry host configuration) that have the capability, then the registry itself
   * (or the `server` the file names); hosts demoted for straggling come after the others. Without
   * a hosts directory, just the registry. Throws INVALID_ARGUMENT when hosts.toml leaves no host
   * for `op`, or cannot be read.
   */
  async for(ref: Reference, op: Operation): Promise<readonly Endpoint[]> {
    const key = `${ref.registry} ${op}`;
    let found = this.loaded.get(key);
    if (!found) {
      found = this.load(ref, op);
      this.loaded.set(key, found);
      found.catch(() => this.loaded.delete(key));
    }
    return this.inPreferredOrder(ref, await found);
  }

  /**
   * Moves a host that served a registry too slowly (a straggling range) behind the others for a
   * while, so that a slow mirror falls back to the next host as a failing one does.
   */
  demote(ref: Reference, origin: string): void {
    this.demotedUntil.set(`${ref.registry} ${origin}`, Date.now() + DEMOTION_MS);
  }

  /** Closes the pools made for hosts with TLS settings. */
  async close(): Promise<void> {
    await Promise.all(this.ownPools.map((d) => d.close()));
  }

  private inPreferredOrder(ref: Reference, endpoints: readonly Endpoint[]): readonly Endpoint[] {
    if (endpoints.length < 2 || this.demotedUntil.size === 0) return endpoints;
    const now = Date.now();
    const slow = (ep: Endpoint) => (this.demotedUntil.get(`${ref.registry} ${ep.origin}`) ?? 0) > now;
    return [...endpoints.filter((ep) => !slow(ep)), ...endpoints.filter(slow)];
  }

  private async load(ref: Reference, op: Operation): Promise<readonly Endpoint[]> {
    const { hostsDir } = this.options;
    const own: Endpoint = {
      origin: this.upstream(ref).origin,
      prefix: '/v2',
      headers: {},
      dispatcher: this.options.dispatcher,
      credentialsFor: ref.registry,
      query: '',
    };
    if (!hostsDir) return [own];
    const hosts = await loadHostsConfig(hostsDir, ref.registry, { plainHttp: this.options.plainHttp });
    if (!hosts) return [own];
    const usable = hostsFor(hosts, op);
    if (usable.length === 0) {
      throw new FastpullError('INVALID_ARGUMENT', `${ref.registry}: the hosts configuration in ${hostsDir} offers no host that can ${op}`);
    }
    return usable.map((h) => this.endpointOf(ref, h));
  }

  private endpointOf(ref: Reference, h: RegistryHost): Endpoint {
    const headers: Record<string, string> = Object.create(null) as Record<string, string>; // names from hosts.toml, `__proto__` included
    for (const [name, values] of Object.entries(h.headers)) headers[name.toLowerCase()] = values.join(', ');
    return {
      origin: h.url.origin,
      prefix: h.url.pathname.replace(/\/+$/, ''),
      headers,
      dispatcher: this.poolFor(h),
      // A mirror is its own host: it gets the credentials stored for it, never the upstream's.
      credentialsFor: h.isServer ? ref.registry : h.url.host,
      // Mirrors serve several upstreams: they learn which one from ?ns=, as containerd sends it.
      query: h.isServer ? '' : `?ns=${encodeURIComponent(ref.registry)}`,
    };
  }

  /** The shared pool, or one of the host's own when it has TLS files, skip_verify or its own dial timeout. */
  private poolFor(h: RegistryHost): HttpPool {
    const own = h.ca.length > 0 || h.client.length > 0 || h.skipVerify || h.dialTimeoutMs !== DEFAULT_DIAL_TIMEOUT_MS;
    if (!own) return this.options.dispatcher;
    const cert = h.client[0];
    const idle = this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    // The files are read for every client, so a pool kept across clients is found by their bytes:
    // a CA or key replaced on disk makes a new pool at the next pull.
    const ca = h.ca.map((f) => readTlsFile(f, h));
    const pair = cert ? { cert: readTlsFile(cert[0], h), key: readTlsFile(cert[1] ?? cert[0], h) } : undefined;
    const make = () =>
      new NodeHttpPool({
        connections: this.options.connectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
        idleTimeoutMs: idle,
        dialTimeoutMs: h.dialTimeoutMs,
        rejectUnauthorized: !h.skipVerify,
        ...(this.options.proxy ? { proxy: this.options.proxy } : {}),
        ...(this.options.directRanges === false ? { directRanges: false } : {}),
        ...(ca.length > 0 ? { ca } : {}),
        ...(pair ?? {}),
      });
    const shared = this.options.shared;
    if (shared) {
      const hash = createHash('sha256');
      for (const b of [...ca, pair?.cert, pair?.key]) hash.update(b ? createHash('sha256').update(b).digest() : Buffer.alloc(32));
      return shared.tlsPool(`${h.url.origin} ${h.skipVerify} ${h.dialTimeoutMs} ${ca.length} ${hash.digest('hex')}`, make);
    }
    const pool = make();
    this.ownPools.push(pool);
    return pool;
  }
}

function readTlsFile(path: string, h: RegistryHost): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw fromFsError(e, `reading a TLS file that hosts.toml names for ${h.url.origin}: ${path}`, 'INVALID_ARGUMENT');
  }
}
