// The overlay mount for a recorded image: lowerdir is its committed snapshots, top layer first.
import { FastpullError } from '../errors.js';
import { formatReference, parseReference } from '../oci/reference.js';
import type { Mount } from '../snapshots/store.js';
import type { Store } from '../store.js';
import type { ImageRecord } from './store.js';

/**
 * Finds an image by any spelling of its reference (`ubuntu` finds `docker.io/library/ubuntu:latest`).
 * Throws INVALID_REFERENCE for a bad reference and NOT_FOUND when the image is not in the store.
 * @example
 * const image = await resolveImage(openStore(root), 'ubuntu:24.04');
 * console.log(image.manifest.digest);
 */
export async function resolveImage(store: Store, reference: string): Promise<ImageRecord> {
  const name = formatReference(parseReference(reference));
  const image = await store.images.get(name);
  if (!image) throw new FastpullError('NOT_FOUND', `image ${name} is not in the store at ${store.root}; pull it first`);
  return image;
}

/**
 * The read-only mounts that present an image's tree. Add an upperdir and workdir to the overlay
 * options to get a writable container root. Throws like {@link resolveImage}, and NOT_FOUND when
 * a snapshot of the image has been removed.
 * @example
 * const [m] = await mountsFor(openStore(root), 'app:1'); // { type: 'overlay', options: ['lowerdir=...'] }
 */
export async function mountsFor(store: Store, reference: string): Promise<Mount[]> {
  const image = await resolveImage(store, reference);
  return store.snapshots.mounts(image.layers.map((l) => l.chainID));
}
