// What pulls killed earlier (kill -9, power loss) left in the store and nobody needs any more,
// reclaimed by the next pull of the image when it succeeds, instead of waiting for a collection:
// the leases of dead processes, their downloads of blobs whose layers are unpacked by now (a kill
// between the snapshot's commit and the ingest's removal left one), and layer blobs whose
// snapshots are committed and that nothing keeps. Runs under the collection lock held
// exclusively, as collection does, so a pull taking a lease meanwhile is seen or sees the result.
import type { Digest } from '../oci/digest.js';
import type { ImageLayer, ImageRecord } from '../images/store.js';
import { liveLeaseRefs } from '../store/lease.js';
import { withCollectionLock } from '../util/collection-lock.js';
import type { Store } from '../store/root.js';

/** What {@link reclaimDeadPulls} removed. */
export interface Reclaimed {
  /** Ingests of dead processes whose blobs no pull will resume. */
  readonly ingests: readonly string[];
  /** Layer blobs whose snapshots are committed and that no image record or live lease keeps. */
  readonly blobs: readonly Digest[];
}

/**
 * After a successful pull of `layers` (all committed now) holding lease `leaseId`: removes the
 * leases of dead processes (free owner locks), the dead ingests of blobs that one of these layers
 * is, or that the store holds committed (unless a live pull lists them: it may be about to resume
 * one), and, unless `keepBlobs`, the blobs of these layers that neither an image pulled with
 * keepBlobs nor another live pull's lease lists. Ingests of other blobs stay for a day, for a pull
 * of their own image to resume.
 */
export async function reclaimDeadPulls(store: Store, layers: readonly ImageLayer[], leaseId: string, keepBlobs: boolean): Promise<Reclaimed> {
  return withCollectionLock(store.root, 'exclusive', async () => {
    // Also removes the leases of dead processes.
    const leased = await liveLeaseRefs(store.root, leaseId);
    const mine = new Set(layers.map((l) => l.digest));
    const ingests = await store.content.sweep(undefined, {
      unneeded: async (digest) => !leased.blobs.has(digest) && (mine.has(digest) || (await store.content.info(digest)) !== undefined),
    });
    const blobs: Digest[] = [];
    if (!keepBlobs) {
      let images: readonly ImageRecord[] | undefined;
      for (const layer of layers) {
        if (leased.blobs.has(layer.digest) || (await store.content.info(layer.digest)) === undefined) continue;
        if (!(await store.snapshots.isCommitted(layer.chainID))) continue;
        images ??= await store.images.list();
        if (await imageKeeps(store, images, layer.digest)) continue;
        if (await store.content.delete(layer.digest)) blobs.push(layer.digest);
      }
    }
    return { ingests, blobs };
  });
}

/**
 * True when an image record keeps the layer blob `digest`, by the rule collection applies: an image
 * pulled with keepBlobs lists it, or lists it for a snapshot that is not committed (it is needed to
 * unpack that one).
 */
async function imageKeeps(store: Store, images: readonly ImageRecord[], digest: Digest): Promise<boolean> {
  for (const img of images) {
    for (const l of img.layers) {
      if (l.digest !== digest) continue;
      if (img.keepBlobs === true || !(await store.snapshots.isCommitted(l.chainID))) return true;
    }
  }
  return false;
}
