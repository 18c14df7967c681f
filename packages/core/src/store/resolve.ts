// Finding a recorded image by any spelling of its reference, digests included, and what an image
// takes on disk now.
import { FastpullError } from '../errors.js';
import { formatPlatform, hostPlatform, parsePlatform } from '../oci/platform.js';
import { formatReference, parseReference, referenceName } from '../oci/reference.js';
import type { Store } from './root.js';
import type { ImageRecord } from '../images/store.js';

/**
 * Finds an image by any spelling of its reference (`ubuntu` finds `docker.io/library/ubuntu:latest`).
 * A reference with a digest (`repo@sha256:...`, `repo:tag@sha256:...`) finds the image of that
 * repository pulled by it, or pulled by a tag and resolved to that manifest (or index); with a tag
 * too, the record of that tag first. A name pulled for several platforms gives the record of
 * `platform` (`os/arch[/variant]`), else this host's, else the only one. Throws INVALID_REFERENCE for a
 * bad reference, NOT_FOUND when the image (for that platform) is not in the store, and
 * INVALID_ARGUMENT when several platforms of it are and none is this host's.
 * @example
 * const image = await resolveImage(openStore(root), 'ubuntu:24.04');
 * console.log(image.manifest.digest);
 */
export async function resolveImage(store: Store, reference: string, platform?: string): Promise<ImageRecord> {
  const { name, records } = await findImages(store, reference, platform);
  if (records.length === 1) return records[0]!;
  const host = formatPlatform(hostPlatform());
  const mine = records.find((i) => formatPlatform(i.platform) === host);
  if (mine) return mine;
  throw new FastpullError('INVALID_ARGUMENT', `image ${name} is in the store for ${platforms(records)}; name one with --platform`);
}

/**
 * Every record an image reference names (one per platform it was pulled for), found as resolveImage
 * finds them; with `platform`, only that platform's. Throws NOT_FOUND when there is none.
 * @example
 * const { name, records } = await findImages(openStore(root), 'app:1');
 */
export async function findImages(store: Store, reference: string, platform?: string): Promise<{ name: string; records: ImageRecord[] }> {
  const ref = parseReference(reference);
  let name = formatReference(ref);
  const want = platform !== undefined && platform !== '' ? formatPlatform(parsePlatform(platform)) : undefined;
  let found = await store.images.records(name);
  if (found.length === 0 && ref.digest !== undefined) {
    const repo = referenceName(ref);
    const matches = (await store.images.list()).filter(
      (i) => referenceName(parseReference(i.name)) === repo && (i.manifest.digest === ref.digest || i.target.digest === ref.digest),
    );
    const tagged = ref.tag !== undefined ? matches.filter((i) => parseReference(i.name).tag === ref.tag) : [];
    const pool = tagged.length > 0 ? tagged : matches;
    found = pool.filter((i) => i.name === pool[0]?.name);
    if (found.length > 0) name = found[0]!.name;
  }
  const all = found;
  if (want !== undefined) found = found.filter((i) => formatPlatform(i.platform) === want);
  if (found.length === 0) {
    const other = want !== undefined && all.length > 0 ? ` for ${want} (it is there for ${platforms(all)})` : '';
    throw new FastpullError('NOT_FOUND', `image ${name} is not in the store at ${store.root}${other}; pull it first`);
  }
  return { name, records: found };
}

function platforms(images: readonly ImageRecord[]): string {
  return images.map((i) => formatPlatform(i.platform)).join(', ');
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
