// The content store: verified blobs under blobs/<alg>/<hex>; downloads land in ingests first and are
// invisible until commit checks their size and digest and renames them into place.
import { createHash } from 'node:crypto';
import { createReadStream, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import { parseDigest, verifyBytes, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { randomId, syncDir, writeFileAtomic } from '../util/fs.js';
import { claimDir, sweepDeadDirs, tryClaimDir } from '../util/owner.js';
import { closeIngest, openIngest, removeRecord, type Ingest, type OpenIngest } from './ingest.js';
import { RANGES_FILE, readRanges } from './ranges-record.js';

export type { Ingest } from './ingest.js';

/** A committed blob. */
export interface BlobInfo {
  /** Its digest. */
  readonly digest: Digest;
  /** Its size in bytes. */
  readonly size: number;
}

/** What pulling and collection need from a content store. */
export interface ContentStore {
  /** The directory it keeps its files in (collection sweeps temporary files under it). */
  readonly dir: string;
  /** Path of a committed blob (whether or not it exists). */
  blobPath(digest: Digest): string;
  /** The committed blob's size, or undefined when it is not in the store. */
  info(digest: Digest): Promise<BlobInfo | undefined>;
  /** A committed blob's bytes (NOT_FOUND when it is not there); for small blobs. */
  readBytes(digest: Digest): Promise<Buffer>;
  /** Stores small verified bytes (manifests, configs) directly. */
  putBytes(desc: Pick<Descriptor, 'digest' | 'size'>, bytes: Uint8Array): Promise<void>;
  /** Starts (or resumes) a download of `expected`. */
  newIngest(expected: Descriptor): Promise<Ingest>;
  /**
   * Commits an ingest: checks its size, and its digest (`verified` is the digest the caller computed
   * while reading the complete file; without it the file is hashed here).
   */
  commit(ingest: Ingest, verified?: Digest): Promise<void>;
  /** Drops an ingest and what it holds. */
  abort(ingest: Ingest): Promise<void>;
  /** Stops an ingest, keeping what landed for a later resume. */
  suspend(ingest: Ingest): Promise<void>;
  /** Removes a committed blob; false when it was not there. */
  delete(digest: Digest): Promise<boolean>;
  /** Every committed blob. */
  list(): Promise<BlobInfo[]>;
  /**
   * Removes ingests whose writer died and that nobody resumed within `olderThanMs` (default
   * STALE_INGEST_MS), and at once those whose blob `options.unneeded` says no pull will resume;
   * returns their ids. `dryRun`: names them, removes none.
   */
  sweep(olderThanMs?: number, options?: SweepIngestOptions): Promise<string[]>;
}

/** Options of {@link ContentStore.sweep}. */
export interface SweepIngestOptions {
  /** True for a blob whose ingest no pull will resume (its layer is unpacked by now). */
  readonly unneeded?: (digest: Digest) => Promise<boolean>;
  /** Name what would be removed, remove nothing. */
  readonly dryRun?: boolean;
}

/**
 * The on-disk content store under `<root>/content`, reached as `openStore(root).content`. Blobs
 * live at `blobs/<algorithm>/<hex>`; nothing appears there unverified. Methods throw NOT_FOUND,
 * SIZE_MISMATCH, DIGEST_MISMATCH, NO_SPACE or INTERNAL as their documentation says.
 * @example
 * const content = openStore(root).content;
 * const ingest = await content.newIngest(desc);
 * await ingest.write(bytes, 0);
 * await content.commit(ingest); // hashes the file, then renames it into place
 * console.log(content.blobPath(desc.digest));
 */
export class FileContentStore implements ContentStore {
  /** `<root>/content`. */
  readonly dir: string;

  constructor(root: string) {
    this.dir = join(root, 'content');
  }

  blobPath(digest: Digest): string {
    const { algorithm, hex } = parseDigest(digest);
    return join(this.dir, 'blobs', algorithm, hex);
  }

  async info(digest: Digest): Promise<BlobInfo | undefined> {
    try {
      const st = await fsp.stat(this.blobPath(digest));
      return { digest, size: st.size };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw fromFsError(e, `reading content ${digest}`);
    }
  }

  async readBytes(digest: Digest): Promise<Buffer> {
    try {
      return await fsp.readFile(this.blobPath(digest));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new FastpullError('NOT_FOUND', `content ${digest}: not in the store`, { cause: e });
      throw fromFsError(e, `reading content ${digest}`);
    }
  }

  async putBytes(desc: Pick<Descriptor, 'digest' | 'size'>, bytes: Uint8Array): Promise<void> {
    if (bytes.byteLength !== desc.size) {
      throw new FastpullError('SIZE_MISMATCH', `storing ${desc.digest}: ${bytes.byteLength} bytes, want ${desc.size}`);
    }
    verifyBytes(bytes, desc.digest, `storing ${desc.digest}`);
    const path = this.blobPath(desc.digest);
    if (await this.info(desc.digest)) return;
    try {
      await writeFileAtomic(path, bytes);
    } catch (e) {
      throw fromFsError(e, `storing ${desc.digest}`);
    }
  }

  /**
   * Opens a download of `expected`: resumes one that a dead process left (same digest and size,
   * owner lock free), or starts a new one.
   */
  async newIngest(expected: Descriptor): Promise<Ingest> {
    const { hex } = parseDigest(expected.digest);
    const resumed = await this.adoptIngest(expected, hex);
    if (resumed) return resumed;
    const id = `${hex.slice(0, 16)}-${randomId()}`;
    const dir = join(this.dir, 'ingest', id);
    let release: (() => void) | undefined;
    try {
      await fsp.mkdir(dir, { recursive: true });
      release = claimDir(dir);
      await fsp.writeFile(join(dir, 'ref'), JSON.stringify({ digest: expected.digest, size: expected.size, mediaType: expected.mediaType }));
      const path = join(dir, 'data');
      const handle = await fsp.open(path, 'w+', 0o644);
      // Reserving the full size up front makes positional writes in any order cheap and shows
      // NO_SPACE-prone pulls early on filesystems that honour it.
      await handle.truncate(expected.size);
      return openIngest({ id, dir, path, expected, handle, release, have: [] });
    } catch (e) {
      await fsp.rm(dir, { recursive: true, force: true });
      release?.();
      throw fromFsError(e, `starting download of ${expected.digest}`);
    }
  }

  /** Takes over an ingest of the same blob whose writer died, if there is one. */
  private async adoptIngest(expected: Descriptor, hex: string): Promise<Ingest | undefined> {
    const base = join(this.dir, 'ingest');
    let names: string[];
    try {
      names = (await fsp.readdir(base)).filter((n) => n.startsWith(`${hex.slice(0, 16)}-`));
    } catch {
      return undefined;
    }
    for (const id of names) {
      const dir = join(base, id);
      const release = tryClaimDir(dir);
      if (!release) continue;
      try {
        const ref = JSON.parse(await fsp.readFile(join(dir, 'ref'), 'utf8')) as { digest?: unknown; size?: unknown };
        const path = join(dir, 'data');
        const st = await fsp.stat(path);
        if (ref.digest !== expected.digest || ref.size !== expected.size || st.size !== expected.size) throw new Error('not the same blob');
        const have = readRanges(join(dir, RANGES_FILE), expected.size);
        const handle = await fsp.open(path, 'r+');
        return openIngest({ id, dir, path, expected, handle, release, have });
      } catch {
        // Unreadable or foreign: it is litter; remove it while we hold its lock.
        await fsp.rm(dir, { recursive: true, force: true });
        release();
      }
    }
    return undefined;
  }

  async commit(ingest: Ingest, verified?: Digest): Promise<void> {
    const ing = ingest as OpenIngest;
    const what = `committing ${ing.expected.digest}`;
    try {
      const st = await ing.handle.stat();
      if (st.size !== ing.expected.size) {
        throw new FastpullError('SIZE_MISMATCH', `${what}: ingest holds ${st.size} bytes, want ${ing.expected.size}`, {
          details: { want: ing.expected.size, got: st.size },
        });
      }
      const got = verified ?? (await hashFile(ing.path, ing.expected.digest));
      if (got !== ing.expected.digest) {
        throw new FastpullError('DIGEST_MISMATCH', `${what}: got ${got}, want ${ing.expected.digest} (${st.size} bytes checked)`, {
          details: { want: ing.expected.digest, got, size: st.size },
        });
      }
      await ing.handle.sync();
      await closeIngest(ing);
      await removeRecord(ing);
      const target = this.blobPath(ing.expected.digest);
      await fsp.mkdir(join(target, '..'), { recursive: true });
      await fsp.rename(ing.path, target);
      await syncDir(join(target, '..'));
    } catch (e) {
      await this.abort(ing);
      throw fromFsError(e, what);
    }
    await fsp.rm(ing.dir, { recursive: true, force: true });
    ing.release();
  }

  async abort(ingest: Ingest): Promise<void> {
    const ing = ingest as OpenIngest;
    ing.watermark.fail();
    await closeIngest(ing);
    await removeRecord(ing);
    await fsp.rm(ing.dir, { recursive: true, force: true });
    ing.release();
  }

  /**
   * Stops an ingest but keeps what landed, for a later pull to resume (an aborted pull): records its
   * ranges, closes it and lets go of its lock. Still invisible as content.
   */
  async suspend(ingest: Ingest): Promise<void> {
    const ing = ingest as OpenIngest;
    ing.watermark.fail();
    try {
      ing.saveRanges();
    } catch {
      // Without a record the next pull starts this blob over; nothing is lost but time.
    }
    await closeIngest(ing);
    ing.release();
  }

  /**
   * Removes ingests left by processes that died (kill -9, power loss) and not resumed within
   * `olderThanMs` (default a day), and at once those whose blob `options.unneeded` says no pull
   * will resume (its layer is unpacked by now); returns their ids. `dryRun`: names them, removes none.
   */
  async sweep(olderThanMs = STALE_INGEST_MS, options: SweepIngestOptions = {}): Promise<string[]> {
    const { unneeded } = options;
    return sweepDeadDirs(join(this.dir, 'ingest'), olderThanMs, {
      ...(options.dryRun ? { dryRun: true } : {}),
      ...(unneeded
        ? {
            unneeded: async (dir: string) => {
              const d = await ingestDigest(dir);
              return d !== undefined && (await unneeded(d));
            },
          }
        : {}),
    });
  }

  async delete(digest: Digest): Promise<boolean> {
    try {
      await fsp.unlink(this.blobPath(digest));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw fromFsError(e, `deleting content ${digest}`);
    }
  }

  async list(): Promise<BlobInfo[]> {
    const out: BlobInfo[] = [];
    const base = join(this.dir, 'blobs');
    let algs: string[];
    try {
      algs = await fsp.readdir(base);
    } catch {
      return out;
    }
    for (const alg of algs) {
      for (const hex of await fsp.readdir(join(base, alg))) {
        const digest = `${alg}:${hex}`;
        try {
          parseDigest(digest);
        } catch {
          continue;
        }
        const st = await fsp.stat(join(base, alg, hex));
        out.push({ digest: digest as Digest, size: st.size });
      }
    }
    return out;
  }
}

/**
 * Hashes a file with the algorithm of `like` (sha256 or sha512), streaming it.
 * @example
 * const ok = (await hashFile(store.content.blobPath(d), d)) === d;
 */
export async function hashFile(path: string, like: Digest): Promise<Digest> {
  const { algorithm } = parseDigest(like);
  const h = createHash(algorithm);
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) h.update(chunk as Buffer);
  return `${algorithm}:${h.digest('hex')}`;
}

/** The blob an ingest directory downloads, from its `ref` record; undefined when that is unreadable. */
async function ingestDigest(dir: string): Promise<Digest | undefined> {
  try {
    const ref = JSON.parse(await fsp.readFile(join(dir, 'ref'), 'utf8')) as { digest?: unknown };
    return typeof ref.digest === 'string' ? parseDigest(ref.digest).digest : undefined;
  } catch {
    return undefined;
  }
}

/** A dead process's download is kept this long for a later pull to resume, then swept. */
export const STALE_INGEST_MS = 24 * 60 * 60 * 1000;
