// Image records: a name points to a manifest (for one platform) and the stack of snapshots it unpacks to.
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Platform } from '../oci/platform.js';
import { writeFileAtomic } from '../util/fs.js';

/** One layer of a recorded image. */
export interface ImageLayer {
  /** Digest of the (compressed) layer blob. */
  readonly digest: Digest;
  /** Size of the layer blob in bytes. */
  readonly size: number;
  /** The layer's media type, which says how it is compressed. */
  readonly mediaType: string;
  /** Digest of the uncompressed tar, from the image config. */
  readonly diffID: Digest;
  /** chainID of the stack up to this layer: the name of its snapshot. */
  readonly chainID: Digest;
}

/** What a pull recorded about an image: what its name resolved to, and the snapshots it unpacked into. */
export interface ImageRecord {
  /** Canonical reference, e.g. `docker.io/library/ubuntu:24.04`. */
  readonly name: string;
  /** What the name resolved to: an index or a manifest. */
  readonly target: Descriptor;
  /** The platform manifest that was unpacked. */
  readonly manifest: Descriptor;
  /** The image config. */
  readonly config: Descriptor;
  /** The platform of the unpacked manifest. */
  readonly platform: Platform;
  /** The layers, bottom first. */
  readonly layers: readonly ImageLayer[];
  /** chainID of the whole stack (the top layer's). */
  readonly chainID: Digest;
  /** Sum of the compressed layer sizes. */
  readonly size: number;
  /** Sum of the uncompressed layer sizes (the tars; the unpacked files take about this much). */
  readonly unpackedSize?: number;
  /** The layer blobs were kept after unpacking (`keepBlobs`); else they are dropped once unpacked. */
  readonly keepBlobs?: boolean;
  /** When the record was written (ISO 8601). */
  readonly created: string;
}

/** Image records by canonical name (see formatReference). */
export interface ImageStore {
  /** The record of `name` (a canonical reference), or undefined. */
  get(name: string): Promise<ImageRecord | undefined>;
  /** Writes a record, replacing any of the same name. */
  put(record: ImageRecord): Promise<void>;
  /** Every record, sorted by name. */
  list(): Promise<ImageRecord[]>;
  /** Removes a record; false when there was none. Its content stays until garbage collection. */
  delete(name: string): Promise<boolean>;
}

/**
 * Image records as one JSON file each under `<root>/images`, replaced atomically. Reached as
 * `openStore(root).images`. Throws NO_SPACE or INTERNAL when the disk fails it; `put` throws
 * INVALID_ARGUMENT for a record without layers.
 * @example
 * const store = openStore(root);
 * const image = await store.images.get('docker.io/library/ubuntu:24.04');
 * if (image) console.log(image.chainID, image.layers.length);
 */
export class FileImageStore implements ImageStore {
  /** `<root>/images`. */
  readonly dir: string;

  constructor(root: string) {
    this.dir = join(root, 'images');
  }

  private path(name: string): string {
    return join(this.dir, `${createHash('sha256').update(name).digest('hex')}.json`);
  }

  async get(name: string): Promise<ImageRecord | undefined> {
    try {
      const rec = JSON.parse(await fsp.readFile(this.path(name), 'utf8')) as ImageRecord;
      return rec.name === name ? rec : undefined;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw fromFsError(e, `reading image ${name}`);
    }
  }

  async put(record: ImageRecord): Promise<void> {
    if (record.layers.length === 0) throw new FastpullError('INVALID_ARGUMENT', `image ${record.name} has no layers`);
    try {
      await writeFileAtomic(this.path(record.name), `${JSON.stringify(record, null, 2)}\n`);
    } catch (e) {
      throw fromFsError(e, `recording image ${record.name}`);
    }
  }

  async list(): Promise<ImageRecord[]> {
    let names: string[];
    try {
      names = await fsp.readdir(this.dir);
    } catch {
      return [];
    }
    const out: ImageRecord[] = [];
    for (const n of names.filter((x) => x.endsWith('.json'))) {
      try {
        out.push(JSON.parse(await fsp.readFile(join(this.dir, n), 'utf8')) as ImageRecord);
      } catch {
        // A torn or foreign file is not an image record.
      }
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  async delete(name: string): Promise<boolean> {
    try {
      await fsp.unlink(this.path(name));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw fromFsError(e, `removing image ${name}`);
    }
  }
}
