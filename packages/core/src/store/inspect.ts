// An image as `inspect` shows it: its record, where it lies, and its manifest, config and index,
// each re-verified against its digest before it is shown.
import type { Descriptor } from '../oci/manifest.js';
import { verifyBytes } from '../oci/digest.js';
import { parseJSONDocument } from '../oci/json.js';
import type { Store } from './root.js';
import { resolveImage, unpackedSize } from './resolve.js';
import type { ImageRecord } from '../images/store.js';

/** An image with its documents and where it lies. */
export interface ImageDetails {
  /** The image record. */
  readonly image: ImageRecord;
  /** The store root. */
  readonly root: string;
  /** Bytes of the uncompressed layers; null when a snapshot is missing. */
  readonly unpackedSize: number | null;
  /** The snapshot directory of each layer, bottom first. */
  readonly snapshots: readonly string[];
  /** The index the name resolved to, when it was one. */
  readonly index?: unknown;
  /** The platform manifest, parsed. */
  readonly manifest: unknown;
  /** The image config, parsed. */
  readonly config: unknown;
}

/**
 * The record, documents and placement of an image found by any spelling of its reference. Throws
 * like resolveImage, DIGEST_MISMATCH when a stored document no longer matches its digest, and
 * INVALID_MANIFEST when one is not JSON or nests deeper than MAX_JSON_DEPTH.
 * @example
 * const { manifest, config } = await inspectImage(openStore(root), 'app:1');
 */
export async function inspectImage(store: Store, reference: string, platform?: string): Promise<ImageDetails> {
  const image = await resolveImage(store, reference, platform);
  const [manifest, config] = await Promise.all([readJSON(store, image.manifest, 'manifest', image.name), readJSON(store, image.config, 'config', image.name)]);
  const index = image.target.digest !== image.manifest.digest ? await readJSON(store, image.target, 'index', image.name) : undefined;
  return {
    image,
    root: store.root,
    unpackedSize: await unpackedSize(store, image),
    snapshots: image.layers.map((l) => store.snapshots.fsPath(l.chainID)),
    ...(index !== undefined ? { index } : {}),
    manifest,
    config,
  };
}

async function readJSON(store: Store, desc: Descriptor, what: string, name: string): Promise<unknown> {
  const bytes = await store.content.readBytes(desc.digest);
  verifyBytes(bytes, desc.digest, `${what} ${desc.digest}`);
  // A release without the depth bound may have stored a document too deep to send or print: this
  // image's reads fail cleanly (`fastpull rm` takes its record), every other image is untouched.
  return parseJSONDocument(bytes, `stored ${what} ${desc.digest} of ${name}`);
}
