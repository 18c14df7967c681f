// An image as `inspect` shows it: its record, where it lies, and its manifest, config and index,
// each re-verified against its digest before it is shown.
import type { Descriptor } from '../oci/manifest.js';
import { verifyBytes } from '../oci/digest.js';
import type { Store } from '../store.js';
import { resolveImage, unpackedSize } from './resolve.js';
import type { ImageRecord } from './store.js';

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
 * like resolveImage, and DIGEST_MISMATCH when a stored document no longer matches its digest.
 * @example
 * const { manifest, config } = await inspectImage(openStore(root), 'app:1');
 */
export async function inspectImage(store: Store, reference: string, platform?: string): Promise<ImageDetails> {
  const image = await resolveImage(store, reference, platform);
  const [manifest, config] = await Promise.all([readJSON(store, image.manifest, 'manifest'), readJSON(store, image.config, 'config')]);
  const index = image.target.digest !== image.manifest.digest ? await readJSON(store, image.target, 'index') : undefined;
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

async function readJSON(store: Store, desc: Descriptor, what: string): Promise<unknown> {
  const bytes = await store.content.readBytes(desc.digest);
  verifyBytes(bytes, desc.digest, `${what} ${desc.digest}`);
  return JSON.parse(bytes.toString('utf8')) as unknown;
}
