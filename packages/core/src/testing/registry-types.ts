// What the loopback registry of the test kit offers: its options, faults, counters and handle. The
// server itself is in registry.ts.
import type { Digest } from '../oci/digest.js';
import type { BuiltImage, BuiltIndex } from './builder.js';

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
  /** The User-Agent header, when sent: tells a puller's requests from another's on one registry. */
  readonly userAgent: string | undefined;
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
  /**
   * As `corruptBlob`, but only for GETs that carry a Range header (a parallel puller's ranges):
   * a GET of the whole blob without Range gets it intact, as a puller that does not split sees it.
   */
  corruptRangedBlob?: Set<Digest>;
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
  /** Ranged blob GETs whose range starts at `start` are sent at about `bytesPerSecond` (others as the rest of the faults say). */
  slowRange?: { start: number; bytesPerSecond: number };
  /**
   * Requests whose path matches are answered only once `until` settles (a gate: e.g. hold the
   * manifests until every client of a load test has asked). Requests that arrive after it settled
   * are answered at once.
   */
  hold?: { path: RegExp; until: Promise<unknown> };
  /**
   * Responses whose path (and query) matches send their body at about `bytesPerSecond`, after
   * headers that come at once: a registry that trickles a manifest, config or referrers list.
   */
  trickle?: { path: RegExp; bytesPerSecond: number };
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
