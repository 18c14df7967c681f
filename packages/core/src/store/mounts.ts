// The overlay mount for a recorded image: lowerdir is its committed snapshots, top layer first.
import type { Mount } from '../snapshots/store.js';
import type { Store } from './root.js';
import { resolveImage } from './resolve.js';

export { resolveImage } from './resolve.js';

/**
 * The read-only mounts that present an image's tree. Add an upperdir and workdir to the overlay
 * options to get a writable container root. Throws like {@link resolveImage}, and NOT_FOUND when
 * a snapshot of the image has been removed.
 * @example
 * const [m] = await mountsFor(openStore(root), 'app:1'); // { type: 'overlay', options: ['lowerdir=...'] }
 */
export async function mountsFor(store: Store, reference: string, platform?: string): Promise<Mount[]> {
  const image = await resolveImage(store, reference, platform);
  return store.snapshots.mounts(image.layers.map((l) => l.chainID));
}
