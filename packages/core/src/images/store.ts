// Image records: a name points to a manifest (for one platform) and the stack of snapshots it unpacks to.
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { formatPlatform, hostPlatform, type Platform } from '../oci/platform.js';
import { writeFileAtomic } from '../util/fs.js';
import type { ImageSignatures } from '../signatures/types.js';

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
  /**
   * Who the record is for. 'containerd': fastpulld's snapshotter pulled the image for containerd,
   * whose snapshot records borrow its layers; collection removes such a record once no containerd
   * record uses any of its layers (see HELD_FOR_CONTAINERD_GRACE_MS). Absent: the user's.
   */
  readonly heldFor?: 'containerd';
  /** What signature verification decided, when a policy covered the image; absent: none did. */
  readonly signatures?: ImageSignatures;
}

/**
 * Image records by canonical name (see formatReference) and platform: pulling a second platform of a
 * multi-platform tag adds a record beside the first, never replaces it.
 */
export interface ImageStore {
  /** The directory it keeps its records in (collection sweeps temporary files there). */
  readonly dir: string;
  /**
   * The record of `name` (a canonical reference) for `platform` (`os/arch[/variant]`), or undefined.
   * Without a platform: this host's record of the name, else the only one, else the first by platform.
   */
  get(name: string, platform?: string): Promise<ImageRecord | undefined>;
  /** Writes a record, replacing any of the same name and platform. */
  put(record: ImageRecord): Promise<void>;
  /** Every record, sorted by name, then platform. */
  list(): Promise<ImageRecord[]>;
  /** Every record of one name, sorted by platform. */
  records(name: string): Promise<ImageRecord[]>;
  /**
   * Removes the record of `name` for `platform`, or every record of the name without one; false when
   * there was none. Its content stays until garbage collection.
   */
  delete(name: string, platform?: string): Promise<boolean>;
}

/**
 * Image records as one JSON file each under `<root>/images`, named by a SHA-256 of the name and
 * platform, replaced atomically. Reached as `openStore(root).images`. Throws NO_SPACE or INTERNAL when
 * the disk fails it; `put` throws INVALID_ARGUMENT for a record without layers. Records written before
 * records were keyed by platform (a file named by the SHA-256 of the name alone) are read as they are
 * and replaced by the next `put` of the same name and platform.
 * @example
 * const store = openStore(root);
 * const image = await store.images.get('docker.io/library/ubuntu:24.04', 'linux/arm64/v8');
 * if (image) console.log(image.chainID, image.layers.length);
 */
export class FileImageStore implements ImageStore {
  /** `<root>/images`. */
  readonly dir: string;

  constructor(root: string) {
    this.dir = join(root, 'images');
  }

  /** The file of a record: `<sha256 of "name platform">.json`. */
  path(name: string, platform: string): string {
    return join(this.dir, `${createHash('sha256').update(`${name} ${platform}`).digest('hex')}.json`);
  }

  /** Where records keyed by name alone were kept. */
  private legacyPath(name: string): string {
    return join(this.dir, `${createHash('sha256').update(name).digest('hex')}.json`);
  }

  private async read(path: string, name: string): Promise<ImageRecord | undefined> {
    try {
      return JSON.parse(await fsp.readFile(path, 'utf8')) as ImageRecord;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      if (e instanceof SyntaxError) return undefined;
      throw fromFsError(e, `reading image ${name}`);
    }
  }

  async get(name: string, platform?: string): Promise<ImageRecord | undefined> {
    if (platform !== undefined) {
      const rec = await this.read(this.path(name, platform), name);
      if (rec?.name === name) return rec;
      const legacy = await this.read(this.legacyPath(name), name);
      return legacy?.name === name && formatPlatform(legacy.platform) === platform ? legacy : undefined;
    }
    const all = await this.records(name);
    const host = formatPlatform(hostPlatform());
    return all.find((r) => formatPlatform(r.platform) === host) ?? all[0];
  }

  async records(name: string): Promise<ImageRecord[]> {
    return (await this.list()).filter((r) => r.name === name);
  }

  async put(record: ImageRecord): Promise<void> {
    if (record.layers.length === 0) throw new FastpullError('INVALID_ARGUMENT', `image ${record.name} has no layers`);
    const platform = formatPlatform(record.platform);
    try {
      await writeFileAtomic(this.path(record.name, platform), `${JSON.stringify(record, null, 2)}\n`);
      // The same record under its old name-only key would be listed twice: drop it.
      const legacy = await this.read(this.legacyPath(record.name), record.name);
      if (legacy?.name === record.name && formatPlatform(legacy.platform) === platform) await fsp.rm(this.legacyPath(record.name), { force: true });
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
    for (const n of names.filter((x) => x.endsWith('.json') && !x.startsWith('.'))) {
      try {
        out.push(JSON.parse(await fsp.readFile(join(this.dir, n), 'utf8')) as ImageRecord);
      } catch {
        // A torn or foreign file is not an image record.
      }
    }
    return out.sort((a, b) => a.name.localeCompare(b.name) || formatPlatform(a.platform).localeCompare(formatPlatform(b.platform)));
  }

  async delete(name: string, platform?: string): Promise<boolean> {
    const victims = (await this.records(name)).filter((r) => platform === undefined || formatPlatform(r.platform) === platform);
    let removed = false;
    for (const r of victims) {
      const p = formatPlatform(r.platform);
      for (const path of [this.path(name, p), this.legacyPath(name)]) {
        const rec = await this.read(path, name);
        if (rec?.name !== name || formatPlatform(rec.platform) !== p) continue;
        try {
          await fsp.unlink(path);
          removed = true;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw fromFsError(e, `removing image ${name}`);
        }
      }
    }
    return removed;
  }
}
