// A loopback OCI distribution registry (read side only) with basic/bearer auth and fault injection, for tests.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { FastpullError } from '../errors.js';
import { isDigest, sha256Digest, type Digest } from '../oci/digest.js';
import type { BuiltImage, BuiltIndex } from './builder.js';
import { referrersAnswer } from './referrers.js';

/** One request the registry answered. `status` and `bytesSent` are filled in as the response goes out. */
export interface RequestLog {
  /** HTTP method. */
  readonly method: string;
  /** Path and query, as requested. */
  readonly path: string;
  /** The Range header, when sent. */
  readonly range: string | undefined;
  /** Whether an Authorization header came with the request (its value is never kept). */
  readonly authorization: boolean;
  /** performance.now() when the request arrived. */
  readonly at: number;
  /** The HTTP status sent (0 until the response starts). */
  status: number;
  /** Body bytes written so far. */
  bytesSent: number;
}

/** Authentication the registry demands. */
export type LoopbackAuth =
  | { readonly type: 'basic'; readonly username: string; readonly password: string }
  | {
      readonly type: 'bearer';
      /** When set, the token endpoint demands these Basic credentials; otherwise it hands out anonymous tokens. */
      readonly username?: string;
      readonly password?: string;
      /** Token lifetime in seconds; default 300. After it the registry refuses the token. */
      readonly expiresIn?: number;
      /** Repositories a token may be granted pull on; default all. Others are left out of the token. */
      readonly repositories?: readonly string[];
      /**
       * An OAuth2 refresh token (what `docker login` stores as an identity token): a POST to the
       * token endpoint with grant_type=refresh_token and this token gets a token too.
       */
      readonly refreshToken?: string;
    };

/** A fault that applies to the next `times` matching requests, then switches itself off. */
export interface CountedFault {
  /** Matched against the URL path (no query); default every blob GET. */
  path?: RegExp;
  /** How many more matching requests get the fault; counts down to 0. */
  times: number;
}

/**
 * Faults, each off by default and settable at any time through `registry.faults`.
 * Counted faults decrement `times` as they fire.
 */
export interface LoopbackFaults {
  /** Blobs served with the byte at the middle of the blob flipped (a consistently corrupted copy, so ranges that miss the middle are clean). */
  corruptBlob?: Set<Digest>;
  /** Answer ranged blob GETs with 200 and the whole blob. */
  ignoreRange?: boolean;
  /** Answer ranged blob GETs with 206 for a different range than asked (shifted by one byte; body and Content-Range agree with each other). */
  wrongContentRange?: boolean;
  /** The next `times` requests whose path matches get `status` (checked before auth), with an error body and `headers`. */
  status?: { path: RegExp; status: number; times: number; headers?: Record<string, string> };
  /** Blob GETs answer 307 to the same path and query on this origin (e.g. a second registry's `url`). */
  redirectBlobsTo?: string;
  /** Manifests carry a Docker-Content-Digest that does not match their bytes. */
  wrongDockerContentDigest?: boolean;
  /** Blob GET bodies: after `bytes` body bytes, the connection is destroyed. */
  dropAfter?: CountedFault & { bytes: number };
  /** Blob GET bodies: after `bytes` body bytes, nothing more is sent until the client gives up. */
  stallAfter?: CountedFault & { bytes: number };
  /** Blob GET bodies are sent at about this rate. */
  bytesPerSecond?: number;
  /**
   * Requests whose path matches are answered only once `until` settles (a gate: e.g. hold the
   * manifests until every client of a load test has asked). Requests that arrive after it settled
   * are answered at once.
   */
  hold?: { path: RegExp; until: Promise<unknown> };
}

/** What the registry saw. */
export interface LoopbackStats {
  /** The most recent requests, oldest first (bounded by `maxLogEntries`). */
  readonly requests: RequestLog[];
  /** Blob body bytes sent for `digest` (all repositories, all responses, ranges included). */
  blobBytesServed(digest: Digest): number;
  /** Tokens handed out by the bearer token endpoint. */
  readonly tokensIssued: number;
  /** Requests being answered now. */
  readonly inFlight: number;
  /** Most requests answered at once since start (or the last reset). */
  readonly maxInFlight: number;
  /** TCP connections accepted. */
  readonly connections: number;
  /** Forgets all of the above. */
  reset(): void;
}

/** A running loopback registry. */
export interface LoopbackRegistry {
  /** `127.0.0.1:PORT`, as a reference's registry part. */
  readonly host: string;
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** Serves the image's blobs and its manifest by `tag` and by digest. */
  addImage(repository: string, tag: string, image: BuiltImage): void;
  /** Serves the index by `tag` and digest, and each image's manifest (by digest) and blobs. `images` defaults to the index's own. */
  addIndex(repository: string, tag: string, index: BuiltIndex, images?: readonly BuiltImage[]): void;
  /** Serves `bytes` as the blob `digest` (not checked, so a test can store a wrong one). */
  addBlob(repository: string, digest: Digest, bytes: Uint8Array): void;
  /** Serves a manifest under `reference` (a tag or digest) and, for a tag, under its digest too. */
  addManifest(repository: string, reference: string, bytes: Uint8Array, mediaType: string): void;
  /** Counters of what the registry served. */
  readonly stats: LoopbackStats;
  /** Mutable: change at any time. */
  faults: LoopbackFaults;
  /** Stops listening and cuts open connections. */
  close(): Promise<void>;
}

/** Options of {@link startLoopbackRegistry}. */
export interface LoopbackRegistryOptions {
  /** Require authentication; default none. */
  readonly auth?: LoopbackAuth;
  /** How many request logs to keep; default 10,000. */
  readonly maxLogEntries?: number;
  /** Faults to inject from the start; default none. */
  readonly faults?: LoopbackFaults;
  /** Serve HTTPS with this key and certificate (PEM) instead of plain HTTP. */
  readonly tls?: { readonly key: string | Buffer; readonly cert: string | Buffer };
  /**
   * Serve the referrers API (`GET /v2/<name>/referrers/<digest>`, OCI distribution 1.1): the
   * manifests added whose `subject` names the digest. Default off: 404, as distribution 2.8
   * answers, so that clients use the referrers tag schema.
   */
  readonly referrers?: boolean;
}

/** The `service` of the bearer challenge and token endpoint, and the Basic realm. */
export const LOOPBACK_SERVICE = 'fastpull-test';
const DEFAULT_MAX_LOG = 10_000;
const DEFAULT_TOKEN_SECONDS = 300;
/** Distribution's repository name grammar (distribution/reference). */
const NAME_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
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

type ByteRange = { start: number; end: number } | 'unsatisfiable' | undefined;

/** Parses a single `bytes=` range; undefined means "ignore the header" (absent, malformed or multi-range), as RFC 9110 allows. */
function parseRange(header: string | undefined, total: number): ByteRange {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0 || total === 0) return 'unsatisfiable';
    return { start: Math.max(0, total - suffix), end: total - 1 };
  }
  const start = Number(a);
  const end = b === '' ? total - 1 : Math.min(Number(b), total - 1);
  if (start >= total || (b !== '' && Number(b) < start)) return 'unsatisfiable';
  return { start, end };
}

function errorBody(code: string, message: string, detail?: unknown): Buffer {
  return Buffer.from(JSON.stringify({ errors: [{ code, message, ...(detail !== undefined ? { detail } : {}) }] }));
}

function checkName(repository: string): void {
  if (!NAME_RE.test(repository) || repository.length > 255) throw new FastpullError('INVALID_ARGUMENT', `invalid repository name ${JSON.stringify(repository)}`);
}

function takeCounted<T extends CountedFault>(fault: T | undefined, path: string): T | undefined {
  if (fault === undefined || fault.times <= 0) return undefined;
  if (fault.path !== undefined && !fault.path.test(path)) return undefined;
  fault.times--;
  return fault;
}

/**
 * Starts a registry on 127.0.0.1 with a free port. It serves `/v2/`, manifests and blobs
 * (GET and HEAD, ranges on blobs) of what the test adds, a bearer token endpoint and the
 * referrers API when asked, and misbehaves as `faults` says.
 *
 * @example
 * const registry = await startLoopbackRegistry({ auth: { type: 'bearer' } });
 * registry.addImage('library/app', 'latest', await sampleImage(1));
 * registry.faults.corruptBlob = new Set([image.layers[0].digest]);
 * try { ... } finally { await registry.close(); }
 */
export async function startLoopbackRegistry(options: LoopbackRegistryOptions = {}): Promise<LoopbackRegistry> {
  const auth = options.auth;
  const maxLog = options.maxLogEntries ?? DEFAULT_MAX_LOG;
  const repos = new Map<string, Repository>();
  const tokens = new Map<string, Token>();
  let requests: RequestLog[] = [];
  let blobBytes = new Map<Digest, number>();
  let tokensIssued = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let connections = 0;
  let url = '';

  const repo = (name: string): Repository => {
    checkName(name);
    let r = repos.get(name);
    if (r === undefined) {
      r = { manifests: new Map(), blobs: new Map() };
      repos.set(name, r);
    }
    return r;
  };

  const registry: LoopbackRegistry = {
    host: '',
    url: '',
    faults: options.faults ?? {},
    addBlob(repository, digest, bytes) {
      if (!isDigest(digest)) throw new FastpullError('INVALID_DIGEST', `addBlob: invalid digest ${JSON.stringify(digest)}`);
      repo(repository).blobs.set(digest, Buffer.from(bytes));
    },
    addManifest(repository, reference, bytes, mediaType) {
      const stored: StoredManifest = { bytes: Buffer.from(bytes), mediaType, digest: sha256Digest(bytes) };
      const r = repo(repository);
      if (isDigest(reference)) r.manifests.set(reference, stored);
      else if (TAG_RE.test(reference)) {
        r.manifests.set(reference, stored);
        r.manifests.set(stored.digest, stored);
      } else throw new FastpullError('INVALID_ARGUMENT', `addManifest: ${JSON.stringify(reference)} is neither a tag nor a digest`);
    },
    addImage(repository, tag, image) {
      for (const [digest, bytes] of image.blobs) registry.addBlob(repository, digest, bytes);
      registry.addManifest(repository, tag, image.manifest, image.manifestMediaType);
    },
    addIndex(repository, tag, index, images = index.images) {
      for (const image of images) {
        for (const [digest, bytes] of image.blobs) registry.addBlob(repository, digest, bytes);
        registry.addManifest(repository, image.manifestDigest, image.manifest, image.manifestMediaType);
      }
      registry.addManifest(repository, tag, index.index, index.mediaType);
    },
    stats: {
      get requests() {
        return requests;
      },
      blobBytesServed: (digest) => blobBytes.get(digest) ?? 0,
      get tokensIssued() {
        return tokensIssued;
      },
      get inFlight() {
        return inFlight;
      },
      get maxInFlight() {
        return maxInFlight;
      },
      get connections() {
        return connections;
      },
      reset() {
        requests = [];
        blobBytes = new Map();
        tokensIssued = 0;
        maxInFlight = inFlight;
        connections = 0;
      },
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };

  /** Checks credentials; answers 401 itself and returns false when they do not pass. */
  const authorize = (req: IncomingMessage, res: ServerResponse, log: RequestLog, name: string | undefined): boolean => {
    if (auth === undefined) return true;
    const header = req.headers.authorization ?? '';
    if (auth.type === 'basic') {
      const want = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
      if (header === want) return true;
      send(res, log, 401, errorBody('UNAUTHORIZED', 'authentication required'), {
        'Content-Type': 'application/json',
        'WWW-Authenticate': `Basic realm="${LOOPBACK_SERVICE}"`,
      });
      return false;
    }
    const token = header.startsWith('Bearer ') ? tokens.get(header.slice('Bearer '.length)) : undefined;
    const valid = token !== undefined && token.expiresAt > Date.now();
    if (valid && (name === undefined || token.repositories.has(name))) return true;
    let challenge = `Bearer realm="${url}/token",service="${LOOPBACK_SERVICE}"`;
    if (name !== undefined) challenge += `,scope="repository:${name}:pull"`;
    if (valid) challenge += ',error="insufficient_scope"';
    send(res, log, 401, errorBody('UNAUTHORIZED', valid ? 'insufficient scope' : 'authentication required'), {
      'Content-Type': 'application/json',
      'WWW-Authenticate': challenge,
    });
    return false;
  };

  const issueToken = (req: IncomingMessage, res: ServerResponse, log: RequestLog, query: URLSearchParams, refreshed = false): void => {
    if (auth?.type !== 'bearer') {
      send(res, log, 404, errorBody('UNSUPPORTED', 'no token endpoint'), { 'Content-Type': 'application/json' });
      return;
    }
    if (auth.username !== undefined && !refreshed) {
      const want = `Basic ${Buffer.from(`${auth.username}:${auth.password ?? ''}`).toString('base64')}`;
      if (req.headers.authorization !== want) {
        send(res, log, 401, errorBody('UNAUTHORIZED', 'bad credentials'), { 'Content-Type': 'application/json', 'WWW-Authenticate': `Basic realm="${LOOPBACK_SERVICE}"` });
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
        if (auth.repositories === undefined || auth.repositories.includes(name)) granted.add(name);
      }
    }
    const expiresIn = auth.expiresIn ?? DEFAULT_TOKEN_SECONDS;
    const token = randomBytes(24).toString('hex');
    tokens.set(token, { repositories: granted, expiresAt: Date.now() + expiresIn * 1000 });
    tokensIssued++;
    const body = Buffer.from(JSON.stringify({ token, access_token: token, expires_in: expiresIn, issued_at: new Date().toISOString() }));
    send(res, log, 200, body, { 'Content-Type': 'application/json' });
  };

  const send = (res: ServerResponse, log: RequestLog, status: number, body: Buffer | undefined, headers: Record<string, string | number>): void => {
    log.status = status;
    res.writeHead(status, { 'Docker-Distribution-API-Version': 'registry/2.0', ...(body !== undefined ? { 'Content-Length': body.byteLength } : {}), ...headers });
    if (body === undefined || body.byteLength === 0) {
      res.end();
      return;
    }
    log.bytesSent += body.byteLength;
    res.end(body);
  };

  /** Sends a blob body, honouring the throttle, drop and stall faults. */
  const sendBlobBody = (res: ServerResponse, log: RequestLog, pathname: string, digest: Digest, body: Buffer): void => {
    const f = registry.faults;
    const drop = takeCounted(f.dropAfter, pathname);
    const stall = drop === undefined ? takeCounted(f.stallAfter, pathname) : undefined;
    const limit = drop?.bytes ?? stall?.bytes;
    const rate = f.bytesPerSecond;
    const count = (n: number): void => {
      log.bytesSent += n;
      blobBytes.set(digest, (blobBytes.get(digest) ?? 0) + n);
    };
    if (limit === undefined && rate === undefined) {
      count(body.byteLength);
      res.end(body);
      return;
    }
    const tickMs = 50;
    const chunk = rate !== undefined ? Math.max(1, Math.floor((rate * tickMs) / 1000)) : 64 * 1024;
    let offset = 0;
    const step = (): void => {
      if (res.destroyed) return;
      const end = Math.min(body.byteLength, offset + chunk, limit ?? Infinity);
      const piece = body.subarray(offset, end);
      offset = end;
      count(piece.byteLength);
      if (offset >= body.byteLength) {
        res.end(piece);
        return;
      }
      const next = (): void => {
        if (limit !== undefined && offset >= limit) {
          if (drop !== undefined) res.socket?.destroy();
          return; // a stall: leave the response open
        }
        if (rate !== undefined) setTimeout(step, tickMs).unref();
        else setImmediate(step);
      };
      // Wait until the piece is handed to the kernel, so a drop delivers exactly `limit` bytes.
      if (piece.byteLength > 0) res.write(piece, () => next());
      else next();
    };
    step();
  };

  const serveManifest = (req: IncomingMessage, res: ServerResponse, log: RequestLog, r: Repository, reference: string): void => {
    const m = r.manifests.get(reference);
    if (m === undefined) {
      send(res, log, 404, errorBody('MANIFEST_UNKNOWN', 'manifest unknown', { reference }), { 'Content-Type': 'application/json' });
      return;
    }
    const digest = registry.faults.wrongDockerContentDigest ? sha256Digest(Buffer.concat([m.bytes, Buffer.from('x')])) : m.digest;
    const headers = { 'Content-Type': m.mediaType, 'Docker-Content-Digest': digest, ETag: `"${digest}"`, 'Content-Length': m.bytes.byteLength };
    if (req.method === 'HEAD') send(res, log, 200, undefined, headers);
    else send(res, log, 200, m.bytes, headers);
  };

  const serveBlob = (req: IncomingMessage, res: ServerResponse, log: RequestLog, r: Repository, reference: string, pathname: string): void => {
    if (!isDigest(reference)) {
      send(res, log, 400, errorBody('DIGEST_INVALID', 'invalid digest', { digest: reference }), { 'Content-Type': 'application/json' });
      return;
    }
    const digest: Digest = reference;
    const stored = r.blobs.get(digest);
    if (stored === undefined) {
      send(res, log, 404, errorBody('BLOB_UNKNOWN', 'blob unknown to registry', { digest }), { 'Content-Type': 'application/json' });
      return;
    }
    const f = registry.faults;
    if (req.method === 'GET' && f.redirectBlobsTo !== undefined) {
      send(res, log, 307, Buffer.alloc(0), { Location: `${f.redirectBlobsTo.replace(/\/+$/, '')}${req.url ?? pathname}` });
      return;
    }
    let blob = stored;
    if (f.corruptBlob?.has(digest) && blob.byteLength > 0) {
      blob = Buffer.from(blob);
      const mid = blob.byteLength >> 1;
      blob[mid] = (blob[mid] as number) ^ 0xff;
    }
    const total = blob.byteLength;
    const base = { 'Docker-Content-Digest': digest, 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream', ETag: `"${digest}"` };
    const range = f.ignoreRange ? undefined : parseRange(req.headers.range, total);
    if (range === 'unsatisfiable') {
      send(res, log, 416, errorBody('RANGE_INVALID', 'requested range not satisfiable', { range: req.headers.range }), {
        'Content-Type': 'application/json',
        'Content-Range': `bytes */${total}`,
      });
      return;
    }
    let status = 200;
    let body = blob;
    const headers: Record<string, string | number> = { ...base };
    if (range !== undefined) {
      let { start, end } = range;
      if (f.wrongContentRange) {
        const shift = start === 0 ? 1 : -1;
        start += shift;
        end = Math.min(end + shift, total - 1);
        if (start > end) start = end;
      }
      status = 206;
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
    sendBlobBody(res, log, pathname, digest, body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const method = req.method ?? 'GET';
    const rawUrl = req.url ?? '/';
    const log: RequestLog = {
      method,
      path: rawUrl,
      range: req.headers.range,
      authorization: req.headers.authorization !== undefined,
      at: performance.now(),
      status: 0,
      bytesSent: 0,
    };
    requests.push(log);
    if (requests.length > maxLog) requests.splice(0, requests.length - maxLog);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.once('close', () => inFlight--);
    req.resume(); // bodies are never needed

    const parsed = new URL(rawUrl, 'http://loopback');
    const pathname = parsed.pathname;
    const forced = registry.faults.status;
    if (forced !== undefined && forced.times > 0 && forced.path.test(pathname)) {
      forced.times--;
      send(res, log, forced.status, errorBody('UNKNOWN', `injected status ${forced.status}`), { 'Content-Type': 'application/json', ...forced.headers });
      return;
    }
    if (pathname === '/token') {
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
          const ok = auth?.type === 'bearer' && auth.refreshToken !== undefined && form.get('grant_type') === 'refresh_token' && form.get('refresh_token') === auth.refreshToken;
          if (!ok) send(res, log, 401, errorBody('UNAUTHORIZED', 'invalid refresh token'), { 'Content-Type': 'application/json' });
          else issueToken(req, res, log, form, true);
        });
        return;
      }
      if (method !== 'GET') send(res, log, 405, errorBody('UNSUPPORTED', 'use GET or POST'), { 'Content-Type': 'application/json', Allow: 'GET, POST' });
      else issueToken(req, res, log, parsed.searchParams);
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      send(res, log, 405, errorBody('UNSUPPORTED', 'this registry is read-only'), { 'Content-Type': 'application/json', Allow: 'GET, HEAD' });
      return;
    }
    if (pathname === '/v2/' || pathname === '/v2') {
      if (authorize(req, res, log, undefined)) send(res, log, 200, Buffer.from('{}'), { 'Content-Type': 'application/json' });
      return;
    }
    const m = ROUTE_RE.exec(pathname);
    if (!m || (m[2] === 'referrers' && options.referrers !== true)) {
      send(res, log, 404, errorBody('UNSUPPORTED', 'no such endpoint'), { 'Content-Type': 'application/json' });
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
    if (!authorize(req, res, log, name)) return;
    const r = repos.get(name);
    if (r === undefined) {
      send(res, log, 404, errorBody('NAME_UNKNOWN', 'repository name not known to registry', { name }), { 'Content-Type': 'application/json' });
      return;
    }
    if (kind === 'manifests') serveManifest(req, res, log, r, reference);
    else if (kind === 'referrers') {
      const a = referrersAnswer(r.manifests.values(), reference, parsed.searchParams.get('artifactType') ?? undefined);
      send(res, log, a.status, a.body, a.headers);
    }
    else serveBlob(req, res, log, r, reference, pathname);
  };

  const answer = (req: IncomingMessage, res: ServerResponse): void => {
    try {
      handle(req, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(String(e));
    }
  };
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    const hold = registry.faults.hold;
    if (hold !== undefined && hold.path.test(new URL(req.url ?? '/', 'http://loopback').pathname)) {
      const go = (): void => {
        if (!res.destroyed) answer(req, res);
      };
      void hold.until.then(go, go);
      return;
    }
    answer(req, res);
  };
  const server = options.tls ? createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, listener) : createServer(listener);
  server.on('connection', () => connections++);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return Object.assign(registry, { host: `127.0.0.1:${port}`, url });
}
