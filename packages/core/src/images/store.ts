// Image records: a name points to a manifest (for one platform) and the stack of snapshots it unpacks to.
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Platform } from '../oci/platform.js';
import { writeFileAtomic } from '../util/fs.js';

export interface ImageLayer {
  readonly digest: Digest;
  readonly size: number;
  readonly mediaType: string;
  readonly diffID: Digest;
  readonly chainID: Digest;
}

export interface ImageRecord {
  /** Canonical reference, e.g. `docker.io/library/ubuntu:24.04`. */
  readonly name: string;
  /** What the name resolved to: an index or a manifest. */
  readonly target: Descriptor;
  /** The platform manifest that was unpacked. */
  readonly manifest: Descriptor;
  readonly config: Descriptor;
  readonly platform: Platform;
  readonly layers: readonly ImageLayer[];
  /** chainID of the whole stack (the top layer's). */
  readonly chainID: Digest;
  /** Sum of the compressed layer sizes. */
  readonly size: number;
  /** Sum of the uncompressed layer sizes (the tars; the unpacked files take about this much). */
  readonly unpackedSize?: number;
  /** The layer blobs were kept after unpacking (`keepBlobs`); else they are dropped once unpacked. */
  readonly keepBlobs?: boolean;
  readonly created: string;
}

export interface ImageStore {
  get(name: string): Promise<ImageRecord | undefined>;
  put(record: ImageRecord): Promise<void>;
  list(): Promise<ImageRecord[]>;
  delete(name: string): Promise<boolean>;
}

/** Image records as one JSON file each under `<root>/images`, replaced atomically. */
export class FileImageStore implements ImageStore {
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
