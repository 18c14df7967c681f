// The distribution API client: one object that holds a puller's connections, tokens and mirrors,
// and joins its parts: endpoints.ts (which hosts), transport.ts (auth, redirects, retries),
// resolver.ts (manifests, configs, platforms) and referrers.ts. Ranged layer fetch is fetch.ts.
import type { Dispatcher } from 'undici';
import { NodeHttpPool } from './nodehttp.js';
import type { RegistryResponse } from './message.js';
import type { HttpPool } from './undici.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Platform } from '../oci/platform.js';
import type { Reference } from '../oci/reference.js';
import { Authorizer, type CredentialsProvider } from './auth.js';
import { DEFAULT_ATTEMPTS, DEFAULT_CONNECTIONS_PER_HOST, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_USER_AGENT, KEEP_ALIVE_TIMEOUT_MS } from './defaults.js';
import { checkMetadataTimeout, DEFAULT_METADATA_TIMEOUT_MS } from './deadline.js';
import { Endpoints } from './endpoints.js';
import { FastpullError } from '../errors.js';
import { ProxyRules, type ProxySettings } from './proxy.js';
import type { RegistryConnections } from './shared.js';
import type { ByteThrottle } from './ratelimit.js';
import { DEFAULT_DIAL_TIMEOUT_MS } from './hostsconfig.js';
import type { RegistryEndpoint } from './hosts.js';
import { fetchReferrers, type Referrer } from './referrers.js';
import { Resolver, type FetchedManifest, type ResolvedImage } from './resolver.js';
import { Transport, type RequestOptions } from './transport.js';
import type { Tuning } from '../tuning.js';

// The types of the client's signatures, for importers of the client alone.
export type { Referrer } from './referrers.js';
export type { FetchedManifest, ResolvedImage } from './resolver.js';
export type { RequestOptions } from './transport.js';

/** Options of a {@link RegistryClient}. */
export interface RegistryClientOptions {
  /** Use plain HTTP for every registry (loopback registries use it anyway). */
  readonly plainHttp?: boolean;
  /** Credentials per registry; default none (anonymous, with tokens where the registry offers them). */
  readonly credentials?: CredentialsProvider;
  /**
   * An undici Dispatcher (an Agent, Pool or Client of the `undici` package, called through its
   * request API) that every request goes through instead of the client's own connections: for a
   * transport of the caller's own. It costs more CPU per byte of a blob than the client's own
   * connections (docs/architecture.md), and proxies need none (`proxy`). The client does not close it.
   */
  readonly dispatcher?: Dispatcher;
  /** Connections per registry origin of the client's own Agent; default {@link DEFAULT_CONNECTIONS_PER_HOST}. */
  readonly connectionsPerHost?: number;
  /** The User-Agent header; default `fastpull/<VERSION>`. */
  readonly userAgent?: string;
  /**
   * A directory of containerd-style registry host configuration (`<dir>/<host>/hosts.toml`):
   * mirrors tried in order before the registry, as containerd's `config_path`.
   */
  readonly hostsDir?: string;
  /**
   * A response whose headers, or next body bytes, take longer than this fails (and is retried).
   * Blob ranges are watched more closely by the straggler floor.
   */
  readonly idleTimeoutMs?: number;
  /**
   * The proxies of the client's own connections (see proxyEnvironment(): HTTP_PROXY, HTTPS_PROXY,
   * NO_PROXY as containerd reads them); default none. A caller's dispatcher makes its own way.
   */
  readonly proxy?: ProxySettings;
  /**
   * A manifest, index, config or referrers list not read whole within this many milliseconds, its
   * retries included, fails NETWORK_ERROR (`details.timeoutMs`); default {@link DEFAULT_METADATA_TIMEOUT_MS}.
   */
  readonly metadataTimeoutMs?: number;
  /** Measuring knobs (tuning.ts): the client reads `directRanges`; default none. */
  readonly tuning?: Pick<Tuning, 'directRanges'>;
  /**
   * The rate limit that manifests, indexes, configs and referrers lists read through the client
   * draw from (a pull's; see throttleOf()); blob ranges take theirs from fetchBlob's options. Absent: none.
   */
  readonly throttle?: ByteThrottle;
  /**
   * Connections (and, for the same `credentials` provider, tokens) shared with other clients, kept
   * by a process that pulls many times (see {@link RegistryConnections}). They bring their own
   * `proxy`, `connectionsPerHost`, `idleTimeoutMs`, `userAgent` and `tuning`, so those options are
   * not read; `dispatcher` cannot be given with them. close() leaves them open.
   */
  readonly connections?: RegistryConnections;
}

/** What an operation that runs once (a pull, a verification) says of the registry client it builds. */
export type OwnClientOptions = Pick<
  RegistryClientOptions,
  'plainHttp' | 'credentials' | 'hostsDir' | 'proxy' | 'metadataTimeoutMs' | 'tuning' | 'throttle' | 'connections'
>;

/**
 * The client an operation builds for itself when its caller gives none, from the registry options
 * it was given: one place, so that every such operation honours each of them.
 * @example const client = clientFor({ plainHttp: true, proxy: proxyEnvironment(process.env) });
 */
export function clientFor(o: OwnClientOptions): RegistryClient {
  return new RegistryClient({
    plainHttp: o.plainHttp === true,
    ...(o.credentials ? { credentials: o.credentials } : {}),
    ...(o.hostsDir ? { hostsDir: o.hostsDir } : {}),
    ...(o.proxy ? { proxy: o.proxy } : {}),
    ...(o.metadataTimeoutMs !== undefined ? { metadataTimeoutMs: o.metadataTimeoutMs } : {}),
    ...(o.tuning ? { tuning: o.tuning } : {}),
    ...(o.throttle ? { throttle: o.throttle } : {}),
    ...(o.connections ? { connections: o.connections } : {}),
  });
}

/**
 * A client for OCI distribution registries: auth (Basic and Bearer tokens), redirects, mirrors from
 * hosts.toml, retries, and verified reads of manifests and configs. Reuse one for many requests
 * (it keeps connections and tokens), and close it when done. Its methods throw the registry error
 * codes: NOT_FOUND, UNAUTHORIZED, DENIED, RATE_LIMITED, REGISTRY_ERROR, NETWORK_ERROR,
 * INSECURE_REGISTRY, and for what they read DIGEST_MISMATCH, SIZE_MISMATCH, MANIFEST_TOO_LARGE,
 * INVALID_MANIFEST, UNSUPPORTED_MEDIA_TYPE and PLATFORM_NOT_FOUND.
 * @example
 * const client = new RegistryClient({ plainHttp: true });
 * const image = await client.resolve(parseReference('127.0.0.1:5000/app:1'), { platform: hostPlatform() });
 */
export class RegistryClient {
  /** Where requests go: the client's own connections (node:http and node:https), or the undici dispatcher it was given. */
  readonly dispatcher: HttpPool;
  private readonly ownsDispatcher: boolean;
  private readonly endpoints: Endpoints;
  private readonly transport: Transport;
  private readonly resolver: Resolver;

  constructor(options: RegistryClientOptions = {}) {
    const shared = options.connections;
    if (shared && options.dispatcher) throw new FastpullError('INVALID_ARGUMENT', 'a registry client takes shared connections or a dispatcher, not both');
    const idle = shared?.idleTimeoutMs ?? options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    const userAgent = shared?.userAgent ?? options.userAgent ?? DEFAULT_USER_AGENT;
    const connectionsPerHost = shared?.connectionsPerHost ?? options.connectionsPerHost;
    const directRanges = shared ? shared.directRanges : options.tuning?.directRanges;
    this.ownsDispatcher = options.dispatcher === undefined && shared === undefined;
    // Settings that proxy nothing leave the pools as they are without them.
    const rules = !shared && options.proxy ? new ProxyRules(options.proxy) : undefined;
    const proxy = shared ? shared.proxy : rules?.active ? rules : undefined;
    this.dispatcher =
      options.dispatcher ??
      shared?.pool ??
      new NodeHttpPool({
        connections: connectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
        idleTimeoutMs: idle,
        dialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS,
        ...(proxy ? { proxy } : {}),
        ...(directRanges === false ? { directRanges: false } : {}),
      });
    this.endpoints = new Endpoints({
      dispatcher: this.dispatcher,
      plainHttp: options.plainHttp === true,
      hostsDir: options.hostsDir,
      connectionsPerHost,
      idleTimeoutMs: shared ? idle : options.idleTimeoutMs,
      proxy,
      directRanges,
      shared,
    });
    const auth = shared ? shared.authorizer(options.credentials) : new Authorizer(this.dispatcher, options.credentials, userAgent);
    this.transport = new Transport(this.endpoints, auth, userAgent);
    this.resolver = new Resolver(this.transport, checkMetadataTimeout(options.metadataTimeoutMs ?? DEFAULT_METADATA_TIMEOUT_MS), options.throttle);
  }

  /** The registry's own API endpoint for `ref` (mirrors aside). */
  endpoint(ref: Reference): RegistryEndpoint {
    return this.endpoints.upstream(ref);
  }

  /**
   * Sends a request for `<repository>/<path>` (under `/v2/`) with authorization, following
   * redirects, to each endpoint in turn until one answers with something other than a failure
   * (transport error, 404, 5xx); the last endpoint's answer is returned whatever it is. The
   * Authorization header goes only to the origin it was issued for, never to a redirect target on
   * another origin (blob storage, CDNs). The response body must be consumed or destroyed.
   */
  async request(ref: Reference, path: string, options: RequestOptions = {}): Promise<RegistryResponse> {
    return this.transport.request(ref, path, options);
  }

  /**
   * Moves a host that served a registry too slowly (a straggling range) behind the others for a
   * while, so that a slow mirror falls back to the next host as a failing one does.
   */
  demote(ref: Reference, origin: string): void {
    this.endpoints.demote(ref, origin);
  }

  /**
   * Like request(), for small reads that are retried whole: transport errors, 408, 429 and 5xx are
   * tried again with back-off (or after the Retry-After the server sends, up to a minute), up to
   * `attempts` times in all.
   */
  async requestWithRetry(ref: Reference, path: string, options: RequestOptions = {}, attempts = DEFAULT_ATTEMPTS): Promise<RegistryResponse> {
    return this.transport.requestWithRetry(ref, path, options, attempts);
  }

  /** Fetches a manifest or index by tag or digest, verified and size-capped. */
  async fetchManifest(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    return this.resolver.fetchManifest(ref, reference, signal);
  }

  /**
   * The referrers of a manifest (OCI distribution spec): the index that GET /v2/<name>/referrers/<digest>
   * returns, or, where the registry lacks that API (404, 400, 405), the index tagged
   * `<alg>-<hex>` (the referrers tag schema); an empty list when neither exists. Each entry's
   * `artifactType` is kept; `artifactType` filters on it.
   */
  async fetchReferrers(ref: Reference, digest: Digest, artifactType?: string, signal?: AbortSignal): Promise<Referrer[]> {
    return this.resolver.withinDeadline(`referrers of ${digest} in ${ref.registry}/${ref.repository}`, signal, (s) =>
      fetchReferrers(this.transport, this.resolver, ref, digest, artifactType, s),
    );
  }

  /** Reads a small blob (a config) into memory, verifying size and digest. */
  async fetchBlobBytes(ref: Reference, desc: Descriptor, limit: number, signal?: AbortSignal): Promise<Buffer> {
    return this.resolver.fetchBlobBytes(ref, desc, limit, signal);
  }

  /**
   * Resolves a reference to one platform's manifest and config: follows an index to the
   * platform's manifest, verifies everything fetched by digest, and checks that the config lists
   * one diffID per layer.
   */
  async resolve(ref: Reference, options: { platform?: Platform; signal?: AbortSignal } = {}): Promise<ResolvedImage> {
    return this.resolver.resolve(ref, options);
  }

  /** Closes the client's connections (only those it owns: not a dispatcher or shared connections it was given). */
  async close(): Promise<void> {
    await this.endpoints.close();
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}
