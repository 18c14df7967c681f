// The distribution API client: requests with auth and redirects, manifest resolution down to one
// platform's image, and verified small-blob reads. Ranged layer fetch lives in fetch.ts.
import { VERSION } from '../version.js';
import { Agent, request, type Dispatcher } from 'undici';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import { backoffMs, isRetryableStatus, parseRetryAfter, RETRY_AFTER_MAX_MS, retryDelayMs, sleep } from '../util/retry.js';
import { parseDigest, sha256Digest, verifyBytes, type Digest } from '../oci/digest.js';
import {
  parseImageConfig,
  parseManifest,
  type Descriptor,
  type ImageConfig,
  type ImageIndex,
  type ImageManifest,
} from '../oci/manifest.js';
import { MANIFEST_ACCEPT } from '../oci/mediatypes.js';
import { formatPlatform, hostPlatform, normalizePlatform, platformMatches, selectPlatform, type Platform } from '../oci/platform.js';
import { formatReference, type Reference } from '../oci/reference.js';
import { Authorizer, readCapped, type CredentialsProvider } from './auth.js';
import { registryEndpoint, type RegistryEndpoint } from './hosts.js';
import { DEFAULT_DIAL_TIMEOUT_MS, hostsFor, loadHostsConfig, type RegistryHost } from './hostsconfig.js';
import { readFileSync } from 'node:fs';

/** Manifests and indexes larger than this are refused (containerd uses the same 4 MiB cap). */
export const MANIFEST_SIZE_LIMIT = 4 * 1024 * 1024;
/** Image configs larger than this are refused: real ones are kilobytes, this leaves room for long histories. */
export const CONFIG_SIZE_LIMIT = 16 * 1024 * 1024;
/** Error bodies are read only this far: enough for the distribution error JSON. */
const ERROR_BODY_CAP = 64 * 1024;
const MAX_REDIRECTS = 5;
/** Attempts for manifest and config reads. */
const DEFAULT_ATTEMPTS = 4;
/** Connections per registry origin. 16 parallel 16 MiB ranges reached 589 MB/s on loopback (FACTS.md). */
export const DEFAULT_CONNECTIONS_PER_HOST = 16;
const USER_AGENT = `fastpull/${VERSION}`;
/** How long a host that straggled stays behind the others. */
const DEMOTION_MS = 60_000;
/** undici waits 300 s by default; a registry that sends nothing for 30 s is not coming back. */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;

/** Options of a {@link RegistryClient}. */
export interface RegistryClientOptions {
  /** Use plain HTTP for every registry (loopback registries use it anyway). */
  readonly plainHttp?: boolean;
  /** Credentials per registry; default none (anonymous, with tokens where the registry offers them). */
  readonly credentials?: CredentialsProvider;
  /** An undici dispatcher to use instead of the client's own Agent (tests, proxies). */
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
}

/** One place a registry's content is asked for: the registry itself or a mirror. */
interface Endpoint {
  readonly origin: string;
  /** Path before `<repository>/...`: `/v2`, or the host's own path with override_path. */
  readonly prefix: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly dispatcher: Dispatcher;
  /** The name the credentials provider is asked about. */
  readonly credentialsFor: string;
  readonly query: string;
}

/** Options of {@link RegistryClient.request}. */
export interface RequestOptions {
  /** What the request is for: 'resolve' (a tag) may use only hosts with that capability. Default 'pull'. */
  readonly op?: 'resolve' | 'pull';
  /** HTTP method; default GET. */
  readonly method?: 'GET' | 'HEAD';
  /** Told the origin of each host the request is sent to, in turn. */
  readonly onEndpoint?: (origin: string) => void;
  /** Extra request headers. */
  readonly headers?: Record<string, string>;
  /** Aborts the request (ABORTED). */
  readonly signal?: AbortSignal | undefined;
}

/** One platform's image, resolved and verified. */
export interface ResolvedImage {
  /** The reference that was resolved. */
  readonly reference: Reference;
  /** What the reference points to: an index or a manifest. */
  readonly target: Descriptor;
  /** The platform manifest (equal to target when the reference names a manifest). */
  readonly manifestDescriptor: Descriptor;
  /** The platform manifest, parsed. */
  readonly manifest: ImageManifest;
  /** The platform manifest's verified bytes. */
  readonly manifestBytes: Buffer;
  /** The index, when the reference names one. */
  readonly index?: ImageIndex;
  /** The index's bytes, when the reference names one. */
  readonly indexBytes?: Buffer;
  /** The image config, parsed. */
  readonly config: ImageConfig;
  /** The image config's verified bytes. */
  readonly configBytes: Buffer;
  /** The image's platform, from its config (else the platform asked for). */
  readonly platform: Platform;
}

interface FetchedManifest {
  readonly bytes: Buffer;
  readonly mediaType: string | undefined;
  readonly digest: Digest;
}

/** An entry of a referrers list: a descriptor with the artifact type of what it names. */
export interface Referrer extends Descriptor {
  /** The referring manifest's artifact type (or its config's media type). */
  readonly artifactType?: string;
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
  /** The undici dispatcher requests go through (the client's own Agent unless one was given). */
  readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly auth: Authorizer;
  private readonly userAgent: string;
  private readonly endpointCache = new Map<string, Promise<readonly Endpoint[]>>();
  private readonly demoted = new Map<string, number>();
  private readonly extraDispatchers: Dispatcher[] = [];

  constructor(private readonly options: RegistryClientOptions = {}) {
    this.userAgent = options.userAgent ?? USER_AGENT;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Agent({
        connections: options.connectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
        pipelining: 1,
        keepAliveTimeout: 10_000,
        headersTimeout: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
        bodyTimeout: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      });
    this.auth = new Authorizer(this.dispatcher, options.credentials, this.userAgent);
  }

  /** The registry's own API endpoint for `ref` (mirrors aside). */
  endpoint(ref: Reference): RegistryEndpoint {
    return registryEndpoint(ref.registry, { plainHttp: this.options.plainHttp === true });
  }

  /**
   * The places to ask for `op`, in order: mirrors from the hosts.toml of `hostsDir` (containerd's
   * registry host configuration) that have the capability, then the registry itself (or the
   * `server` the file names). Without a hosts directory, just the registry.
   */
  private async endpoints(ref: Reference, op: 'resolve' | 'pull'): Promise<readonly Endpoint[]> {
    const key = `${ref.registry} ${op}`;
    let found = this.endpointCache.get(key);
    if (!found) {
      found = this.loadEndpoints(ref, op);
      this.endpointCache.set(key, found);
      found.catch(() => this.endpointCache.delete(key));
    }
    return found;
  }

  private async loadEndpoints(ref: Reference, op: 'resolve' | 'pull'): Promise<readonly Endpoint[]> {
    const own: Endpoint = { origin: this.endpoint(ref).origin, prefix: '/v2', headers: {}, dispatcher: this.dispatcher, credentialsFor: ref.registry, query: '' };
    if (!this.options.hostsDir) return [own];
    const hosts = await loadHostsConfig(this.options.hostsDir, ref.registry, { plainHttp: this.options.plainHttp === true });
    if (!hosts) return [own];
    const usable = hostsFor(hosts, op);
    if (usable.length === 0) {
      throw new FastpullError('INVALID_ARGUMENT', `${ref.registry}: the hosts configuration in ${this.options.hostsDir} offers no host that can ${op}`);
    }
    return usable.map((h) => this.hostEndpoint(ref, h));
  }

  private hostEndpoint(ref: Reference, h: RegistryHost): Endpoint {
    const tls = h.ca.length > 0 || h.client.length > 0 || h.skipVerify || h.dialTimeoutMs !== DEFAULT_DIAL_TIMEOUT_MS;
    let dispatcher = this.dispatcher;
    if (tls) {
      const cert = h.client[0];
      dispatcher = new Agent({
        connections: this.options.connectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
        keepAliveTimeout: 10_000,
        headersTimeout: this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
        bodyTimeout: this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
        connect: {
          timeout: h.dialTimeoutMs,
          rejectUnauthorized: !h.skipVerify,
          ...(h.ca.length > 0 ? { ca: h.ca.map((f) => readFileSync(f)) } : {}),
          ...(cert ? { cert: readFileSync(cert[0]), key: readFileSync(cert[1] ?? cert[0]) } : {}),
        },
      });
      this.extraDispatchers.push(dispatcher);
    }
    const headers: Record<string, string> = Object.create(null) as Record<string, string>; // names from hosts.toml, `__proto__` included
    for (const [name, values] of Object.entries(h.headers)) headers[name.toLowerCase()] = values.join(', ');
    return {
      origin: h.url.origin,
      prefix: h.url.pathname.replace(/\/+$/, ''),
      headers,
      dispatcher,
      // A mirror is its own host: it gets the credentials stored for it, never the upstream's.
      credentialsFor: h.isServer ? ref.registry : h.url.host,
      // Mirrors serve several upstreams: they learn which one from ?ns=, as containerd sends it.
      query: h.isServer ? '' : `?ns=${encodeURIComponent(ref.registry)}`,
    };
  }

  /**
   * Sends a request for `<repository>/<path>` (under `/v2/`) with authorization, following
   * redirects, to each endpoint in turn until one answers with something other than a failure
   * (transport error, 404, 5xx); the last endpoint's answer is returned whatever it is. The
   * Authorization header goes only to the origin it was issued for, never to a redirect target on
   * another origin (blob storage, CDNs). The response body must be consumed or destroyed.
   */
  async request(ref: Reference, path: string, options: RequestOptions = {}): Promise<Dispatcher.ResponseData> {
    const endpoints = this.inPreferredOrder(ref, await this.endpoints(ref, options.op ?? 'pull'));
    for (let i = 0; ; i++) {
      const ep = endpoints[i]!;
      const last = i === endpoints.length - 1;
      options.onEndpoint?.(ep.origin);
      let res: Dispatcher.ResponseData;
      try {
        res = await this.requestAt(ref, ep, path, options);
      } catch (e) {
        if (last || (isFastpullError(e) && e.code === 'ABORTED')) throw e;
        continue;
      }
      if (!last && (res.statusCode === 404 || res.statusCode >= 500)) {
        await discard(res);
        continue;
      }
      return res;
    }
  }

  /**
   * Moves a host that served a registry too slowly (a straggling range) behind the others for a
   * while, so that a slow mirror falls back to the next host as a failing one does.
   */
  demote(ref: Reference, origin: string): void {
    this.demoted.set(`${ref.registry} ${origin}`, Date.now() + DEMOTION_MS);
  }

  private inPreferredOrder(ref: Reference, endpoints: readonly Endpoint[]): readonly Endpoint[] {
    if (endpoints.length < 2 || this.demoted.size === 0) return endpoints;
    const now = Date.now();
    const slow = (ep: Endpoint) => (this.demoted.get(`${ref.registry} ${ep.origin}`) ?? 0) > now;
    return [...endpoints.filter((ep) => !slow(ep)), ...endpoints.filter(slow)];
  }

  private async requestAt(ref: Reference, ep: Endpoint, path: string, options: RequestOptions): Promise<Dispatcher.ResponseData> {
    const scope = `repository:${ref.repository}:pull`;
    const url = new URL(`${ep.origin}${ep.prefix}/${ref.repository}/${path}${ep.query}`);
    const sendOptions: RequestOptions = { ...options, headers: { ...ep.headers, ...options.headers } };
    let retriedAuth = false;
    for (;;) {
      throwIfAborted(options.signal, `requesting ${path} from ${url.host}`);
      const auth = await this.auth.header(ep.credentialsFor, ep.origin, scope);
      const res = await this.send(ref, url, ep, auth, sendOptions);
      if (res.statusCode === 401 && !retriedAuth) {
        const challenge = headerValue(res.headers['www-authenticate']);
        await discard(res);
        retriedAuth = true;
        if (await this.auth.challenge(ep.credentialsFor, ep.origin, scope, challenge, options.signal ?? undefined)) continue;
        throw new FastpullError('UNAUTHORIZED', `${url.host}: authentication required for ${ref.repository} and no usable credentials`, {
          details: { status: 401, registry: ref.registry, host: url.host },
        });
      }
      return res;
    }
  }

  private async send(ref: Reference, first: URL, ep: Endpoint, auth: string | undefined, options: RequestOptions): Promise<Dispatcher.ResponseData> {
    let url = first;
    for (let hop = 0; ; hop++) {
      const headers: Record<string, string> = { 'user-agent': this.userAgent, 'accept-encoding': 'identity', ...options.headers };
      if (auth !== undefined && url.origin === ep.origin) headers.authorization = auth;
      let res: Dispatcher.ResponseData;
      try {
        res = await request(url, { method: options.method ?? 'GET', headers, dispatcher: ep.dispatcher, signal: options.signal ?? null });
      } catch (e) {
        if (options.signal?.aborted) throw new FastpullError('ABORTED', `requesting ${url.pathname} from ${url.host}: aborted`, { cause: e });
        throw new FastpullError('NETWORK_ERROR', `requesting ${url.pathname} from ${url.host}: ${(e as Error).message}`, { cause: e, details: { host: url.host } });
      }
      const location = headerValue(res.headers.location);
      if ([301, 302, 303, 307, 308].includes(res.statusCode) && location) {
        await discard(res);
        if (hop >= MAX_REDIRECTS) throw new FastpullError('REGISTRY_ERROR', `${ref.registry}: more than ${MAX_REDIRECTS} redirects for ${first.pathname}`);
        const next = new URL(location, url);
        if (next.protocol !== 'https:' && next.protocol !== 'http:') {
          throw new FastpullError('REGISTRY_ERROR', `${ref.registry}: redirect to unsupported scheme ${next.protocol}`);
        }
        if (url.protocol === 'https:' && next.protocol === 'http:') {
          throw new FastpullError('INSECURE_REGISTRY', `${ref.registry}: refusing a redirect from HTTPS to plain HTTP (${next.host})`);
        }
        url = next;
        continue;
      }
      return res;
    }
  }

  /**
   * Like request(), for small reads that are retried whole: transport errors, 408, 429 and 5xx are
   * tried again with back-off (or after the Retry-After the server sends, up to a minute), up to
   * `attempts` times in all.
   */
  async requestWithRetry(ref: Reference, path: string, options: RequestOptions = {}, attempts = DEFAULT_ATTEMPTS): Promise<Dispatcher.ResponseData> {
    for (let attempt = 1; ; attempt++) {
      let res: Dispatcher.ResponseData;
      try {
        res = await this.request(ref, path, options);
      } catch (e) {
        if (attempt >= attempts || !isFastpullError(e) || e.code !== 'NETWORK_ERROR') throw e;
        await sleep(backoffMs(attempt), options.signal ?? undefined);
        continue;
      }
      if (attempt >= attempts || !isRetryableStatus(res.statusCode)) return res;
      const retryAfter = parseRetryAfter(headerValue(res.headers['retry-after']));
      if ((retryAfter ?? 0) > RETRY_AFTER_MAX_MS) return res;
      await discard(res);
      await sleep(retryDelayMs(attempt, retryAfter), options.signal ?? undefined);
    }
  }

  /**
   * Runs a small read (request and whole body) again when its body fails mid-way (a connection
   * reset or an idle timeout after the headers came): requestWithRetry retries the request, this
   * the body, up to `attempts` times in all.
   */
  private async retryBody<T>(signal: AbortSignal | undefined, read: () => Promise<T>, attempts = DEFAULT_ATTEMPTS): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await read();
      } catch (e) {
        if (attempt >= attempts || !isFastpullError(e) || e.code !== 'NETWORK_ERROR' || e.details.body !== true) throw e;
        await sleep(backoffMs(attempt), signal);
      }
    }
  }

  /** Fetches a manifest or index by tag or digest, verified and size-capped. */
  async fetchManifest(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    return this.retryBody(signal, () => this.fetchManifestOnce(ref, reference, signal));
  }

  private async fetchManifestOnce(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const what = `manifest ${ref.registry}/${ref.repository}:${reference}`.replace(/:(sha\d+:)/, '@$1');
    const byTag = !reference.includes(':');
    const res = await this.requestWithRetry(ref, `manifests/${reference}`, { op: byTag ? 'resolve' : 'pull', headers: { accept: MANIFEST_ACCEPT }, signal });
    if (res.statusCode !== 200) throw await responseError(res, what);
    const length = Number(headerValue(res.headers['content-length']) ?? NaN);
    if (length > MANIFEST_SIZE_LIMIT) {
      await discard(res);
      throw new FastpullError('MANIFEST_TOO_LARGE', `${what}: ${length} bytes, over the ${MANIFEST_SIZE_LIMIT}-byte limit`, { details: { size: length } });
    }
    const bytes = await readBody(res, MANIFEST_SIZE_LIMIT, what, 'MANIFEST_TOO_LARGE', signal);
    const mediaType = headerValue(res.headers['content-type']);
    let digest: Digest;
    if (reference.includes(':')) {
      digest = parseDigest(reference).digest;
      verifyBytes(bytes, digest, what);
    } else {
      const claimed = headerValue(res.headers['docker-content-digest']);
      if (claimed !== undefined) {
        let want: Digest;
        try {
          want = parseDigest(claimed).digest;
        } catch (e) {
          throw new FastpullError('REGISTRY_ERROR', `${what}: registry sent an invalid Docker-Content-Digest`, { cause: e });
        }
        verifyBytes(bytes, want, `${what} (against Docker-Content-Digest)`);
      }
      digest = sha256Digest(bytes);
    }
    return { bytes, mediaType, digest };
  }

  /**
   * The referrers of a manifest (OCI distribution spec): the index that GET /v2/<name>/referrers/<digest>
   * returns, or, where the registry lacks that API (404, 400, 405), the index tagged
   * `<alg>-<hex>` (the referrers tag schema); an empty list when neither exists. Each entry's
   * `artifactType` is kept; `artifactType` filters on it.
   */
  async fetchReferrers(ref: Reference, digest: Digest, artifactType?: string, signal?: AbortSignal): Promise<Referrer[]> {
    const what = `referrers of ${digest} in ${ref.registry}/${ref.repository}`;
    const query = artifactType ? `?artifactType=${encodeURIComponent(artifactType)}` : '';
    const res = await this.requestWithRetry(ref, `referrers/${digest}${query}`, { op: 'pull', headers: { accept: 'application/vnd.oci.image.index.v1+json' }, signal });
    let bytes: Buffer | undefined;
    if (res.statusCode === 200) {
      bytes = await readBody(res, MANIFEST_SIZE_LIMIT, what, 'MANIFEST_TOO_LARGE', signal);
    } else if (res.statusCode === 404 || res.statusCode === 400 || res.statusCode === 405) {
      await discard(res);
      try {
        bytes = (await this.fetchManifest(ref, digest.replace(':', '-'), signal)).bytes;
      } catch (e) {
        if (isFastpullError(e) && e.code === 'NOT_FOUND') return [];
        throw e;
      }
    } else {
      throw await responseError(res, what);
    }
    let doc: unknown;
    try {
      doc = JSON.parse(bytes.toString('utf8'));
    } catch (e) {
      throw new FastpullError('INVALID_MANIFEST', `${what}: not JSON`, { cause: e });
    }
    const manifests = (doc as { manifests?: unknown }).manifests;
    if (!Array.isArray(manifests)) throw new FastpullError('INVALID_MANIFEST', `${what}: no manifests list`);
    const out: Referrer[] = [];
    for (const m of manifests as Record<string, unknown>[]) {
      if (typeof m !== 'object' || m === null || typeof m.digest !== 'string' || typeof m.mediaType !== 'string' || !Number.isSafeInteger(m.size)) continue;
      const type = typeof m.artifactType === 'string' ? m.artifactType : undefined;
      if (artifactType && type !== artifactType) continue;
      let d: Digest;
      try {
        d = parseDigest(m.digest).digest;
      } catch {
        continue;
      }
      const annotations = typeof m.annotations === 'object' && m.annotations !== null ? (m.annotations as Record<string, string>) : undefined;
      out.push({ mediaType: m.mediaType, digest: d, size: m.size as number, ...(type ? { artifactType: type } : {}), ...(annotations ? { annotations } : {}) });
    }
    return out;
  }

  /** Reads a small blob (a config) into memory, verifying size and digest. */
  async fetchBlobBytes(ref: Reference, desc: Descriptor, limit: number, signal?: AbortSignal): Promise<Buffer> {
    const what = `blob ${desc.digest} of ${ref.registry}/${ref.repository}`;
    if (desc.size > limit) throw new FastpullError('MANIFEST_TOO_LARGE', `${what}: ${desc.size} bytes, over the ${limit}-byte limit`);
    return this.retryBody(signal, () => this.fetchBlobBytesOnce(ref, desc, what, signal));
  }

  private async fetchBlobBytesOnce(ref: Reference, desc: Descriptor, what: string, signal?: AbortSignal): Promise<Buffer> {
    const res = await this.requestWithRetry(ref, `blobs/${desc.digest}`, { signal });
    if (res.statusCode !== 200) throw await responseError(res, what);
    const length = headerValue(res.headers['content-length']);
    if (length !== undefined && Number(length) !== desc.size) {
      await discard(res);
      throw new FastpullError('SIZE_MISMATCH', `${what}: Content-Length ${length}, descriptor says ${desc.size}`, { details: { want: desc.size, got: Number(length) } });
    }
    const bytes = await readBody(res, desc.size, what, 'REGISTRY_ERROR', signal).catch((e: unknown) => {
      // Only the cap is the descriptor's business; a broken connection stays NETWORK_ERROR.
      if (isFastpullError(e) && e.code === 'REGISTRY_ERROR' && e.details.cap !== undefined) {
        throw new FastpullError('SIZE_MISMATCH', `${what}: more bytes than the descriptor's ${desc.size}`, { cause: e, details: { want: desc.size } });
      }
      throw e;
    });
    if (bytes.length !== desc.size) {
      throw new FastpullError('SIZE_MISMATCH', `${what}: got ${bytes.length} bytes, descriptor says ${desc.size}`, { details: { want: desc.size, got: bytes.length } });
    }
    verifyBytes(bytes, desc.digest, what);
    return bytes;
  }

  /**
   * Resolves a reference to one platform's manifest and config: follows an index to the
   * platform's manifest, verifies everything fetched by digest, and checks that the config lists
   * one diffID per layer.
   */
  async resolve(ref: Reference, options: { platform?: Platform; signal?: AbortSignal } = {}): Promise<ResolvedImage> {
    const platform = normalizePlatform(options.platform ?? hostPlatform());
    const name = formatReference(ref);
    const top = await this.fetchManifest(ref, ref.digest ?? ref.tag ?? 'latest', options.signal);
    const parsed = parseManifest(top.bytes, top.mediaType, `manifest of ${name}`);
    const target: Descriptor = { mediaType: parsed.kind === 'index' ? parsed.index.mediaType : parsed.manifest.mediaType, digest: top.digest, size: top.bytes.length };

    let manifest: ImageManifest;
    let manifestBytes: Buffer;
    let manifestDescriptor: Descriptor;
    let index: ImageIndex | undefined;
    if (parsed.kind === 'index') {
      index = parsed.index;
      const chosen = selectPlatform(platform, index.manifests);
      if (!chosen) {
        const offered = index.manifests.filter((m) => m.platform).map((m) => formatPlatform(m.platform!));
        throw new FastpullError('PLATFORM_NOT_FOUND', `${name}: no image for ${formatPlatform(platform)} (the index offers ${offered.join(', ') || 'no platforms'})`, {
          details: { platform: formatPlatform(platform), offered },
        });
      }
      if (chosen.size > MANIFEST_SIZE_LIMIT) throw new FastpullError('MANIFEST_TOO_LARGE', `${name}: platform manifest of ${chosen.size} bytes`);
      const child = await this.fetchManifest(ref, chosen.digest, options.signal);
      if (child.bytes.length !== chosen.size) {
        throw new FastpullError('SIZE_MISMATCH', `${name}: platform manifest is ${child.bytes.length} bytes, index says ${chosen.size}`);
      }
      const inner = parseManifest(child.bytes, child.mediaType ?? chosen.mediaType, `manifest ${chosen.digest} of ${name}`);
      if (inner.kind !== 'manifest') throw new FastpullError('INVALID_MANIFEST', `${name}: index entry ${chosen.digest} is itself an index`);
      manifest = inner.manifest;
      manifestBytes = child.bytes;
      manifestDescriptor = { mediaType: manifest.mediaType, digest: chosen.digest, size: chosen.size, ...(chosen.platform ? { platform: chosen.platform } : {}) };
    } else {
      manifest = parsed.manifest;
      manifestBytes = top.bytes;
      manifestDescriptor = target;
    }

    const configBytes = await this.fetchBlobBytes(ref, manifest.config, CONFIG_SIZE_LIMIT, options.signal);
    const config = parseImageConfig(configBytes, `config ${manifest.config.digest} of ${name}`, manifest.config.mediaType);
    if (config.rootfs.diff_ids.length !== manifest.layers.length) {
      throw new FastpullError(
        'INVALID_MANIFEST',
        `${name}: manifest lists ${manifest.layers.length} layers but the config lists ${config.rootfs.diff_ids.length} diffIDs`,
      );
    }
    const imagePlatform: Platform = { os: config.os, architecture: config.architecture, ...(config.variant ? { variant: config.variant } : {}) };
    if (!index && config.os && config.architecture && !platformMatches(platform, imagePlatform)) {
      throw new FastpullError('PLATFORM_NOT_FOUND', `${name}: the image is for ${formatPlatform(imagePlatform)}, not ${formatPlatform(platform)}`, {
        details: { platform: formatPlatform(platform), offered: [formatPlatform(imagePlatform)] },
      });
    }
    return {
      reference: ref,
      target,
      manifestDescriptor,
      manifest,
      manifestBytes,
      ...(index ? { index, indexBytes: top.bytes } : {}),
      config,
      configBytes,
      platform: config.os && config.architecture ? normalizePlatform(imagePlatform) : platform,
    };
  }

  /** Closes the client's connections (only those it owns). */
  async close(): Promise<void> {
    await Promise.all(this.extraDispatchers.map((d) => d.close()));
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}

export function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Reads a whole small body (capped). A transport failure mid-body (reset, idle timeout) is
 * NETWORK_ERROR with `details.body`, which the small reads retry; an abort is ABORTED.
 */
async function readBody(res: Dispatcher.ResponseData, cap: number, what: string, code: 'MANIFEST_TOO_LARGE' | 'REGISTRY_ERROR', signal: AbortSignal | undefined): Promise<Buffer> {
  try {
    return await readCapped(res.body, cap, what, code);
  } catch (e) {
    if (isFastpullError(e)) throw e;
    res.body.destroy();
    if (signal?.aborted) throw new FastpullError('ABORTED', `${what}: aborted`, { cause: e });
    throw new FastpullError('NETWORK_ERROR', `${what}: connection failed while reading the response: ${(e as Error).message}`, { cause: e, details: { body: true } });
  }
}

export async function discard(res: Dispatcher.ResponseData): Promise<void> {
  try {
    await res.body.dump({ limit: ERROR_BODY_CAP });
  } catch {
    // The connection is being dropped anyway.
  }
}

/** Turns a non-success response into the matching error, reading the distribution error body (capped). */
export async function responseError(res: Dispatcher.ResponseData, what: string): Promise<FastpullError> {
  let detail = '';
  try {
    const body = await readCapped(res.body, ERROR_BODY_CAP, what);
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    const first = parsed.errors?.[0];
    if (first) detail = `: ${[first.code, first.message].filter(Boolean).join(' ')}`.slice(0, 300);
  } catch {
    await discard(res);
  }
  const status = res.statusCode;
  const details = { status };
  switch (status) {
    case 401:
      return new FastpullError('UNAUTHORIZED', `${what}: unauthorized (HTTP 401)${detail}`, { details });
    case 403:
      return new FastpullError('DENIED', `${what}: access denied (HTTP 403)${detail}`, { details });
    case 404:
      return new FastpullError('NOT_FOUND', `${what}: not found${detail}`, { details });
    case 429: {
      const retryAfter = headerValue(res.headers['retry-after']);
      return new FastpullError('RATE_LIMITED', `${what}: rate limited by the registry (HTTP 429)${retryAfter ? `, retry after ${retryAfter}` : ''}${detail}`, {
        details: { status, ...(retryAfter ? { retryAfter } : {}) },
      });
    }
    default:
      return new FastpullError('REGISTRY_ERROR', `${what}: registry answered HTTP ${status}${detail}`, { details });
  }
}
