// The public types of pulling: options, progress events and their layer states, results, timings.
import type { SignatureGate } from '../signatures/gate.js';
import type { Digest } from '../oci/digest.js';
import type { Platform } from '../oci/platform.js';
import type { ImageRecord } from '../images/store.js';
import type { CredentialsProvider } from '../registry/auth.js';
import type { RegistryClient } from '../registry/client.js';
import type { ProxySettings } from '../registry/proxy.js';
import type { RegistryConnections } from '../registry/shared.js';
import type { RateLimit } from '../registry/ratelimit.js';
import type { FetchScheduler } from '../registry/scheduler.js';
import type { UnpackPool } from '../unpack/pool/pool.js';
import type { InflaterChoice } from '../unpack/decompress/inflater.js';
import type { Tuning } from '../tuning.js';
import type { PullObserver } from './observer.js';
import type { PriorityGate, PullPriority, PullTicket } from './priority.js';
import type { PullCpuBudget } from '../util/pull-cpu.js';

/**
 * Where a layer of a pull is, in the order a layer goes through them; a layer's states only move
 * forward. `waiting`: for a download slot, or for another pull unpacking the same layer.
 * `fetching`: its blob is downloading (`bytes` counts up). `extracting`: every byte is in and the
 * single pass that hashes, decompresses and extracts runs (it starts while the download goes on, and
 * has caught up or is catching up; `unpacked` says how far it has read). `verifying`: both digests are being checked and the snapshot
 * committed. `committed`: its snapshot is in the store. Or `exists` straight from `waiting`: its
 * snapshot was already there (or another pull committed it meanwhile). A layer whose blob is
 * already in the store goes from `waiting` to `extracting`.
 */
export type LayerState = 'waiting' | 'fetching' | 'extracting' | 'verifying' | 'committed' | 'exists';

/**
 * Progress of a pull, in the order things happen: one `resolved`, then `layer` events of all
 * layers interleaved (each layer's states in {@link LayerState} order, never back; `fetching` and
 * `extracting` repeat as their bytes grow), then `done`
 * (only when the pull succeeds).
 */
export type PullEvent =
  | {
      readonly type: 'resolved';
      /** The canonical reference the image is recorded under. */
      readonly name: string;
      /** Digest of the platform manifest. */
      readonly manifest: Digest;
      /** The platform of the image. */
      readonly platform: Platform;
      /** Every layer, bottom first. */
      readonly layers: readonly { readonly digest: Digest; readonly size: number; readonly chainID: Digest }[];
    }
  | {
      readonly type: 'layer';
      /** Position of the layer, 0 at the bottom. */
      readonly index: number;
      /** Digest of the layer blob. */
      readonly digest: Digest;
      /** What is happening to the layer now. */
      readonly state: LayerState;
      /** Compressed bytes fetched so far (`fetching`; 0 while `waiting`), the layer size after that. */
      readonly bytes: number;
      /** The layer blob's size. */
      readonly total: number;
      /**
       * `extracting` only: compressed bytes of the blob the unpack pass has consumed so far (it
       * reaches `total` when the pass has read everything). `extracting` repeats as it grows.
       */
      readonly unpacked?: number;
    }
  | { readonly type: 'done'; readonly image: ImageRecord; readonly timings: PullTimings };

/**
 * Where one layer's time went, in milliseconds. Download and unpack overlap (the unpacker follows
 * the download), and inside the unpack pass hashing, decompression and extraction interleave, so
 * the parts do not add up to wall time: the largest one is what bounds the layer.
 */
export interface LayerTimings {
  /** Digest of the layer blob. */
  readonly digest: Digest;
  /** Downloading (0 when the blob or snapshot was already there). */
  readonly fetchMs: number;
  /** Wall time of the single pass that hashes, decompresses and extracts. */
  readonly unpackMs: number;
  /** Of the pass: waiting for downloaded bytes. */
  readonly waitMs: number;
  /** Of the pass: SHA-256 of the blob and of the tar (diffID). */
  readonly verifyMs: number;
  /** Of the pass: decompressing (or waiting for the decoder process). */
  readonly decompressMs: number;
  /** Of the pass: reading tar headers and writing files. */
  readonly extractMs: number;
  /** Committing: blob rename, settling against lower layers, snapshot rename, fsyncs. */
  readonly commitMs: number;
  /** `exists` when the snapshot was already in the store (all times are then 0). */
  readonly state: 'committed' | 'exists';
  /**
   * CPU of the pass's stages, each on its own thread's clock (see UnpackTimings): the thread that
   * parsed the tar and wrote the files, the SHA-256 of the blob and of the tar, decompressing, and
   * the writer threads that made the small files. Absent for a layer that was there, or where the
   * clock is missing (no addon; for decompressing, a decoder without one: see
   * UnpackTimings.inflateCpuMs; for the writers, an addon without writer threads).
   */
  readonly threadCpuMs?: number;
  /** CPU of hashing the blob. */
  readonly blobHashCpuMs?: number;
  /** CPU of decompressing: in-process ISA-L or the parallel gunzip only. */
  readonly inflateCpuMs?: number;
  /** CPU of hashing the tar: 0 for an uncompressed layer, whose diffID is its blob digest. */
  readonly tarHashCpuMs?: number;
  /** CPU of the writer threads making the layer's small files (0: none went to them). */
  readonly writerCpuMs?: number;
  /**
   * With the parallel inflater and a SOCI zTOC for the layer in the registry: how many of the
   * zTOC's checkpoints the inflater started chunks from (each one checked against the stream).
   */
  readonly ztocCheckpoints?: number;
  /**
   * Bytes of the downloaded blob that the pass freed behind it (hole-punched once hashed, so the
   * pull's flushes never wrote them to disk); absent when none were.
   */
  readonly releasedBytes?: number;
}

/**
 * Per-phase sums over all layers, in milliseconds (layers run at once, so sums exceed wall time).
 * Only per-layer phases: resolving happens once per pull, see {@link PullTimings.resolveMs}.
 */
export interface PhaseTotals {
  /** Sum of {@link LayerTimings.fetchMs}. */
  readonly fetchMs: number;
  /** Sum of {@link LayerTimings.verifyMs}. */
  readonly verifyMs: number;
  /** Sum of {@link LayerTimings.decompressMs}. */
  readonly decompressMs: number;
  /** Sum of {@link LayerTimings.extractMs}. */
  readonly extractMs: number;
  /** Sum of {@link LayerTimings.commitMs}. */
  readonly commitMs: number;
}

/** Where a pull's time went, in milliseconds: wall times, per layer and per phase. */
export interface PullTimings {
  /** Resolving the reference to a verified manifest and config (once per pull, before any layer). */
  readonly resolveMs: number;
  /** Wall time of the whole pull. */
  readonly totalMs: number;
  /** One entry per layer, bottom first. */
  readonly layers: readonly LayerTimings[];
  /** Sums over the layers, phase by phase. */
  readonly phases: PhaseTotals;
}

/**
 * What a long-lived puller (LocalService, so fastpulld) owns and every pull it runs shares: it is
 * built once, while each pull's own options (credentials, limits, priority, ...) come per call.
 */
export interface PullEngine {
  /**
   * Registry connections and tokens kept across pulls (see RegistryConnections): the pull's
   * client is built on them, reading hosts.toml itself. Ignored when `client` is given.
   */
  readonly connections?: RegistryConnections;
  /** The scheduler of blob requests (as PullOptions.scheduler). */
  readonly scheduler?: FetchScheduler;
  /** The pool that unpacks layers (as PullOptions.pool). */
  readonly pool?: UnpackPool;
  /** The gate that orders pulls by priority (as PullOptions.priorityGate). */
  readonly priorityGate?: PriorityGate;
}

/** Options of {@link pull} and {@link pullEvents}. Only `root` is required. */
export interface PullOptions {
  /** Store root; see defaultRoot(). */
  readonly root: string;
  /** `os/arch[/variant]` or a Platform; default: this host. */
  readonly platform?: string | Platform;
  /** Plain HTTP for every registry (loopback registries use it anyway). */
  readonly plainHttp?: boolean;
  /** Credentials per registry, e.g. `dockerConfigCredentials()`; default none (anonymous). */
  readonly credentials?: CredentialsProvider;
  /** containerd-style registry host configuration (`<dir>/<host>/hosts.toml`): mirrors to try first. */
  readonly hostsDir?: string;
  /** Proxies of registry traffic, e.g. `proxyEnvironment(process.env)`; default none (see RegistryClientOptions.proxy). */
  readonly proxy?: ProxySettings;
  /**
   * Aborts the pull: it fails with ABORTED once every layer has stopped, and keeps what it
   * downloaded for the next pull to resume.
   */
  readonly signal?: AbortSignal;
  /** Called with each progress event, synchronously, from the pull's own work: keep it quick. */
  readonly onProgress?: (event: PullEvent) => void;
  /** Bytes per range request. */
  readonly chunkSize?: number;
  /** Requests in flight for this pull alone (it then gets its own scheduler). */
  readonly maxConnections?: number;
  /** The scheduler of blob requests; default the process-wide one that all pulls share. */
  readonly scheduler?: FetchScheduler;
  /** Fail the pull when no byte arrives for this long across all its downloads (default 2 min). */
  readonly noProgressTimeoutMs?: number;
  /**
   * Fail the pull (NETWORK_ERROR) when a manifest, index, config or referrers list is not read whole
   * within this long, its retries included (default 2 min). Applies to the client the pull makes;
   * a `client` given keeps its own.
   */
  readonly metadataTimeoutMs?: number;
  /**
   * A range receiving fewer bytes per second than this over `stragglerWindowMs` is cancelled and its
   * remainder re-requested on a fresh connection (defaults: 16 KiB/s over 10 s).
   */
  readonly stragglerFloor?: number;
  /** The window over which the straggler floor is measured, in milliseconds. */
  readonly stragglerWindowMs?: number;
  /** A range whose body stops for this long after bytes came is re-issued at once (default 3 s; 0: off). */
  readonly stallTimeoutMs?: number;
  /** Layers decompressed and extracted at once; default: the process-wide pool, one per two cores, at most 4. */
  readonly unpackConcurrency?: number;
  /**
   * The pool that unpacks the layers; default the process-wide one (or one of the pull's own when
   * `unpackConcurrency` or `threads` is given). A long-running process that sizes its own pool
   * passes it to every pull, so all pulls share it.
   */
  readonly pool?: UnpackPool;
  /** Called when a range request is retried after an error (for metrics). */
  readonly onRetry?: (error: unknown) => void;
  /** Called when a straggling range is cancelled and re-issued on a fresh connection (for metrics). */
  readonly onStraggler?: () => void;
  /** Unpack on worker threads (default true); false keeps every layer on the calling thread. */
  readonly threads?: boolean;
  /** gzip decoder: 'auto' (in-process ISA-L where its addon is built, else node:zlib), 'isal', 'zlib', 'igzip', 'pigz' or 'parallel'. */
  readonly inflater?: InflaterChoice;
  /**
   * Unpack for a rootless overlay mount (user.overlay.* xattrs, owners unchanged; mounts then carry
   * `userxattr`). Default: when not running as root.
   */
  readonly rootless?: boolean;
  /** A client to reuse (its connection pool and tokens); the pull does not close it. */
  readonly client?: RegistryClient;
  /**
   * Keep each layer's compressed blob in the content store after its snapshot is committed.
   * Default false: a node needs the unpacked layers only, and keeping both doubles the disk an
   * image takes. Manifests and configs are always kept.
   */
  readonly keepBlobs?: boolean;
  /** Flush each snapshot to stable storage before committing it (default true; false is unsafe, see StoreOptions.sync). */
  readonly sync?: boolean;
  /** Watches the pull from inside: range requests, bytes landing, unpack passes (TraceRecorder uses it). */
  readonly observer?: PullObserver;
  /**
   * Mark the image record as held for containerd (ImageRecord.heldFor), unless a record of the same
   * name and platform is already there without the mark: a user's record stays the user's.
   */
  readonly heldFor?: 'containerd';
  /**
   * Signature verification: started as soon as the manifest digest is known, beside the layers; the
   * image is recorded only once every verifier whose policy covers it accepts it (SIGNATURE_MISSING,
   * SIGNATURE_INVALID otherwise, and nothing of the image is recorded). Default: none. A promise
   * (policies still loading) lets the reference resolve and the layers start meanwhile; undefined
   * from it means no gate, and its rejection fails the pull with that error.
   */
  readonly signatures?: SignatureGate | Promise<SignatureGate | undefined>;
  /**
   * How urgent the pull is among the pulls of this process (default `normal`): waiting range
   * requests and unpack passes of a higher priority go first, and a `low` pull starts no layer while
   * a pull above it runs (layers it has started go on). A {@link PullTicket} lets the caller raise it
   * while the pull runs.
   */
  readonly priority?: PullPriority | PullTicket;
  /** The gate that orders this process's pulls by priority; default the process-wide one. */
  readonly priorityGate?: PriorityGate;
  /** Measuring knobs (tuning.ts), read by the program's entry point; default none. */
  readonly tuning?: Tuning;
  /**
   * A network rate limit on what the pull reads from registries (layer bytes, and the manifests,
   * configs and referrers lists the client it makes reads): bytes per second for this pull alone
   * (0: none), or a {@link RateLimiter} that several pulls share, or a list of both (the pull stays
   * under each). A read over the limit stops reading its socket until the limiter lets it go on,
   * so TCP slows the registry down; nothing held back is buffered. Where a limiter is shared, a pull
   * of higher priority goes first (see RateLimiter). Default: no limit.
   */
  readonly rateLimit?: RateLimit | readonly RateLimit[];
  /**
   * The shared parts a long-lived puller passes to each of its pulls (see {@link PullEngine}); a
   * `scheduler`, `pool` or `priorityGate` given above wins over the engine's.
   */
  readonly engine?: PullEngine;
  /**
   * Whole cores the pull's unpack work may keep busy at once, while the process's other pulls keep
   * theirs: each of its unpack passes runs on a worker thread confined to the last N of the process's
   * CPUs, the hashing, decoding and small-file writing a pass hands to shared threads run on those
   * CPUs too, and the pull runs at most poolSizeFor(N) passes at once. A {@link PullCpuBudget} lets
   * the caller loosen it while the pull runs. Needs the native addon (FAILED_PRECONDITION without
   * it) and unpacking on worker threads (with `threads: false` the passes run unconfined); node:zlib's
   * decoding, where the addon has no ISA-L, runs on node's own pool, outside it. Default: none (the
   * process's CPUs; see LocalServiceOptions.cpuBudget for a budget of the whole process).
   */
  readonly cpuBudget?: number | PullCpuBudget;
}

/** What a successful pull returns. */
export interface PullResult {
  /** The image record written to the store. */
  readonly image: ImageRecord;
  /** Where the time went. */
  readonly timings: PullTimings;
}
