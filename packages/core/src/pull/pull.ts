// pull(): reference -> verified manifest and config -> every layer fetched, verified and unpacked into
// its snapshot concurrently -> image record. Nothing unverified is ever committed.
import { setMaxListeners } from 'node:events';
import { FastpullError, isFastpullError, throwIfAborted } from '../errors.js';
import { hashFile, type Ingest } from '../content/store.js';
import { chainIDs } from '../oci/chainid.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { layerCompression } from '../oci/mediatypes.js';
import { parsePlatform, type Platform } from '../oci/platform.js';
import { formatReference, parseReference, type Reference } from '../oci/reference.js';
import type { ImageLayer, ImageRecord } from '../images/store.js';
import { RegistryClient, type ResolvedImage } from '../registry/client.js';
import { findSociZtocs, type SociZtocs } from '../registry/soci.js';
import type { CredentialsProvider } from '../registry/auth.js';
import { DEFAULT_CHUNK_SIZE, fetchBlob } from '../registry/fetch.js';
import { FetchScheduler, sharedFetchScheduler } from '../registry/scheduler.js';
import type { ActiveSnapshot } from '../snapshots/store.js';
import { openStore, type Store } from '../store.js';
import { sharedUnpackPool, UnpackPool } from '../unpack/pool.js';
import { lockSnapshot } from './lock.js';
import { reconcileWithLowers } from '../snapshots/lowers.js';
import { syncMethod, writebackFor } from '../snapshots/durable.js';
import { acquireLease, liveLeaseRefs, withCollectionLock } from '../gc/lease.js';
import type { InflaterChoice } from '../unpack/inflater.js';
import { Watermark } from '../content/watermark.js';

/**
 * Where a layer of a pull is: `waiting` (for a download slot, or for another pull unpacking the
 * same layer), `fetching`, `extracting` (the single pass that hashes, decompresses and extracts,
 * following the download), `verifying`, then `committed`; or `exists` when its snapshot was
 * already in the store.
 */
export type LayerState = 'waiting' | 'fetching' | 'verifying' | 'extracting' | 'committed' | 'exists';

/**
 * Progress of a pull, in the order things happen: one `resolved`, then `layer` events of all
 * layers interleaved, then `done` (only when the pull succeeds).
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
      /** Compressed bytes fetched so far (fetching) or the layer size once past fetching. */
      readonly bytes: number;
      /** The layer blob's size. */
      readonly total: number;
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
   * With the parallel inflater and a SOCI zTOC for the layer in the registry: how many of the
   * zTOC's checkpoints the inflater started chunks from (each one checked against the stream).
   */
  readonly ztocCheckpoints?: number;
}

/** Per-phase sums over all layers, in milliseconds (layers run at once, so sums exceed wall time). */
export interface PhaseTotals {
  /** Resolving the reference: manifests and config (once per pull, not per layer). */
  readonly resolveMs: number;
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
  /** Resolving the reference to a verified manifest and config. */
  readonly resolveMs: number;
  /** Wall time of the whole pull. */
  readonly totalMs: number;
  /** One entry per layer, bottom first. */
  readonly layers: readonly LayerTimings[];
  /** Sums over the layers. */
  readonly phases: PhaseTotals;
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
   * A range receiving fewer bytes per second than this over `stragglerWindowMs` is cancelled and its
   * remainder re-requested on a fresh connection (defaults: 16 KiB/s over 10 s).
   */
  readonly stragglerFloor?: number;
  /** The window over which the straggler floor is measured, in milliseconds. */
  readonly stragglerWindowMs?: number;
  /** A range whose body stops for this long after bytes came is re-issued at once (default 3 s; 0: off). */
  readonly stallTimeoutMs?: number;
  /** Layers decompressed and extracted at once; default: the process-wide pool, one per core. */
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
  /** gzip decoder: 'auto' (igzip when installed, else node:zlib), 'igzip', 'pigz' or 'zlib'. */
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
}

/** What a successful pull returns. */
export interface PullResult {
  /** The image record written to the store. */
  readonly image: ImageRecord;
  /** Where the time went. */
  readonly timings: PullTimings;
}

/** A 'fetching' progress event of a layer comes after this many more bytes... */
const PROGRESS_STEP = 4 * 1024 * 1024;
/** ...or this many milliseconds, whichever comes first, so slow and small layers show movement too. */
const PROGRESS_INTERVAL_MS = 100;

/** Layers being unpacked by this process, by chainID: a second pull of the same layer waits for the first. */
const inflight = new Map<Digest, Promise<void>>();

/**
 * Pulls an image: resolves the reference for the platform, fetches every layer not already
 * unpacked, verifies blob digests and diffIDs, unpacks all layers concurrently into snapshots named
 * by chainID, and records the image. Layers already unpacked are not fetched again, and several
 * pulls (in this or other processes) of the same layer unpack it once.
 *
 * Rejects with a {@link FastpullError}: INVALID_REFERENCE, INVALID_ARGUMENT (options),
 * NOT_FOUND, UNAUTHORIZED, DENIED, RATE_LIMITED, REGISTRY_ERROR, NETWORK_ERROR (also when no
 * byte arrives for `noProgressTimeoutMs`), PLATFORM_NOT_FOUND, INVALID_MANIFEST,
 * MANIFEST_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, DIGEST_MISMATCH, SIZE_MISMATCH, INVALID_LAYER,
 * HOSTILE_LAYER, NO_SPACE, PERMISSION_DENIED, or ABORTED when `signal` fires.
 * @example
 * const { image } = await pull('127.0.0.1:5000/app:1', { root: '/var/lib/fastpull' });
 * console.log(image.chainID);
 */
export async function pull(reference: string | Reference, options: PullOptions): Promise<PullResult> {
  const t0 = performance.now();
  const ref = typeof reference === 'string' ? parseReference(reference) : reference;
  const platform = typeof options.platform === 'string' ? parsePlatform(options.platform) : options.platform;
  const store = openStore(options.root, { sync: options.sync !== false });
  const client =
    options.client ??
    new RegistryClient({
      plainHttp: options.plainHttp === true,
      ...(options.credentials ? { credentials: options.credentials } : {}),
      ...(options.hostsDir ? { hostsDir: options.hostsDir } : {}),
    });
  const signal = options.signal;
  try {
    const resolved = await client.resolve(ref, { ...(platform ? { platform } : {}), ...(signal ? { signal } : {}) });
    const resolveMs = performance.now() - t0;
    const name = formatReference(ref);
    const diffIDs = resolved.config.rootfs.diff_ids;
    const chains = chainIDs(diffIDs);
    const layers: ImageLayer[] = resolved.manifest.layers.map((d, i) => ({
      digest: d.digest,
      size: d.size,
      mediaType: d.mediaType,
      diffID: diffIDs[i]!,
      chainID: chains[i]!,
    }));
    const top = layers[layers.length - 1];
    if (!top) throw new FastpullError('INVALID_MANIFEST', `${name}: image has no layers`);
    for (const l of layers) {
      if (layerCompression(l.mediaType) === undefined) {
        throw new FastpullError('UNSUPPORTED_MEDIA_TYPE', `${name}: layer ${l.digest} has media type ${l.mediaType}, not a container layer`, {
          details: { mediaType: l.mediaType },
        });
      }
    }
    options.onProgress?.({
      type: 'resolved',
      name,
      manifest: resolved.manifestDescriptor.digest,
      platform: resolved.platform,
      layers: layers.map((l) => ({ digest: l.digest, size: l.size, chainID: l.chainID })),
    });
    // From here on, garbage collection leaves alone everything this image needs.
    const lease = await acquireLease(
      store.root,
      { blobs: [resolved.target.digest, resolved.manifestDescriptor.digest, resolved.manifest.config.digest, ...layers.map((l) => l.digest)], snapshots: layers.map((l) => l.chainID) },
      signal,
    );
    try {
      return await pullLeased(store, client, resolved, name, layers, options, lease.id, t0, resolveMs);
    } finally {
      await lease.release();
    }
  } finally {
    if (!options.client) await client.close();
  }
}

/**
 * {@link pull} as an async iterator of its progress events, the last of them `done` (which holds
 * the image and timings; so does the iterator's return value). A failed pull throws from the
 * loop. Leaving the loop early (break, return, throw) aborts the pull, which keeps what it
 * downloaded for the next pull to resume.
 * @example
 * for await (const e of pullEvents('127.0.0.1:5000/app:1', { root: '/var/lib/fastpull' })) {
 *   if (e.type === 'layer') console.log(e.index, e.state, e.bytes, '/', e.total);
 * }
 */
export async function* pullEvents(reference: string | Reference, options: Omit<PullOptions, 'onProgress'>): AsyncGenerator<PullEvent, PullResult, undefined> {
  const queue: PullEvent[] = [];
  let wake: (() => void) | undefined;
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
  let outcome: { ok: true; result: PullResult } | { ok: false; error: unknown } | undefined;
  const running = pull(reference, {
    ...options,
    signal,
    onProgress: (e) => {
      queue.push(e);
      wake?.();
    },
  }).then(
    (result) => void (outcome = { ok: true, result }),
    (error: unknown) => void (outcome = { ok: false, error }),
  );
  void running.finally(() => wake?.());
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (outcome !== undefined) break;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.result;
  } finally {
    if (outcome === undefined) {
      controller.abort(new FastpullError('ABORTED', 'the pull was abandoned by the consumer of its events'));
      await running;
    }
  }
}

/** The rest of a pull, once its lease is held: metadata, every layer, the image record. */
async function pullLeased(
  store: Store,
  client: RegistryClient,
  resolved: ResolvedImage,
  name: string,
  layers: readonly ImageLayer[],
  options: PullOptions,
  leaseId: string,
  t0: number,
  resolveMs: number,
): Promise<PullResult> {
  await storeMetadata(store, resolved);
  // Litter from pulls that died (kill -9): nothing of it is visible, but it takes space.
  await Promise.all([store.content.sweep(), store.snapshots.sweep()]);
  const layerTimings = await pullLayers(store, client, resolved, layers, options, leaseId);
  let unpackedSize = 0;
  for (const l of layers) unpackedSize += (await store.snapshots.info(l.chainID))?.size ?? 0;
  const image: ImageRecord = {
    name,
    target: resolved.target,
    manifest: resolved.manifestDescriptor,
    config: resolved.manifest.config,
    platform: resolved.platform,
    layers,
    chainID: layers[layers.length - 1]!.chainID,
    size: layers.reduce((s, l) => s + l.size, 0),
    unpackedSize,
    ...(options.keepBlobs === true ? { keepBlobs: true } : {}),
    created: new Date().toISOString(),
  };
  throwIfAborted(options.signal, `pulling ${name}`);
  await store.images.put(image);
  const sum = (k: keyof LayerTimings & `${string}Ms`): number => layerTimings.reduce((n, l) => n + l[k], 0);
  const timings: PullTimings = {
    resolveMs,
    totalMs: performance.now() - t0,
    layers: layerTimings,
    phases: { resolveMs, fetchMs: sum('fetchMs'), verifyMs: sum('verifyMs'), decompressMs: sum('decompressMs'), extractMs: sum('extractMs'), commitMs: sum('commitMs') },
  };
  options.onProgress?.({ type: 'done', image, timings });
  return { image, timings };
}

/** Keeps the verified manifest(s) and config, so the image can be inspected without the registry. */
async function storeMetadata(store: Store, r: ResolvedImage): Promise<void> {
  if (r.indexBytes) await store.content.putBytes(r.target, r.indexBytes);
  await store.content.putBytes(r.manifestDescriptor, r.manifestBytes);
  await store.content.putBytes(r.manifest.config, r.configBytes);
}

async function pullLayers(store: Store, client: RegistryClient, resolved: ResolvedImage, layers: readonly ImageLayer[], options: PullOptions, leaseId: string): Promise<LayerTimings[]> {
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
  // Every chunk request, back-off wait and unpack of the pull listens on this one signal.
  setMaxListeners(0, signal);
  const ownPool = options.pool === undefined && (options.unpackConcurrency !== undefined || options.threads === false);
  const pool =
    options.pool ??
    (ownPool ? new UnpackPool({ ...(options.unpackConcurrency !== undefined ? { size: options.unpackConcurrency } : {}), ...(options.threads === false ? { threads: false } : {}) }) : sharedUnpackPool());
  const scheduler = options.scheduler ?? (options.maxConnections !== undefined ? new FetchScheduler({ maxRequests: options.maxConnections, maxPerHost: options.maxConnections }) : sharedFetchScheduler());
  let failure: unknown;
  const progress = new ProgressWatch(options.noProgressTimeoutMs ?? DEFAULT_NO_PROGRESS_TIMEOUT_MS, (e) => {
    if (failure === undefined) failure = e;
    controller.abort(e);
  });
  const outcomes: Array<Promise<LayerTimings | undefined>> = [];
  const ctx: LayerContext = {
    store,
    client,
    ref: resolved.reference,
    options,
    signal,
    pool,
    scheduler,
    progress,
    layers,
    leaseId,
    rootless: options.rootless ?? process.getuid?.() !== 0,
    // Only the parallel inflater uses zTOCs; the lookup runs while the downloads start.
    soci: options.inflater === 'parallel' ? findSociZtocs(client, resolved.reference, resolved, signal).catch(() => undefined) : Promise.resolve(undefined),
    lowersSettled: (index) => Promise.all(outcomes.slice(0, index)).then(() => undefined),
  };
  outcomes.push(
    ...layers.map((layer, index) =>
      pullLayer(ctx, resolved.manifest.layers[index]!, layer, index).catch((e: unknown) => {
        // One failed layer stops the rest; all settle before the pull reports the first error.
        if (failure === undefined) failure = e;
        controller.abort(e);
        return undefined;
      }),
    ),
  );
  const results = await Promise.all(outcomes).finally(() => {
    progress.stop();
    return ownPool ? pool.close() : undefined;
  });
  if (failure !== undefined) throw failure;
  return results as LayerTimings[];
}

/**
 * With downloads running, a pull that receives no byte at all for this long, across all its ranges
 * of all its layers, fails. Straggling ranges are re-issued long before (after 10 s); this ends a
 * pull whose registry stopped answering altogether.
 */
export const DEFAULT_NO_PROGRESS_TIMEOUT_MS = 120_000;

/** Watches progress across all downloads of a pull, never one range alone. */
class ProgressWatch {
  private active = 0;
  private last = performance.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    onTimeout: (e: FastpullError) => void,
  ) {
    this.timer = setInterval(() => {
      if (this.active > 0 && performance.now() - this.last > this.timeoutMs) {
        onTimeout(new FastpullError('NETWORK_ERROR', `no bytes arrived for ${Math.round(this.timeoutMs / 1000)} s across all downloads of the pull`, { details: { timeoutMs: this.timeoutMs } }));
        this.last = performance.now();
      }
    }, Math.max(10, Math.min(1000, timeoutMs / 4)));
    this.timer.unref();
  }

  /** A download starts; returns its end. */
  start(): () => void {
    if (this.active++ === 0) this.last = performance.now();
    return () => void this.active--;
  }

  bytes(): void {
    this.last = performance.now();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

interface LayerContext {
  readonly progress: ProgressWatch;
  readonly store: Store;
  readonly client: RegistryClient;
  readonly ref: Reference;
  readonly options: PullOptions;
  readonly signal: AbortSignal;
  readonly pool: UnpackPool;
  readonly scheduler: FetchScheduler;
  /** The image's layers, bottom first. */
  readonly layers: readonly ImageLayer[];
  /** This pull's lease (see gc/lease.ts). */
  readonly leaseId: string;
  /** Unpack for rootless overlay mounts (PullOptions.rootless, default: not root). */
  readonly rootless: boolean;
  /** Settles when every layer below `index` is committed, found, or failed (the pull then aborts). */
  readonly lowersSettled: (index: number) => Promise<void>;
  /** The image's SOCI index, when looked for and found. */
  readonly soci: Promise<SociZtocs | undefined>;
}

/** Largest zTOC fetched for a layer: 32 KiB per checkpoint, one per 4 MiB of tar by default. */
function ztocLimit(layerSize: number): number {
  return 8 * 1024 * 1024 + Math.ceil(layerSize / 16);
}

/** The layer's zTOC bytes (digest-checked), or undefined: none, too large, or the fetch failed. */
async function layerZtoc(ctx: LayerContext, layer: ImageLayer): Promise<Uint8Array | undefined> {
  const soci = await ctx.soci;
  const desc = soci?.ztocs.get(layer.digest);
  if (!desc || desc.size > ztocLimit(layer.size)) return undefined;
  try {
    return await ctx.client.fetchBlobBytes(ctx.ref, desc, ztocLimit(layer.size), ctx.signal);
  } catch (e) {
    if (ctx.signal.aborted) throw e;
    return undefined;
  }
}

async function pullLayer(ctx: LayerContext, desc: Descriptor, layer: ImageLayer, index: number): Promise<LayerTimings> {
  const emit = (state: LayerState, bytes: number) =>
    ctx.options.onProgress?.({ type: 'layer', index, digest: layer.digest, state, bytes, total: layer.size });
  const exists = (): LayerTimings => {
    emit('exists', layer.size);
    return { digest: layer.digest, fetchMs: 0, unpackMs: 0, waitMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0, state: 'exists' };
  };
  // A snapshot laid out for the other kind of mount cannot serve this pull (overlayfs reads either
  // trusted.overlay.* or, with userxattr, user.overlay.*, never both in one mount).
  const committed = async (): Promise<boolean> => {
    const info = await ctx.store.snapshots.info(layer.chainID);
    if (info === undefined) return false;
    if ((info.rootless === true) !== ctx.rootless) {
      throw new FastpullError(
        'INVALID_ARGUMENT',
        `layer ${layer.digest}: the store at ${ctx.store.root} holds it unpacked for ${info.rootless === true ? 'rootless' : 'rootful'} overlay mounts, and this pull is ${ctx.rootless ? 'rootless' : 'rootful'}; use a separate store root for each`,
        { details: { chainID: layer.chainID, storeRootless: info.rootless === true, rootless: ctx.rootless } },
      );
    }
    return true;
  };
  if (await committed()) return exists();
  for (;;) {
    const running = inflight.get(layer.chainID);
    if (!running) break;
    emit('waiting', 0);
    await running.catch(() => undefined);
    if (await committed()) return exists();
  }
  let done!: () => void;
  const mine = new Promise<void>((r) => (done = r));
  inflight.set(layer.chainID, mine);
  let release: (() => void) | undefined;
  try {
    // Another process may be unpacking the same layer into this store: wait for it, then reuse.
    release = await lockSnapshot(ctx.store.snapshots.dir, layer.chainID, ctx.signal, () => emit('waiting', 0));
    if (await committed()) return exists();
    return await fetchAndUnpack(ctx, desc, layer, index, emit);
  } finally {
    release?.();
    inflight.delete(layer.chainID);
    done();
  }
}

/**
 * Removes a layer's blob once its snapshot is committed, unless another running pull holds it or
 * an image pulled with keepBlobs lists it (collection removes any left behind).
 */
async function dropLayerBlob(ctx: LayerContext, layer: ImageLayer): Promise<void> {
  const { store } = ctx;
  await withCollectionLock(store.root, 'exclusive', async () => {
    if ((await liveLeaseRefs(store.root, ctx.leaseId)).blobs.has(layer.digest)) return;
    const images = await store.images.list();
    if (images.some((img) => img.keepBlobs === true && img.layers.some((l) => l.digest === layer.digest))) return;
    await store.content.delete(layer.digest);
  });
}

/**
 * A blob that fails to decompress or extract may simply be corrupt: then the truthful error is the
 * digest mismatch, not whatever the decoder tripped over. Hashing the blob again costs a read, on the
 * failure path only.
 */
async function diagnose(e: unknown, blobPath: string, layer: ImageLayer, onCorrupt: () => Promise<unknown>): Promise<unknown> {
  if (isFastpullError(e) && (e.code === 'ABORTED' || e.code === 'NO_SPACE' || e.code === 'UNSUPPORTED_MEDIA_TYPE')) return e;
  let got: Digest;
  try {
    got = await hashFile(blobPath, layer.digest);
  } catch {
    return e;
  }
  if (got === layer.digest) return e;
  await onCorrupt();
  return new FastpullError('DIGEST_MISMATCH', `layer ${layer.digest}: blob digest mismatch: got ${got}, want ${layer.digest}`, {
    cause: e,
    details: { want: layer.digest, got },
  });
}

async function fetchAndUnpack(
  ctx: LayerContext,
  desc: Descriptor,
  layer: ImageLayer,
  index: number,
  emit: (state: LayerState, bytes: number) => void,
): Promise<LayerTimings> {
  const parent = index > 0 ? ctx.layers[index - 1]!.chainID : undefined;
  const { store, signal } = ctx;
  const what = `layer ${layer.digest}`;
  let ingest: Ingest | undefined;
  let active: ActiveSnapshot | undefined;
  // Stops this layer's download when the layer fails before it waits for it (and so, in the
  // finally below, no write lands in an ingest that is being put away).
  const stopFetch = new AbortController();
  let fetching: Promise<number> = Promise.resolve(0);
  try {
    emit('waiting', 0);
    let blobPath: string;
    let watermark: Watermark;
    const have = await store.content.info(layer.digest);
    if (have && have.size === layer.size) {
      blobPath = store.content.blobPath(layer.digest);
      watermark = Watermark.complete(layer.size);
    } else {
      ingest = await store.content.newIngest(desc);
      blobPath = ingest.path;
      watermark = ingest.watermark;
      let fetched = 0;
      let reported = 0;
      let reportedAt = performance.now();
      emit('fetching', 0);
      const tf = performance.now();
      fetched = ingest.resumed.reduce((n, [a, b]) => n + b - a, 0);
      const done = ctx.progress.start();
      fetching = fetchBlob(ctx.client, ctx.ref, desc, ingest, {
        have: ingest.resumed,
        chunkSize: ctx.options.chunkSize ?? DEFAULT_CHUNK_SIZE,
        ...(ctx.options.stragglerFloor !== undefined ? { stragglerFloor: ctx.options.stragglerFloor } : {}),
        ...(ctx.options.stragglerWindowMs !== undefined ? { stragglerWindowMs: ctx.options.stragglerWindowMs } : {}),
        ...(ctx.options.stallTimeoutMs !== undefined ? { stallTimeoutMs: ctx.options.stallTimeoutMs } : {}),
        scheduler: ctx.scheduler,
        signal: AbortSignal.any([signal, stopFetch.signal]),
        ...(ctx.options.onRetry ? { onRetry: ctx.options.onRetry } : {}),
        ...(ctx.options.onStraggler ? { onStraggler: ctx.options.onStraggler } : {}),
        onBytes: (n) => {
          ctx.progress.bytes();
          fetched += n;
          const now = performance.now();
          if (fetched - reported >= PROGRESS_STEP || now - reportedAt >= PROGRESS_INTERVAL_MS || fetched === layer.size) {
            reported = fetched;
            reportedAt = now;
            emit('fetching', fetched);
          }
        },
      })
        .finally(done)
        .then(
        () => performance.now() - tf,
        (e: unknown) => {
          // Wakes the unpacker that follows this blob, so it stops too.
          watermark.fail();
          throw e;
        },
      );
      // Awaited below (or in the finally): a failure while this function is busy elsewhere is
      // not an unhandled rejection.
      fetching.catch(() => undefined);
    }

    const rootless = ctx.rootless;
    // The unpacker starts as soon as a slot is free and follows the blob's watermark while the
    // download goes on: blob digest, inflate, diffID and extraction all happen as bytes land.
    active = await store.snapshots.prepare();
    const ztoc = await layerZtoc(ctx, layer);
    const unpacking = ctx.pool.run(
      {
        blobPath,
        mediaType: layer.mediaType,
        dest: active.fs,
        layer: layer.digest,
        rootless,
        ...(store.snapshots.sync ? writebackFor(syncMethod()) : {}),
        follow: { watermark: watermark.buffer, size: layer.size },
        ...(ctx.options.inflater ? { inflater: ctx.options.inflater } : {}),
        ...(ztoc ? { ztoc } : {}),
      },
      {
        signal,
        priority: layer.size,
        onStart: () => emit('extracting', 0),
      },
    );
    const [fetched, unpacked] = await Promise.allSettled([fetching, unpacking]);
    // A failed download is the cause of whatever the unpacker then saw.
    if (fetched.status === 'rejected') throw fetched.reason;
    if (unpacked.status === 'rejected') {
      throw await diagnose(unpacked.reason, blobPath, layer, async () => {
        if (!ingest) await store.content.delete(layer.digest);
      });
    }
    const fetchMs = fetched.value;
    const r = unpacked.value;
    const unpackMs = r.timings.totalMs;
    emit('verifying', layer.size);
    if (r.compressedSize !== layer.size) {
      throw new FastpullError('SIZE_MISMATCH', `${what}: blob is ${r.compressedSize} bytes, manifest says ${layer.size}`, { details: { want: layer.size, got: r.compressedSize } });
    }
    if (r.blobDigest !== layer.digest) {
      // A committed blob that no longer hashes right was damaged on disk: drop it so the next
      // pull fetches a good copy instead of failing on it forever.
      if (!ingest) await store.content.delete(layer.digest);
      throw new FastpullError('DIGEST_MISMATCH', `${what}: blob digest mismatch: got ${r.blobDigest}, want ${layer.digest} (${r.compressedSize} bytes checked)`, {
        details: { want: layer.digest, got: r.blobDigest, size: r.compressedSize },
      });
    }
    if (r.diffID !== layer.diffID) {
      throw new FastpullError('DIGEST_MISMATCH', `${what}: diffID mismatch: uncompressed layer is ${r.diffID}, config says ${layer.diffID}`, {
        details: { want: layer.diffID, got: r.diffID, size: r.uncompressedSize },
      });
    }
    const tc = performance.now();
    throwIfAborted(signal, what);
    const keepBlob = ctx.options.keepBlobs === true;
    // The blob is verified. Kept, it is committed now (fsync, rename), so it stays even if the
    // snapshot does not make it. Not kept, committing it would fsync hundreds of MB only to delete
    // them: it stays an ingest, which a failure below suspends for the next pull to resume from
    // (an aborted pull) and success discards.
    if (ingest && keepBlob) {
      await store.content.commit(ingest, r.blobDigest);
      ingest = undefined;
    }
    const checks = r.stats.lowerChecks;
    if (checks.impliedDirs.length > 0 || checks.whiteouts.length > 0) {
      // Only the layers below can say what this layer's implied directories and whiteouts should
      // be: wait until they are all committed (their own unpacks have run meanwhile).
      await ctx.lowersSettled(index);
      throwIfAborted(signal, what);
      const lowers = ctx.layers.slice(0, index).reverse().map((l) => l.chainID);
      for (const id of lowers) {
        if (!(await store.snapshots.isCommitted(id))) throw new FastpullError('ABORTED', `${what}: lower snapshot ${id} was not committed`);
      }
      reconcileWithLowers(active.fs, lowers.map((id) => store.snapshots.fsPath(id)), checks, { sameOwner: !rootless });
    }
    await store.snapshots.commit(active, {
      chainID: layer.chainID,
      diffID: layer.diffID,
      ...(parent ? { parent } : {}),
      size: r.uncompressedSize,
      ...(rootless ? { rootless } : {}),
    });
    active = undefined;
    if (ingest) {
      await store.content.abort(ingest);
      ingest = undefined;
    } else if (!keepBlob) {
      await dropLayerBlob(ctx, layer); // it was in the store before this pull
    }
    emit('committed', layer.size);
    const { waitMs, verifyMs, decompressMs, extractMs } = r.timings;
    return {
      digest: layer.digest,
      fetchMs,
      unpackMs,
      waitMs,
      verifyMs,
      decompressMs,
      extractMs,
      commitMs: performance.now() - tc,
      state: 'committed' as const,
      ...(r.checkpointsUsed !== undefined ? { ztocCheckpoints: r.checkpointsUsed } : {}),
    };
  } catch (e) {
    if (!isFastpullError(e) && signal.aborted) throw new FastpullError('ABORTED', `${what}: aborted`, { cause: e });
    throw e;
  } finally {
    stopFetch.abort();
    await fetching.catch(() => undefined);
    if (active) await store.snapshots.remove(active);
    // A layer stopped from outside (the caller aborted, another layer failed, no progress) keeps
    // what it downloaded for the next pull to resume; a layer that failed itself drops it.
    if (ingest) await (signal.aborted ? store.content.suspend(ingest) : store.content.abort(ingest));
  }
}
