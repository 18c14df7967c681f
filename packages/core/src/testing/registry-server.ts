// The loopback registry's server side: what it serves, its tokens and counters, and the handlers of
// each route, with the faults a test injects applied as each request is answered.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FastpullError } from '../errors.js';
import { isDigest, sha256Digest, type Digest } from '../oci/digest.js';
import { referrersAnswer } from './referrers.js';
import { checkName, errorBody, parseRange, takeCounted } from './registry-http.js';
import type { LoopbackAuth, LoopbackRegistry, LoopbackRegistryOptions, RequestLog } from './registry-types.js';

/** The `service` of the bearer challenge and token endpoint, and the Basic realm. */
export const LOOPBACK_SERVICE = 'fastpull-test';
const DEFAULT_MAX_LOG = 10_000;
const DEFAULT_TOKEN_SECONDS = 300;
const TAG_RE = /^[\w][\w.-]{0,127}$/;
const ROUTE_RE = /^\/v2\/(.+)\/(manifests|blobs|referrers)\/([^/]+)$/;

interface StoredManifest {
  readonly bytes: Buffer;
  readonly mediaType: string;
  readonly digest: Digest;
}

interface Repository {
  readonly manifests: Map<string, StoredManifest>;
  readonly blobs: Map<Digest, Buffer>;
}

interface Token {
  readonly repositories: ReadonlySet<string>;
  readonly expiresAt: number;
}

/** One loopback registry's state (what it serves, tokens, counters) and its request handlers. */
export class LoopbackServer {
  readonly auth: LoopbackAuth | undefined;
  readonly maxLog: number;
  readonly repos = new Map<string, Repository>();
  readonly tokens = new Map<string, Token>();
  requests: RequestLog[] = [];
  blobBytes = new Map<Digest, number>();
  tokensIssued = 0;
  inFlight = 0;
  maxInFlight = 0;
  connections = 0;
  url = '';
  /** The object tests hold: its faults are read at each request, since a test may change them at any time. */
  registry!: LoopbackRegistry;

  constructor(readonly options: LoopbackRegistryOptions) {
    this.auth = options.auth;
    this.maxLog = options.maxLogEntries ?? DEFAULT_MAX_LOG;
  }

  /** Serves `bytes` as the blob `digest` of `repository`. */
  addBlob(repository: string, digest: Digest, bytes: Uint8Array): void {
    if (!isDigest(digest)) throw new FastpullError('INVALID_DIGEST', `addBlob: invalid digest ${JSON.stringify(digest)}`);
    this.repo(repository).blobs.set(digest, Buffer.from(bytes));
  }

  /** Serves a manifest under `reference` (a tag or digest) and, for a tag, under its digest too. */
  addManifest(repository: string, reference: string, bytes: Uint8Array, mediaType: string): void {
    const stored: StoredManifest = { bytes: Buffer.from(bytes), mediaType, digest: sha256Digest(bytes) };
    const r = this.repo(repository);
    if (isDigest(reference)) r.manifests.set(reference, stored);
    else if (TAG_RE.test(reference)) {
      r.manifests.set(reference, stored);
      r.manifests.set(stored.digest, stored);
    } else throw new FastpullError('INVALID_ARGUMENT', `addManifest: ${JSON.stringify(reference)} is neither a tag nor a digest`);
  }

  /** The repository `name`, made empty on first use. */
  repo(name: string): Repository {
    checkName(name);
    let r = this.repos.get(name);
    if (r === undefined) {
      r = { manifests: new Map(), blobs: new Map() };
      this.repos.set(name, r);
    }
    return r;
  }

  /** The server's request listener: a request the hold fault names waits for its promise first. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    const hold = this.registry.faults.hold;
    if (hold !== undefined && hold.path.test(new URL(req.url ?? '/', 'http://loopback').pathname)) {
      const go = (): void => {
        if (!res.destroyed) this.answer(req, res);
      };
      void hold.until.then(go, go);
      return;
    }
    this.answer(req, res);
  };

  /** Checks credentials; answers 401 itself and returns false when they do not pass. */
  private authorize(req: IncomingMessage, res: ServerResponse, log: RequestLog, name: string | undefined): boolean {
    if (this.auth === undefined) return true;
    const header = req.headers.authorization ?? '';
    if (this.auth.type === 'basic') {
      const want = `Basic ${Buffer.from(`${this.auth.username}:${this.auth.password}`).toString('base64')}`;
      if (header === want) return true;
      this.send(res, log, 401, errorBody('UNAUTHORIZED', 'authentication required'), {
        'Content-Type': 'application/json',
        'WWW-Authenticate': `Basic realm="${LOOPBACK_SERVICE}"`,
      });
      return false;
    }
    const token = header.startsWith('Bearer ') ? this.tokens.get(header.slice('Bearer '.length)) : undefined;
    const valid = token !== undefined && token.expiresAt > Date.now();
    if (valid && (name === undefined || token.repositories.has(name))) return true;
    let challenge = `Bearer realm="${this.url}/token",service="${LOOPBACK_SERVICE}"`;
    if (name !== undefined) challenge += `,scope="repository:${name}:pull"`;
    if (valid) challenge += ',error="insufficient_scope"';
    this.send(res, log, 401, errorBody('UNAUTHORIZED', valid ? 'insufficient scope' : 'authentication required'), {
      'Content-Type': 'application/json',
      'WWW-Authenticate': challenge,
    });
    return false;
  }

  private issueToken(req: IncomingMessage, res: ServerResponse, log: RequestLog, query: URLSearchParams, refreshed = false): void {
    if (this.auth?.type !== 'bearer') {
      this.send(res, log, 404, errorBody('UNSUPPORTED', 'no token endpoint'), { 'Content-Type': 'application/json' });
      return;
    }
    if (this.auth.username !== undefined && !refreshed) {
      const want = `Basic ${Buffer.from(`${this.auth.username}:${this.auth.password ?? ''}`).toString('base64')}`;
      if (req.headers.authorization !== want) {
        this.send(res, log, 401, errorBody('UNAUTHORIZED', 'bad credentials'), {
          'Content-Type': 'application/json',
          'WWW-Authenticate': `Basic realm="${LOOPBACK_SERVICE}"`,
        });
        return;
      }
    }
    const granted = new Set<string>();
    for (const scope of query.getAll('scope')) {
      // Several scopes may also come space-separated in one parameter.
      for (const one of scope.split(' ')) {
        const m = /^repository:(.+):([a-z,*]+)$/.exec(one);
        if (!m || !m[2]?.split(',').some((a) => a === 'pull' || a === '*')) continue;
        const name = m[1] as string;
        if (this.auth.repositories === undefined || this.auth.repositories.includes(name)) granted.add(name);
      }
    }
    const expiresIn = this.auth.expiresIn ?? DEFAULT_TOKEN_SECONDS;
    const token = randomBytes(24).toString('hex');
    this.tokens.set(token, { repositories: granted, expiresAt: Date.now() + expiresIn * 1000 });
    this.tokensIssued++;
    const body = Buffer.from(JSON.stringify({ token, access_token: token, expires_in: expiresIn, issued_at: new Date().toISOString() }));
    this.send(res, log, 200, body, { 'Content-Type': 'application/json' });
  }

  private send(res: ServerResponse, log: RequestLog, status: number, body: Buffer | undefined, headers: Record<string, string | number>): void {
    log.status = status;
    res.writeHead(status, {
      'Docker-Distribution-API-Version': 'registry/2.0',
      ...(body !== undefined ? { 'Content-Length': body.byteLength } : {}),
      ...headers,
    });
    if (body === undefined || body.byteLength === 0) {
      res.end();
      return;
    }
    const trickle = this.registry.faults.trickle;
    if (trickle !== undefined && trickle.path.test(log.path)) {
      res.flushHeaders();
      sendPaced(res, body, trickle.bytesPerSecond, undefined, (n) => (log.bytesSent += n));
      return;
    }
    log.bytesSent += body.byteLength;
    res.end(body);
  }

  /** Sends a blob body, honouring the throttle, drop and stall faults. */
  private sendBlobBody(res: ServerResponse, log: RequestLog, pathname: string, digest: Digest, body: Buffer, rangeStart?: number): void {
    const f = this.registry.faults;
    const drop = takeCounted(f.dropAfter, pathname);
    const stall = drop === undefined ? takeCounted(f.stallAfter, pathname) : undefined;
    const limit = drop?.bytes ?? stall?.bytes;
    const trickled = f.trickle !== undefined && f.trickle.path.test(log.path) ? f.trickle.bytesPerSecond : undefined;
    const rate = f.slowRange !== undefined && rangeStart === f.slowRange.start ? f.slowRange.bytesPerSecond : (trickled ?? f.bytesPerSecond);
    const count = (n: number): void => {
      log.bytesSent += n;
      this.blobBytes.set(digest, (this.blobBytes.get(digest) ?? 0) + n);
    };
    if (limit === undefined && rate === undefined) {
      count(body.byteLength);
      res.end(body);
      return;
    }
    sendPaced(res, body, rate, limit === undefined ? undefined : { bytes: limit, drop: drop !== undefined }, count);
  }

  private serveManifest(req: IncomingMessage, res: ServerResponse, log: RequestLog, r: Repository, reference: string): void {
    const m = r.manifests.get(reference);
    if (m === undefined) {
      this.send(res, log, 404, errorBody('MANIFEST_UNKNOWN', 'manifest unknown', { reference }), { 'Content-Type': 'application/json' });
      return;
    }
    const digest = this.registry.faults.wrongDockerContentDigest ? sha256Digest(Buffer.concat([m.bytes, Buffer.from('x')])) : m.digest;
    const headers = { 'Content-Type': m.mediaType, 'Docker-Content-Digest': digest, ETag: `"${digest}"`, 'Content-Length': m.bytes.byteLength };
    if (req.method === 'HEAD') this.send(res, log, 200, undefined, headers);
    else this.send(res, log, 200, m.bytes, headers);
  }

  private serveBlob(req: IncomingMessage, res: ServerResponse, log: RequestLog, r: Repository, reference: string, pathname: string): void {
    if (!isDigest(reference)) {
      this.send(res, log, 400, errorBody('DIGEST_INVALID', 'invalid digest', { digest: reference }), { 'Content-Type': 'application/json' });
      return;
    }
    const digest: Digest = reference;
    const stored = r.blobs.get(digest);
    if (stored === undefined) {
      this.send(res, log, 404, errorBody('BLOB_UNKNOWN', 'blob unknown to registry', { digest }), { 'Content-Type': 'application/json' });
      return;
    }
    const f = this.registry.faults;
    if (req.method === 'GET' && f.redirectBlobsTo !== undefined) {
      this.send(res, log, 307, Buffer.alloc(0), { Location: `${f.redirectBlobsTo.replace(/\/+$/, '')}${req.url ?? pathname}` });
      return;
    }
    let blob = stored;
    const ranged = req.headers.range !== undefined;
    if ((f.corruptBlob?.has(digest) || (ranged && f.corruptRangedBlob?.has(digest))) && blob.byteLength > 0) {
      blob = Buffer.from(blob);
      const mid = blob.byteLength >> 1;
      blob[mid] = (blob[mid] as number) ^ 0xff;
    }
    const total = blob.byteLength;
    const base = { 'Docker-Content-Digest': digest, 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream', ETag: `"${digest}"` };
    const range = f.ignoreRange ? undefined : parseRange(req.headers.range, total);
    if (range === 'unsatisfiable') {
      this.send(res, log, 416, errorBody('RANGE_INVALID', 'requested range not satisfiable', { range: req.headers.range }), {
        'Content-Type': 'application/json',
        'Content-Range': `bytes */${total}`,
      });
      return;
    }
    let status = 200;
    let body = blob;
    const headers: Record<string, string | number> = { ...base };
    let rangeStart: number | undefined;
    if (range !== undefined) {
      let { start, end } = range;
      if (f.wrongContentRange) {
        const shift = start === 0 ? 1 : -1;
        start += shift;
        end = Math.min(end + shift, total - 1);
        if (start > end) start = end;
      }
      status = 206;
      rangeStart = start;
      body = blob.subarray(start, end + 1);
      headers['Content-Range'] = `bytes ${start}-${end}/${total}`;
    }
    headers['Content-Length'] = body.byteLength;
    log.status = status;
    res.writeHead(status, { 'Docker-Distribution-API-Version': 'registry/2.0', ...headers });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    this.sendBlobBody(res, log, pathname, digest, body, rangeStart);
  }

  /** Logs a request and counts it in flight until its response closes. */
  private logRequest(req: IncomingMessage, res: ServerResponse): RequestLog {
    const log: RequestLog = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      range: req.headers.range,
      authorization: req.headers.authorization !== undefined,
      userAgent: req.headers['user-agent'],
      at: performance.now(),
      status: 0,
      bytesSent: 0,
    };
    this.requests.push(log);
    if (this.requests.length > this.maxLog) this.requests.splice(0, this.requests.length - this.maxLog);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.once('close', () => this.inFlight--);
    return log;
  }

  /** The token endpoint: GET with scopes, or an OAuth2 form POST with a refresh token. */
  private serveToken(req: IncomingMessage, res: ServerResponse, log: RequestLog, parsed: URL): void {
    const method = req.method ?? 'GET';
    if (method === 'POST') {
      // OAuth2 form post (distribution's token spec, oauth.md): only the refresh_token grant.
      const parts: Buffer[] = [];
      let size = 0;
      req.on('data', (d: Buffer) => {
        size += d.length;
        if (size <= 64 * 1024) parts.push(d);
      });
      req.on('end', () => {
        const form = new URLSearchParams(Buffer.concat(parts).toString('utf8'));
        const ok =
          this.auth?.type === 'bearer' &&
          this.auth.refreshToken !== undefined &&
          form.get('grant_type') === 'refresh_token' &&
          form.get('refresh_token') === this.auth.refreshToken;
        if (!ok) this.send(res, log, 401, errorBody('UNAUTHORIZED', 'invalid refresh token'), { 'Content-Type': 'application/json' });
        else this.issueToken(req, res, log, form, true);
      });
      return;
    }
    if (method !== 'GET') this.send(res, log, 405, errorBody('UNSUPPORTED', 'use GET or POST'), { 'Content-Type': 'application/json', Allow: 'GET, POST' });
    else this.issueToken(req, res, log, parsed.searchParams);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? 'GET';
    const rawUrl = req.url ?? '/';
    const log = this.logRequest(req, res);
    req.resume(); // bodies are never needed

    const parsed = new URL(rawUrl, 'http://loopback');
    const pathname = parsed.pathname;
    const forced = this.registry.faults.status;
    if (forced !== undefined && forced.times > 0 && forced.path.test(pathname)) {
      forced.times--;
      this.send(res, log, forced.status, errorBody('UNKNOWN', `injected status ${forced.status}`), { 'Content-Type': 'application/json', ...forced.headers });
      return;
    }
    if (pathname === '/token') {
      this.serveToken(req, res, log, parsed);
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      this.send(res, log, 405, errorBody('UNSUPPORTED', 'this registry is read-only'), { 'Content-Type': 'application/json', Allow: 'GET, HEAD' });
      return;
    }
    if (pathname === '/v2/' || pathname === '/v2') {
      if (this.authorize(req, res, log, undefined)) this.send(res, log, 200, Buffer.from('{}'), { 'Content-Type': 'application/json' });
      return;
    }
    const m = ROUTE_RE.exec(pathname);
    if (!m || (m[2] === 'referrers' && this.options.referrers !== true)) {
      this.send(res, log, 404, errorBody('UNSUPPORTED', 'no such endpoint'), { 'Content-Type': 'application/json' });
      return;
    }
    const name = m[1] as string;
    const kind = m[2] as 'manifests' | 'blobs' | 'referrers';
    let reference: string;
    try {
      reference = decodeURIComponent(m[3] as string);
    } catch {
      reference = m[3] as string;
    }
    if (!this.authorize(req, res, log, name)) return;
    const r = this.repos.get(name);
    if (r === undefined) {
      this.send(res, log, 404, errorBody('NAME_UNKNOWN', 'repository name not known to registry', { name }), { 'Content-Type': 'application/json' });
      return;
    }
    if (kind === 'manifests') this.serveManifest(req, res, log, r, reference);
    else if (kind === 'referrers') {
      const a = referrersAnswer(r.manifests.values(), reference, parsed.searchParams.get('artifactType') ?? undefined);
      this.send(res, log, a.status, a.body, a.headers);
    } else this.serveBlob(req, res, log, r, reference, pathname);
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    try {
      this.handle(req, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(String(e));
    }
  }
}

/**
 * Writes `body` to `res` in pieces, at about `rate` bytes a second (else as fast as it goes), and
 * after `stop.bytes` bytes sends no more: the connection is destroyed (`drop`) or left open (a stall).
 */
function sendPaced(
  res: ServerResponse,
  body: Buffer,
  rate: number | undefined,
  stop: { bytes: number; drop: boolean } | undefined,
  count: (n: number) => void,
): void {
  const tickMs = 50;
  const chunk = rate !== undefined ? Math.max(1, Math.floor((rate * tickMs) / 1000)) : 64 * 1024;
  let offset = 0;
  const step = (): void => {
    if (res.destroyed) return;
    const end = Math.min(body.byteLength, offset + chunk, stop?.bytes ?? Infinity);
    const piece = body.subarray(offset, end);
    offset = end;
    count(piece.byteLength);
    if (offset >= body.byteLength) {
      res.end(piece);
      return;
    }
    const next = (): void => {
      if (stop !== undefined && offset >= stop.bytes) {
        if (stop.drop) res.socket?.destroy();
        return; // a stall: leave the response open
      }
      if (rate !== undefined) setTimeout(step, tickMs).unref();
      else setImmediate(step);
    };
    // Wait until the piece is handed to the kernel, so a drop delivers exactly `stop.bytes` bytes.
    if (piece.byteLength > 0) res.write(piece, () => next());
    else next();
  };
  step();
}
