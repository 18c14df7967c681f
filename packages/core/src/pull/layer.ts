// One layer of a pull, through its steps: skip it when it is unpacked already (or wait for the
// pull that unpacks it), else download, unpack following the download, verify, commit.
import { FastpullError, isFastpullError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { ImageLayer } from '../images/store.js';
import type { SociZtocs } from '../registry/soci.js';
import type { ActiveSnapshot } from '../snapshots/store.js';
import type { UnpackPool } from '../unpack/pool/pool.js';
import { commitLayer, type CommitContext } from './commit.js';
import { LayerDownload, type DownloadContext } from './download.js';
import { lockSnapshot } from '../snapshots/lock.js';
import { isUnpacked } from './plan.js';
import type { PriorityGate } from './priority.js';
import type { PullCpuBudget } from '../util/pull-cpu.js';
import { LayerProgress } from './progress.js';
import { committedTimings, existsTimings } from './timings.js';
import type { LayerTimings, PullOptions } from './types.js';
import { diagnoseUnpackFailure, verifyUnpacked } from './verify.js';
import { syncMethod, writebackFor } from '../snapshots/durable.js';

/** Everything the layers of one pull share. */
export interface LayerContext extends DownloadContext, CommitContext {
  readonly options: PullOptions;
  readonly pool: UnpackPool;
  /** Where a low-priority pull waits for pulls above it before each layer. */
  readonly gate: PriorityGate;
  /** The pull's CPU budget, which its passes follow; absent: none. */
  readonly cpuBudget?: PullCpuBudget;
  /** The image's SOCI index, when looked for and found. */
  readonly soci: Promise<SociZtocs | undefined>;
}

/** Layers being unpacked by this process, by chainID: a second pull of the same layer waits for the first. */
const inflight = new Map<Digest, Promise<void>>();

/**
 * Pulls layer `index`: `exists` when its snapshot is committed (found now, or after waiting for
 * another pull of this or another process that unpacks it), else fetched, unpacked, verified and
 * committed. Its progress goes to `options.onProgress`, states only moving forward.
 */
export async function pullLayer(ctx: LayerContext, desc: Descriptor, index: number): Promise<LayerTimings> {
  const layer = ctx.layers[index]!;
  const progress = new LayerProgress({ index, digest: layer.digest, size: layer.size }, ctx.options.onProgress);
  const exists = (): LayerTimings => {
    progress.exists();
    return existsTimings(layer.digest);
  };
  // A background pull starts no layer while a pull above it runs. It waits before it claims the
  // layer: a pull above it that needs the same layer unpacks it itself rather than wait for this one.
  await ctx.gate.whenMayStart(ctx.ticket, ctx.signal, () => progress.waiting());
  if (await isUnpacked(ctx.store, layer, ctx.rootless)) return exists();
  for (;;) {
    const running = inflight.get(layer.chainID);
    if (!running) break;
    progress.waiting();
    await running.catch(() => undefined);
    if (await isUnpacked(ctx.store, layer, ctx.rootless)) return exists();
  }
  let done!: () => void;
  inflight.set(layer.chainID, new Promise<void>((r) => (done = r)));
  let release: (() => void) | undefined;
  try {
    // Another process may be unpacking the same layer into this store: wait for it, then reuse.
    release = await lockSnapshot(ctx.store.snapshots.dir, layer.chainID, ctx.signal, () => progress.waiting());
    if (await isUnpacked(ctx.store, layer, ctx.rootless)) return exists();
    return await fetchAndUnpack(ctx, desc, index, progress);
  } finally {
    release?.();
    inflight.delete(layer.chainID);
    done();
  }
}

/** The steps of a layer that is not in the store yet; nothing is committed unless both digests match. */
async function fetchAndUnpack(ctx: LayerContext, desc: Descriptor, index: number, progress: LayerProgress): Promise<LayerTimings> {
  const { store, signal } = ctx;
  const layer = ctx.layers[index]!;
  let download: LayerDownload | undefined;
  let active: ActiveSnapshot | undefined;
  try {
    progress.waiting();
    download = await LayerDownload.start(ctx, desc, layer, progress, index);
    const { blobPath } = download;
    // The unpacker starts as soon as a slot is free and follows the blob's watermark while the
    // download goes on: blob digest, inflate, diffID and extraction all happen as bytes land.
    active = await store.snapshots.prepare();
    const ztoc = await layerZtoc(ctx, layer);
    // The blob is dropped after the commit (unless kept): the unpacker frees it as it goes.
    const release = download.releasing(ctx.keepBlobs);
    const { observer } = ctx.options;
    // The pass's thread and its consumed bytes as last reported, for the observer.
    let thread = 0;
    let consumed = 0;
    const unpacking = ctx.pool.run(
      {
        blobPath,
        mediaType: layer.mediaType,
        dest: active.fs,
        layer: layer.digest,
        rootless: ctx.rootless,
        ...(store.snapshots.sync ? writebackFor(syncMethod(ctx.options.tuning?.syncMethod)) : {}),
        follow: { watermark: download.watermark.buffer, size: layer.size, ...(release !== undefined ? { release } : {}) },
        ...(ctx.options.inflater ? { inflater: ctx.options.inflater } : {}),
        ...(ztoc ? { ztoc } : {}),
        ...(ctx.options.tuning ? { tuning: ctx.options.tuning } : {}),
      },
      {
        signal,
        priority: layer.size,
        rank: ctx.ticket,
        ...(ctx.cpuBudget ? { cpuBudget: ctx.cpuBudget } : {}),
        onStart: (t, borrowed) => {
          thread = t;
          progress.unpackStarted();
          observer?.unpackStarted?.(index, { thread, read: () => consumed, ...(borrowed ? { borrowed } : {}) });
        },
        onPlaced: (where) => observer?.unpackPlaced?.(index, { thread, tid: where.tid, cpus: where.cpus }),
        onBytes: (n) => {
          consumed = n;
          progress.unpackProgress(n);
        },
      },
    );
    if (observer?.unpackEnded) {
      const ended = observer.unpackEnded;
      unpacking.then(
        (r) => ended(index, { thread, timings: r.timings }),
        () => ended(index, { thread }),
      );
    }
    const [fetched, unpacked] = await Promise.allSettled([download.done, unpacking]);
    const bad = download;
    // A failed download is the cause of whatever the unpacker then saw.
    if (fetched.status === 'rejected') throw fetched.reason;
    if (unpacked.status === 'rejected')
      throw await diagnoseUnpackFailure(unpacked.reason, blobPath, layer, () => bad.dropDamaged(), download.watermark.releaseGranted);
    const r = unpacked.value;
    progress.verifying();
    await verifyUnpacked(layer, r, () => bad.dropDamaged());
    const tc = performance.now();
    await commitLayer(ctx, index, active, r, download);
    // Measured before the event, so the commit's time does not include the listener's.
    const commitMs = performance.now() - tc;
    active = undefined;
    progress.committed();
    return committedTimings(layer.digest, fetched.value, r, commitMs);
  } catch (e) {
    if (!isFastpullError(e) && signal.aborted) throw new FastpullError('ABORTED', `layer ${layer.digest}: aborted`, { cause: e });
    throw e;
  } finally {
    // Stopped from outside (the caller aborted, another layer failed, no progress), the layer
    // keeps what it downloaded for the next pull to resume; failed itself, it drops it.
    await download?.close(signal.aborted);
    if (active) await store.snapshots.remove(active);
  }
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
