// Sending a request for a reference: to each endpoint in turn, with authorization (a 401 challenge
// answered once), following redirects without carrying the Authorization header to another
// origin, and for small reads, retried with back-off or after the Retry-After the server sends.
import type { RegistryResponse } from './message.js';
import { sendRequest } from './undici.js';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Reference } from '../oci/reference.js';
import { backoffMs, isRetryableStatus, parseRetryAfter, RETRY_AFTER_MAX_MS, retryDelayMs, sleep } from '../util/retry.js';
import type { Authorizer } from './auth.js';
import { DEFAULT_ATTEMPTS, MAX_REDIRECTS } from './defaults.js';
import type { Endpoint, Endpoints, Operation } from './endpoints.js';
import { discard, headerValue } from './response.js';
import { ProxyRefused } from './tunnel.js';

/** Options of {@link RegistryClient.request}. */
export interface RequestOptions {
  /** What the request is for: 'resolve' (a tag) may use only hosts with that capability. Default 'pull'. */
  readonly op?: Operation;
  /** HTTP method; default GET. */
  readonly method?: 'GET' | 'HEAD';
  /** Told the origin of each host the request is sent to, in turn. */
  readonly onEndpoint?: (origin: string) => void;
  /** Extra request headers. */
  readonly headers?: Record<string, string>;
  /** Aborts the request (ABORTED). */
  readonly signal?: AbortSignal | undefined;
  /**
   * A GET of a blob's bytes, whose body the caller writes at its offsets: the client's own
   * connections may then answer a 200 or 206 with a body to take through the response's `direct`
   * (read off the socket in place, see directhttp.ts) instead of its `body`.
   */
  readonly blob?: boolean;
}

/** What the reads of manifests, configs and referrers need of a transport. */
export interface Requester {
  /** A request retried whole on transport errors, 408, 429 and 5xx; see {@link Transport.requestWithRetry}. */
  requestWithRetry(ref: Reference, path: string, options?: RequestOptions, attempts?: number): Promise<RegistryResponse>;
}

const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** Requests under `/v2/<repository>/` of a reference's registry, through its endpoints. */
export class Transport implements Requester {
  constructor(
    private readonly endpoints: Endpoints,
    private readonly auth: Authorizer,
    private readonly userAgent: string,
  ) {}

  /**
   * Sends a request for `<repository>/<path>` with authorization, following redirects, to each
   * endpoint in turn until one answers with something other than a failure (transport error, 404,
   * 5xx); the last endpoint's answer is returned whatever it is. The Authorization header goes
   * only to the origin it was issued for, never to a redirect target on another origin (blob
   * storage, CDNs). The response body must be consumed or destroyed.
   */
  async request(ref: Reference, path: string, options: RequestOptions = {}): Promise<RegistryResponse> {
    const endpoints = await this.endpoints.for(ref, options.op ?? 'pull');
    for (let i = 0; ; i++) {
      const ep = endpoints[i]!;
      const last = i === endpoints.length - 1;
      options.onEndpoint?.(ep.origin);
      let res: RegistryResponse;
      try {
        res = await new EndpointRequest(this.auth, this.userAgent, ref, ep, path, options).run();
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
   * Like request(), for small reads that are retried whole: transport errors, 408, 429 and 5xx are
   * tried again with back-off (or after the Retry-After the server sends, up to a minute), up to
   * `attempts` times in all. A longer Retry-After, or the last attempt, returns the response.
   */
  async requestWithRetry(ref: Reference, path: string, options: RequestOptions = {}, attempts = DEFAULT_ATTEMPTS): Promise<RegistryResponse> {
    const retry = new WholeRetry(attempts, options.signal);
    for (;;) {
      let res: RegistryResponse;
      try {
        res = await this.request(ref, path, options);
      } catch (e) {
        await retry.onRequestError(e);
        continue;
      }
      if (await retry.onResponse(res)) return res;
    }
  }
}

/**
 * Runs a small read (request and whole body) again when its body fails mid-way (a connection
 * reset or an idle timeout after the headers came): requestWithRetry retries the request, this
 * the body, up to `attempts` times in all.
 */
export async function retryBody<T>(signal: AbortSignal | undefined, read: () => Promise<T>, attempts = DEFAULT_ATTEMPTS): Promise<T> {
  const retry = new WholeRetry(attempts, signal);
  for (;;) {
    try {
      return await read();
    } catch (e) {
      await retry.onBodyError(e);
    }
  }
}

/** The state of a read retried whole: which attempt this is. Each event waits, or ends the read. */
class WholeRetry {
  /** The attempt under way, from 1. */
  private attempt = 1;

  constructor(
    private readonly attempts: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** The request failed before a response: rethrows unless it is a transport error with attempts left, else waits. */
  async onRequestError(e: unknown): Promise<void> {
    if (this.attempt >= this.attempts || !isFastpullError(e) || e.code !== 'NETWORK_ERROR') throw e;
    // A proxy that refused the tunnel (403, 407) refuses it again: only its 5xx may pass.
    if (typeof e.details.proxyStatus === 'number' && e.details.proxyStatus < 500) throw e;
    await sleep(backoffMs(this.attempt++), this.signal);
  }

  /** A response came: true when it is the caller's; false once it is dropped and the wait for the next attempt is over. */
  async onResponse(res: RegistryResponse): Promise<boolean> {
    if (this.attempt >= this.attempts || !isRetryableStatus(res.statusCode)) return true;
    const retryAfter = parseRetryAfter(headerValue(res.headers['retry-after']));
    // A server that asks for a longer pause than we wait is answered with its response now.
    if ((retryAfter ?? 0) > RETRY_AFTER_MAX_MS) return true;
    await discard(res);
    await sleep(retryDelayMs(this.attempt++, retryAfter), this.signal);
    return false;
  }

  /** The body failed mid-way (NETWORK_ERROR with `details.body`): waits for the next attempt, or rethrows. */
  async onBodyError(e: unknown): Promise<void> {
    if (this.attempt >= this.attempts || !isFastpullError(e) || e.code !== 'NETWORK_ERROR' || e.details.body !== true) throw e;
    await sleep(backoffMs(this.attempt++), this.signal);
  }
}

/**
 * One request at one endpoint: sent with the Authorization known for the endpoint, answered once
 * when it draws a 401 challenge, and followed through redirects.
 */
class EndpointRequest {
  /** Where the request starts, and where it starts again after a challenge. */
  private readonly first: URL;
  /** The scope tokens are asked for. */
  private readonly scope: string;
  /** Headers of every hop: the endpoint's from hosts.toml, then the caller's. */
  private readonly headers: Record<string, string>;
  /** Where the next hop goes. */
  private url: URL;
  /** Redirects followed since the last start. */
  private hops = 0;
  /** A 401 has been answered: a second one is the caller's. */
  private challenged = false;
  /** The Authorization header for the endpoint's origin, if one is known. */
  private authorization: string | undefined;

  constructor(
    private readonly auth: Authorizer,
    private readonly userAgent: string,
    private readonly ref: Reference,
    private readonly ep: Endpoint,
    private readonly path: string,
    private readonly options: RequestOptions,
  ) {
    this.first = new URL(`${ep.origin}${ep.prefix}/${ref.repository}/${path}${ep.query}`);
    this.url = this.first;
    this.scope = `repository:${ref.repository}:pull`;
    this.headers = { 'user-agent': userAgent, 'accept-encoding': 'identity', ...ep.headers, ...options.headers };
  }

  /** Sends the request and answers challenges and redirects until a response is the caller's. */
  async run(): Promise<RegistryResponse> {
    await this.start();
    for (;;) {
      const res = await this.send();
      if (res.statusCode === 401 && !this.challenged) {
        await this.onUnauthorized(res);
        continue;
      }
      const location = headerValue(res.headers.location);
      if (REDIRECT_STATUSES.has(res.statusCode) && location) {
        await this.onRedirect(res, location);
        continue;
      }
      return res;
    }
  }

  private async start(): Promise<void> {
    throwIfAborted(this.options.signal, `requesting ${this.path} from ${this.first.host}`);
    this.url = this.first;
    this.hops = 0;
    this.authorization = await this.auth.header(this.ep.credentialsFor, this.ep.origin, this.scope);
  }

  private async send(): Promise<RegistryResponse> {
    const url = this.url;
    const headers = { ...this.headers };
    if (this.authorization !== undefined && url.origin === this.ep.origin) headers.authorization = this.authorization;
    try {
      return await sendRequest(url, {
        method: this.options.method ?? 'GET',
        headers,
        dispatcher: this.ep.dispatcher,
        signal: this.options.signal ?? null,
        blob: this.options.blob === true,
      });
    } catch (e) {
      if (this.options.signal?.aborted) throw new FastpullError('ABORTED', `requesting ${url.pathname} from ${url.host}: aborted`, { cause: e });
      // A proxy setting that cannot be used is the user's to fix, not the network's.
      if (isFastpullError(e)) throw e;
      const proxy = e instanceof ProxyRefused ? { proxy: e.proxy, proxyStatus: e.status } : {};
      throw new FastpullError('NETWORK_ERROR', `requesting ${url.pathname} from ${url.host}: ${(e as Error).message}`, {
        cause: e,
        details: { host: url.host, ...proxy },
      });
    }
  }

  /** A 401: the challenge is answered (a token, or Basic credentials) and the request starts over, or it fails UNAUTHORIZED. */
  private async onUnauthorized(res: RegistryResponse): Promise<void> {
    const challenge = headerValue(res.headers['www-authenticate']);
    await discard(res);
    this.challenged = true;
    const { credentialsFor, origin } = this.ep;
    if (!(await this.auth.challenge(credentialsFor, origin, this.scope, challenge, this.options.signal ?? undefined, this.ep.dispatcher))) {
      throw new FastpullError('UNAUTHORIZED', `${this.first.host}: authentication required for ${this.ref.repository} and no usable credentials`, {
        details: { status: 401, registry: this.ref.registry, host: this.first.host },
      });
    }
    await this.start();
  }

  /** A redirect: followed to http(s) only, never from HTTPS down to plain HTTP, and not forever. */
  private async onRedirect(res: RegistryResponse, location: string): Promise<void> {
    await discard(res);
    const { registry } = this.ref;
    if (this.hops >= MAX_REDIRECTS) throw new FastpullError('REGISTRY_ERROR', `${registry}: more than ${MAX_REDIRECTS} redirects for ${this.first.pathname}`);
    let next: URL;
    try {
      next = new URL(location, this.url);
    } catch (e) {
      throw new FastpullError('REGISTRY_ERROR', `${registry}: redirect to an invalid Location ${JSON.stringify(location.slice(0, 200))}`, { cause: e });
    }
    if (next.protocol !== 'https:' && next.protocol !== 'http:') {
      throw new FastpullError('REGISTRY_ERROR', `${registry}: redirect to unsupported scheme ${next.protocol}`);
    }
    if (this.url.protocol === 'https:' && next.protocol === 'http:') {
      throw new FastpullError('INSECURE_REGISTRY', `${registry}: refusing a redirect from HTTPS to plain HTTP (${next.host})`);
    }
    this.hops++;
    this.url = next;
  }
}
