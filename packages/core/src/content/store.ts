// The content store: verified blobs under blobs/<alg>/<hex>; downloads land in ingests first and are
// invisible until commit checks their size and digest and renames them into place.
import { createHash } from 'node:crypto';
import { closeSync, constants as fsc, createReadStream, fstatSync, openSync, promises as fsp, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import { parseDigest, verifyBytes, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { downloadWritten } from '../util/allocator.js';
import { randomId, syncDir, writeFileAtomic } from '../util/fs.js';
import { Watermark } from './watermark.js';
import { claimDir, sweepDeadDirs, tryClaimDir } from '../util/owner.js';

/** A committed blob. */
export interface BlobInfo {
  /** Its digest. */
  readonly digest: Digest;
  /** Its size in bytes. */
  readonly size: number;
}

/**
 * A download in progress. Lifecycle: `newIngest` creates it (invisible as content); the caller
 * writes bytes at any offsets; `commit` checks size and digest and makes it a blob, or `abort`
 * removes it. Both close the ingest.
 */
export interface Ingest {
  /** Its directory's name under `<root>/content/ingest`. */
  readonly id: string;
  /** The data file; readers may follow it while it is written. */
  readonly path: string;
  /** The blob being downloaded: commit checks against its size and digest. */
  readonly expected: Descriptor;
  /** Bytes from offset 0 on disk without a gap; readers may follow it while writes go on. */
  readonly watermark: Watermark;
  /**
   * Ranges already on disk when the ingest was opened: a download that a killed process left
   * behind, resumed. Only the rest needs fetching; the whole blob is still verified.
   */
  readonly resumed: readonly (readonly [number, number])[];
  /** Writes `data` at byte `position` and advances the watermark over it. */
  write(data: Uint8Array, position: number): Promise<void>;
  /**
   * Like write, before it returns, and true; false, with nothing written, while a reader frees a
   * part of the file (the write would wait on its lock: then write()).
   */
  writeNow(data: Uint8Array, position: number): boolean;
  /**
   * Grants a reader's ask to free bytes it has read (see Watermark): the resume record is first
   * saved without them. Nothing happens when no ask is pending or the ingest is closed; a record
   * that cannot be saved (NO_SPACE, say) grants nothing. Synchronous, like the record's saves.
   */
  grantRelease(): void;
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

interface OpenIngest extends Ingest {
  readonly dir: string;
  readonly saveRanges: () => void;
  readonly handle: fsp.FileHandle;
  readonly release: () => void;
  /** Closes the ranges record's descriptor (once). */
  readonly closeRanges: () => void;
  closed: boolean;
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
        throw new FastpullError('SIZE_MISMATCH', `${what}: ingest holds ${st.size} bytes, want ${ing.expected.size}`, { details: { want: ing.expected.size, got: st.size } });
      }
      const got = verified ?? (await hashFile(ing.path, ing.expected.digest));
      if (got !== ing.expected.digest) {
        throw new FastpullError('DIGEST_MISMATCH', `${what}: got ${got}, want ${ing.expected.digest} (${st.size} bytes checked)`, {
          details: { want: ing.expected.digest, got, size: st.size },
        });
      }
      await ing.handle.sync();
      await close(ing);
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
    await close(ing);
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
    await close(ing);
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
      ...(unneeded ? { unneeded: async (dir: string) => { const d = await ingestDigest(dir); return d !== undefined && (await unneeded(d)); } } : {}),
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

async function close(ing: OpenIngest): Promise<void> {
  if (ing.closed) return;
  ing.closed = true;
  try {
    ing.closeRanges();
  } catch {
    // Closing a descriptor only fails for a bad one; nothing is left to do with it.
  }
  await ing.handle.close().catch(() => undefined);
}

/**
 * Removes an ingest's ranges record before its data leaves: a directory removed file by file (in
 * whatever order the filesystem lists it) and killed midway must not keep a record that lists bytes
 * no longer there, which a later pull would count on (`test/store-verify.ts` resumeBound).
 */
async function removeRecord(ing: OpenIngest): Promise<void> {
  await fsp.rm(join(ing.dir, RANGES_FILE), { force: true });
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
/** The ingest's record of ranges on disk. */
const RANGES_FILE = 'ranges';
/** The ranges record is updated after this many new bytes or this long, whichever comes first:
 * a kill loses at most that much work. */
const RANGES_SAVE_BYTES = 8 * 1024 * 1024;
const RANGES_SAVE_MS = 250;

/**
 * The ranges record: JSON, rewritten in place (one write from offset 0, no truncate, no fsync) after
 * the bytes it lists were written, padded with spaces to the length it had. After a kill -9 both are
 * in the page cache; after a power loss it may claim more than the disk holds, or hold a write cut
 * short, which the digest check at commit catches or the parse refuses (the bytes are then fetched
 * again). A temporary file renamed over the record made ext4 start writing the new record back
 * at each save (its replace-by-rename rule), and a new inode each time: 392 ms of the main thread's
 * rename calls in a pull of the ML bench image (some 75 saves).
 */
function readRanges(path: string, size: number): [number, number][] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  const out: [number, number][] = [];
  for (const r of raw) {
    if (!Array.isArray(r) || r.length !== 2) return [];
    const [a, b] = r as unknown[];
    if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || (a as number) < 0 || (b as number) > size || (a as number) >= (b as number)) return [];
    out.push([a as number, b as number]);
  }
  return out;
}

function openIngest(o: {
  id: string;
  dir: string;
  path: string;
  expected: Descriptor;
  handle: fsp.FileHandle;
  release: () => void;
  have: readonly [number, number][];
}): OpenIngest {
  const watermark = new Watermark(o.expected.size);
  for (const [a, b] of o.have) watermark.add(a, b);
  const rangesPath = join(o.dir, RANGES_FILE);
  let unsaved = 0;
  let savedAt = Date.now();
  let rangesFd: number | undefined;
  // Bytes of the record on disk: a shorter one is padded to it, so no old byte is left after it.
  let rangesLength = 0;
  // `from`: bytes before it are left out (the reader may free them, see Watermark.grantRelease).
  const save = (from = watermark.releaseGranted): void => {
    unsaved = 0;
    savedAt = Date.now();
    if (rangesFd === undefined) {
      rangesFd = openSync(rangesPath, fsc.O_WRONLY | fsc.O_CREAT, 0o644);
      rangesLength = fstatSync(rangesFd).size;
    }
    const json = JSON.stringify(watermark.ranges(from));
    const bytes = Buffer.from(json.length < rangesLength ? json.padEnd(rangesLength) : json);
    // A failed write (ENOSPC past the record's length) may leave a record that does not parse: the
    // next pull then fetches the blob from its start.
    let off = 0;
    while (off < bytes.length) off += writeSync(rangesFd, bytes, off, bytes.length - off, off);
    rangesLength = Math.max(rangesLength, bytes.length);
  };
  const closeRanges = (): void => {
    if (rangesFd !== undefined) closeSync(rangesFd);
    rangesFd = undefined;
  };
  // Published only once the bytes are in the file, so a follower never reads a hole.
  const landed = (data: Uint8Array, position: number): void => {
    watermark.add(position, position + data.byteLength);
    unsaved += data.byteLength;
    if (unsaved >= RANGES_SAVE_BYTES || Date.now() - savedAt >= RANGES_SAVE_MS || watermark.value === o.expected.size) save();
    downloadWritten(data.byteLength);
  };
  // The write path: synchronous, as a 64 KiB write into the page cache takes microseconds, and
  // skipping the thread-pool round trip per network chunk took a 512 MiB fetch from 423 to 571 MB/s
  // (bench/src/fetch-blob.ts). A failed write is the disk's fault (ENOSPC -> NO_SPACE), never the
  // network's: callers must not take it for a broken connection and retry it.
  const writeAt = (data: Uint8Array, position: number): void => {
    try {
      let off = 0;
      while (off < data.byteLength) off += writeSync(o.handle.fd, data, off, data.byteLength - off, position + off);
      landed(data, position);
    } catch (e) {
      throw fromFsError(e, `writing the download of ${o.expected.digest} at offset ${position}`);
    }
  };
  return {
    id: o.id,
    dir: o.dir,
    path: o.path,
    expected: o.expected,
    handle: o.handle,
    watermark,
    release: o.release,
    saveRanges: () => save(),
    closeRanges,
    resumed: o.have,
    closed: false,
    grantRelease(): void {
      if (this.closed) return;
      try {
        watermark.grantRelease(save);
      } catch {
        // Not granted: the reader keeps the bytes, the record stands as it was.
      }
    },
    async write(data: Uint8Array, position: number): Promise<void> {
      // Not while the reader punches a hole in the file: a synchronous write would wait for the
      // punch on the file's lock (up to 0.1 s where the filesystem trims freed blocks), and this
      // thread runs every download and the daemon's calls.
      if (watermark.punching) {
        try {
          let off = 0;
          while (off < data.byteLength) off += (await o.handle.write(data, off, data.byteLength - off, position + off)).bytesWritten;
          landed(data, position);
        } catch (e) {
          throw fromFsError(e, `writing the download of ${o.expected.digest} at offset ${position}`);
        }
        return;
      }
      writeAt(data, position);
    },
    writeNow(data: Uint8Array, position: number): boolean {
      if (watermark.punching) return false;
      writeAt(data, position);
      return true;
    },
  };
}
