// The commit step of a verified layer: its blob kept or dropped, the snapshot settled against the
// layers below it, then committed under its chainID by one atomic rename.
import { FastpullError, throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { ImageLayer } from '../images/store.js';
import type { ActiveSnapshot } from '../snapshots/store.js';
import { reconcileWithLowers } from '../snapshots/lowers.js';
import type { Store } from '../store/root.js';
import type { UnpackedLayer } from '../unpack/index.js';
import { liveLeaseRefs } from '../store/lease.js';
import { withCollectionLock } from '../util/collection-lock.js';
import type { LayerDownload } from './download.js';

/** What committing a layer needs from its pull. */
export interface CommitContext {
  readonly store: Store;
  readonly signal: AbortSignal;
  /** The image's layers, bottom first. */
  readonly layers: readonly ImageLayer[];
  /** Unpacked for rootless overlay mounts. */
  readonly rootless: boolean;
  /** Keep layer blobs in the content store (PullOptions.keepBlobs). */
  readonly keepBlobs: boolean;
  /** This pull's lease (see gc/lease.ts). */
  readonly leaseId: string;
  /** Settles when every layer below `index` is committed, found, or failed (the pull then aborts). */
  readonly lowersSettled: (index: number) => Promise<void>;
}

/**
 * Commits the verified layer `index` unpacked into `active`: the blob first (kept: committed, so it
 * stays even if the snapshot does not make it), then the snapshot. A blob not kept goes: one this
 * pull downloaded just before the snapshot's flush, one from the store after the commit.
 * Returns false when another writer committed the same chainID first (its snapshot is used).
 */
export async function commitLayer(
  ctx: CommitContext,
  index: number,
  active: ActiveSnapshot,
  r: Pick<UnpackedLayer, 'blobDigest' | 'uncompressedSize' | 'stats'>,
  download: LayerDownload,
): Promise<boolean> {
  const { store, signal, rootless } = ctx;
  const layer = ctx.layers[index]!;
  const what = `layer ${layer.digest}`;
  throwIfAborted(signal, what);
  // Not kept, committing the blob would fsync hundreds of MB only to delete them: it stays an
  // ingest, which a failure while settling against the lowers suspends for the next pull to resume
  // from (an aborted pull), and which goes before the flush.
  if (ctx.keepBlobs) await download.keep(r.blobDigest);
  const checks = r.stats.lowerChecks;
  if (checks.impliedDirs.length > 0 || checks.whiteouts.length > 0) {
    // Only the layers below can say what this layer's implied directories and whiteouts should
    // be: wait until they are all committed (their own unpacks have run meanwhile).
    await ctx.lowersSettled(index);
    throwIfAborted(signal, what);
    const lowers = ctx.layers
      .slice(0, index)
      .reverse()
      .map((l) => l.chainID);
    for (const id of lowers) {
      if (!(await store.snapshots.isCommitted(id))) throw new FastpullError('ABORTED', `${what}: lower snapshot ${id} was not committed`);
    }
    reconcileWithLowers(
      active.fs,
      lowers.map((id) => store.snapshots.fsPath(id)),
      checks,
      { sameOwner: !rootless },
    );
  }
  const parent = index > 0 ? ctx.layers[index - 1]!.chainID : undefined;
  // The downloaded blob goes before the snapshot's flush, which would otherwise write whatever of it
  // is still only in the page cache, to delete it a moment later. If the commit fails now (the
  // disk's error) or the process is killed during the flush, the next pull fetches the blob again
  // (most of it is freed by now anyway, see UnpackLayerOptions.follow.release).
  if (download.downloading) await download.discard();
  const mine = await store.snapshots.commit(active, {
    chainID: layer.chainID,
    diffID: layer.diffID,
    ...(parent ? { parent } : {}),
    size: r.uncompressedSize,
    ...(rootless ? { rootless } : {}),
  });
  if (download.fromStore && !ctx.keepBlobs) await dropLayerBlob(store, layer.digest, ctx.leaseId);
  return mine;
}

/**
 * Removes a layer blob whose snapshot is committed, unless a live pull other than `leaseId` holds
 * it or an image pulled with keepBlobs lists it. Under the collection lock, exclusive: whoever
 * deletes content outside collection holds it so (gc/lease.ts).
 */
export async function dropLayerBlob(store: Store, digest: Digest, leaseId: string): Promise<boolean> {
  return withCollectionLock(store.root, 'exclusive', async () => {
    if ((await liveLeaseRefs(store.root, leaseId)).blobs.has(digest)) return false;
    const images = await store.images.list();
    if (images.some((img) => img.keepBlobs === true && img.layers.some((l) => l.digest === digest))) return false;
    return store.content.delete(digest);
  });
}
