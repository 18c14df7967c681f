// Finding a recorded image by any spelling of its reference, digests included, and what an image
// takes on disk now.
import { FastpullError } from '../errors.js';
import { formatReference, parseReference, referenceName } from '../oci/reference.js';
import type { Store } from '../store.js';
import type { ImageRecord } from './store.js';

/**
 * Finds an image by any spelling of its reference (`ubuntu` finds `docker.io/library/ubuntu:latest`).
 * A reference with a digest (`repo@sha256:...`, `repo:tag@sha256:...`) finds the image of that
 * repository pulled by it, or pulled by a tag and resolved to that manifest (or index); with a tag
 * too, the record of that tag first. Throws INVALID_REFERENCE for a bad reference and NOT_FOUND when
 * the image is not in the store.
 * @example
 * const image = await resolveImage(openStore(root), 'ubuntu:24.04');
 * console.log(image.manifest.digest);
 */
export async function resolveImage(store: Store, reference: string): Promise<ImageRecord> {
  const ref = parseReference(reference);
  const name = formatReference(ref);
  const exact = await store.images.get(name);
  if (exact) return exact;
  if (ref.digest !== undefined) {
    const repo = referenceName(ref);
    const matches = (await store.images.list()).filter(
      (i) => referenceName(parseReference(i.name)) === repo && (i.manifest.digest === ref.digest || i.target.digest === ref.digest),
    );
    const tagged = ref.tag !== undefined ? matches.find((i) => parseReference(i.name).tag === ref.tag) : undefined;
    const found = tagged ?? matches[0];
    if (found) return found;
  }
  throw new FastpullError('NOT_FOUND', `image ${name} is not in the store at ${store.root}; pull it first`);
}

/**
 * Bytes of the image's uncompressed layers as its snapshots record them now; null when one is gone.
 * @example
 * const size = await unpackedSize(store, await resolveImage(store, 'app:1'));
 */
export async function unpackedSize(store: Store, image: ImageRecord): Promise<number | null> {
  let total = 0;
  for (const l of image.layers) {
    const info = await store.snapshots.info(l.chainID);
    if (!info) return null;
    total += info.size;
  }
  return total;
}
