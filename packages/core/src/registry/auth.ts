// Registry authentication: WWW-Authenticate challenges, Basic credentials and the Bearer token flow
// (distribution's token spec). Credentials only ever go to the registry that owns them or to the
// token realm it names, and never over plain HTTP to a non-loopback host.
import type { ByteThrottle } from './ratelimit.js';
import type { RegistryResponse } from './message.js';
import { type HttpPool, sendRequest } from './undici.js';
import { ProxyRefused } from './tunnel.js';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import { isLoopbackHost } from './hosts.js';

/** A user name and password (or token) for one registry. */
export interface Credentials {
  /** The user name; `<token>` when `password` is an identity token. */
  readonly username: string;
  /** The password, token or identity token. Never logged, never in an error. */
  readonly password: string;
}

/** Looks up credentials for a registry name (as in references, e.g. `docker.io`). */
export type CredentialsProvider = (registry: string) => Credentials | undefined | Promise<Credentials | undefined>;

/** One challenge of a WWW-Authenticate header. */
export interface Challenge {
  /** Lowercase scheme, e.g. `bearer`, `basic`. */
  readonly scheme: string;
  /** Its parameters by lowercase name, e.g. `realm`, `service`, `scope`. */
  readonly params: Readonly<Record<string, string>>;
}

/**
 * Parses a WWW-Authenticate header (RFC 7235) into challenges. Tolerant of spacing; quoted strings
 * may hold commas and escaped quotes.
 * @example parseChallenges('Bearer realm="https://auth/token",service="reg"')
 */
export function parseChallenges(header: string): Challenge[] {
  const out: Challenge[] = [];
  let i = 0;
  const n = Math.min(header.length, 16 * 1024);
  const skipSpace = () => {
    while (i < n && (header[i] === ' ' || header[i] === '\t' || header[i] === ',')) i++;
  };
  const token = () => {
    const start = i;
    while (i < n && /[A-Za-z0-9!#$%&'*+.^_`|~-]/.test(header[i]!)) i++;
    return header.slice(start, i);
  };
  let current: { scheme: string; params: Record<string, string> } | undefined;
  while (i < n) {
    skipSpace();
    const start = i;
    const word = token();
    if (word === '') {
      i++;
      continue;
    }
    let j = i;
    while (j < n && header[j] === ' ') j++;
    if (header[j] === '=' && current) {
      i = j + 1;
      while (i < n && header[i] === ' ') i++;
      let value = '';
      if (header[i] === '"') {
        i++;
        while (i < n && header[i] !== '"') {
          if (header[i] === '\\' && i + 1 < n) i++;
          value += header[i];
          i++;
        }
        i++;
      } else {
        const vs = i;
        while (i < n && header[i] !== ',' && header[i] !== ' ') i++;
        value = header.slice(vs, i);
      }
      current.params[word.toLowerCase()] = value;
    } else {
      if (i === start) i++;
      // No prototype: a parameter named `__proto__` or `constructor` is a parameter like any other.
      current = { scheme: word.toLowerCase(), params: Object.create(null) as Record<string, string> };
      out.push(current);
    }
  }
  return out;
}

interface CachedToken {
  readonly header: string;
  readonly expires: number;
}

const TOKEN_RESPONSE_CAP = 1024 * 1024;
/**
 * The user name that says "the password is an identity token" (a refresh token for the token
 * endpoint), as Docker's config.json and credential helpers hand one out.
 */
export const IDENTITY_TOKEN_USERNAME = '<token>';
const MIN_TOKEN_LIFETIME_S = 60;
/**
 * Tokens and Basic origins one Authorizer keeps: a long-lived puller (fastpulld) meets many
 * repositories, each scope its own token, so the cache is bounded like every other store a
 * registry's answers can grow.
 */
export const MAX_CACHED_AUTHORIZATIONS = 256;

/** Holds the Authorization state of one client: tokens per (origin, scope) and Basic per origin. */
export class Authorizer {
  private readonly tokens = new Map<string, CachedToken>();
  private readonly basic = new Set<string>();

  constructor(
    private readonly dispatcher: HttpPool,
    private readonly credentials: CredentialsProvider | undefined,
    private readonly userAgent: string,
  ) {}

  /** The Authorization header for a request to `origin` with `scope`, if one is known. */
  async header(registry: string, origin: string, scope: string): Promise<string | undefined> {
    const t = this.tokens.get(`${origin} ${scope}`);
    if (t && t.expires > Date.now()) return t.header;
    if (this.basic.has(origin)) {
      const c = await this.credentials?.(registry);
      if (c) return basicHeader(c);
    }
    return undefined;
  }

  /**
   * Answers a 401 challenge. Returns true when a new Authorization is available and the request
   * should be retried, false when nothing more can be done. `via`: the connections of the host that
   * challenged, which the token request goes through, so that a host's TLS settings from hosts.toml
   * (its CA, client certificate) apply to its token realm too, as containerd's host clients do.
   */
  async challenge(
    registry: string,
    origin: string,
    scope: string,
    wwwAuthenticate: string | undefined,
    signal?: AbortSignal,
    via?: HttpPool,
  ): Promise<boolean> {
    const challenges = parseChallenges(wwwAuthenticate ?? '');
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    if (bearer) {
      const header = await this.fetchToken(registry, origin, scope, bearer, signal, via ?? this.dispatcher);
      this.keepToken(`${origin} ${scope}`, header);
      return true;
    }
    if (challenges.some((c) => c.scheme === 'basic') && !this.basic.has(origin)) {
      const c = await this.credentials?.(registry);
      if (!c) return false;
      assertSafeForCredentials(origin, registry);
      if (this.basic.size >= MAX_CACHED_AUTHORIZATIONS) this.basic.delete(this.basic.values().next().value!);
      this.basic.add(origin);
      return true;
    }
    return false;
  }

  /** Tokens held now (expired ones included until they are pruned); for tests and metrics. */
  get cachedTokens(): number {
    return this.tokens.size;
  }

  /** Keeps a token, first dropping expired ones and then the oldest when the cache is full. */
  private keepToken(key: string, token: CachedToken): void {
    this.tokens.delete(key);
    if (this.tokens.size >= MAX_CACHED_AUTHORIZATIONS) {
      const now = Date.now();
      for (const [k, t] of this.tokens) if (t.expires <= now) this.tokens.delete(k);
      if (this.tokens.size >= MAX_CACHED_AUTHORIZATIONS) this.tokens.delete(this.tokens.keys().next().value!);
    }
    this.tokens.set(key, token);
  }

  private async fetchToken(
    registry: string,
    origin: string,
    scope: string,
    ch: Challenge,
    signal: AbortSignal | undefined,
    dispatcher: HttpPool,
  ): Promise<CachedToken> {
    throwIfAborted(signal, `authenticating to ${registry}`);
    const realm = ch.params.realm;
    let url: URL;
    try {
      url = new URL(realm ?? '');
    } catch {
      throw new FastpullError('UNAUTHORIZED', `authenticating to ${registry}: Bearer challenge without a valid realm`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new FastpullError('UNAUTHORIZED', `authenticating to ${registry}: token realm has unsupported scheme ${url.protocol}`);
    }
    if (ch.params.service) url.searchParams.set('service', ch.params.service);
    const wantScope = scope || ch.params.scope;
    if (wantScope) url.searchParams.set('scope', wantScope);
    const headers: Record<string, string> = { 'user-agent': this.userAgent, accept: 'application/json' };
    const creds = await this.credentials?.(registry);
    let method: 'GET' | 'POST' = 'GET';
    let formBody: string | undefined;
    if (creds && creds.username === IDENTITY_TOKEN_USERNAME) {
      // An identity token (docker login's OAuth2 refresh token) is exchanged by a form POST
      // (distribution's token spec, oauth.md), never sent as a password.
      assertSafeForCredentials(url.origin, registry);
      method = 'POST';
      const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: creds.password, client_id: 'fastpull' });
      if (ch.params.service) form.set('service', ch.params.service);
      if (wantScope) form.set('scope', wantScope);
      formBody = form.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
      url.search = '';
    } else if (creds) {
      assertSafeForCredentials(url.origin, registry);
      headers.authorization = basicHeader(creds);
    }
    let res: RegistryResponse;
    try {
      res = await sendRequest(url, { method, headers, ...(formBody !== undefined ? { body: formBody } : {}), dispatcher, signal: signal ?? null });
    } catch (e) {
      if (isFastpullError(e)) throw e;
      const proxy = e instanceof ProxyRefused ? { details: { proxy: e.proxy, proxyStatus: e.status } } : {};
      throw new FastpullError('NETWORK_ERROR', `authenticating to ${registry}: token request to ${url.origin} failed: ${(e as Error).message}`, {
        cause: e,
        ...proxy,
      });
    }
    let body: Buffer;
    try {
      body = await readCapped(res.body, TOKEN_RESPONSE_CAP, `authenticating to ${registry}`);
    } catch (e) {
      if (isFastpullError(e)) throw e;
      // A connection cut mid-body is the network's failure (and retried as one), not a raw error.
      throw new FastpullError('NETWORK_ERROR', `authenticating to ${registry}: token response from ${url.origin} failed: ${(e as Error).message}`, {
        cause: e,
      });
    }
    return tokenFromAnswer(registry, url.origin, res.statusCode, body, creds !== undefined);
  }
}

/** The token a token endpoint's answer holds, renewed early; UNAUTHORIZED when it holds none. */
function tokenFromAnswer(registry: string, origin: string, status: number, body: Buffer, withCredentials: boolean): CachedToken {
  if (status === 401 || status === 403) {
    throw new FastpullError(
      'UNAUTHORIZED',
      `authenticating to ${registry}: token endpoint ${origin} refused ${withCredentials ? 'the credentials' : 'anonymous access'} (HTTP ${status})`,
      {
        details: { status },
      },
    );
  }
  if (status !== 200) {
    throw new FastpullError('UNAUTHORIZED', `authenticating to ${registry}: token endpoint ${origin} answered HTTP ${status}`, { details: { status } });
  }
  let parsed: { token?: unknown; access_token?: unknown; expires_in?: unknown };
  try {
    parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
  } catch (e) {
    throw new FastpullError('UNAUTHORIZED', `authenticating to ${registry}: token response is not JSON`, { cause: e });
  }
  const token = typeof parsed.token === 'string' && parsed.token ? parsed.token : parsed.access_token;
  if (typeof token !== 'string' || token === '' || /[\r\n]/.test(token)) {
    throw new FastpullError('UNAUTHORIZED', `authenticating to ${registry}: token response without a token`);
  }
  const lifetime = typeof parsed.expires_in === 'number' && parsed.expires_in > MIN_TOKEN_LIFETIME_S ? parsed.expires_in : MIN_TOKEN_LIFETIME_S;
  // Renew ten seconds early so a token never expires mid-request.
  return { header: `Bearer ${token}`, expires: Date.now() + (lifetime - 10) * 1000 };
}

function basicHeader(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

/** Credentials never travel in clear text except to loopback. */
function assertSafeForCredentials(origin: string, registry: string): void {
  const u = new URL(origin);
  if (u.protocol !== 'https:' && !isLoopbackHost(u.host)) {
    throw new FastpullError('INSECURE_REGISTRY', `authenticating to ${registry}: refusing to send credentials over plain HTTP to ${u.host}`);
  }
}

/** Reads a response body, failing once it passes `cap` bytes; each piece is counted against `throttle` (a rate limit) before the next is read. */
export async function readCapped(
  body: AsyncIterable<Buffer> & { destroy?: (e?: Error) => void },
  cap: number,
  what = 'reading a response',
  code: 'MANIFEST_TOO_LARGE' | 'REGISTRY_ERROR' = 'REGISTRY_ERROR',
  throttle?: ByteThrottle,
): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > cap) {
      body.destroy?.();
      throw new FastpullError(code, `${what}: response body larger than ${cap} bytes`, { details: { cap } });
    }
    parts.push(chunk);
    // The loop asks for no more of the body while this waits, so the stream stops reading its socket.
    const held = throttle?.take(chunk.length);
    if (held !== undefined) await held;
  }
  return Buffer.concat(parts, total);
}
