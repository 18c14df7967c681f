// Deleting one blob on request: refused while anything still uses it.
import { FastpullError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { ImageRecord } from '../images/store.js';
import type { Store } from '../store/root.js';
import { liveLeaseRefs } from '../store/lease.js';
import { withCollectionLock } from '../util/collection-lock.js';

/** True when `image` names `digest` as its index, manifest, config or a layer. */
export function imageNamesBlob(image: ImageRecord, digest: Digest): boolean {
  return image.target.digest === digest || image.manifest.digest === digest || image.config.digest === digest || image.layers.some((l) => l.digest === digest);
}

/**
 * Removes one blob. INVALID_ARGUMENT while a running pull holds it or an image record names it;
 * NOT_FOUND when the store does not hold it. Runs under the collection lock, so no pull takes a lease on it meanwhile.
 */
export async function deleteBlob(store: Store, digest: Digest, signal?: AbortSignal): Promise<void> {
  await withCollectionLock(
    store.root,
    'exclusive',
    async () => {
      if ((await liveLeaseRefs(store.root)).blobs.has(digest)) {
        throw new FastpullError('INVALID_ARGUMENT', `blob ${digest} is in use by a running pull; try again when it is done`);
      }
      const user = (await store.images.list()).find((i) => imageNamesBlob(i, digest));
      if (user) throw new FastpullError('INVALID_ARGUMENT', `blob ${digest} is in use by image ${user.name}; remove the image first`);
      if (!(await store.content.delete(digest))) throw new FastpullError('NOT_FOUND', `blob ${digest} is not in the store`);
    },
    signal,
  );
}
