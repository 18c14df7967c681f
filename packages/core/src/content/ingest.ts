// An ingest open for writing: positional writes into its data file, the watermark a reader follows,
// and the ranges record that lets a later pull resume it.
import { writeSync } from 'node:fs';
import { rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { fromFsError } from '../errors.js';
import type { Descriptor } from '../oci/manifest.js';
import { downloadWritten } from '../util/allocator.js';
import { RANGES_FILE, RANGES_SAVE_BYTES, RANGES_SAVE_MS, RangesRecord } from './ranges-record.js';
import { Watermark } from './watermark.js';

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

/** An ingest as the store that opened it sees it. */
export interface OpenIngest extends Ingest {
  readonly dir: string;
  readonly saveRanges: () => void;
  readonly handle: FileHandle;
  readonly release: () => void;
  /** Closes the ranges record's descriptor (once). */
  readonly closeRanges: () => void;
  closed: boolean;
}

/** Closes an ingest's files (once): its ranges record and its data file. */
export async function closeIngest(ing: OpenIngest): Promise<void> {
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
export async function removeRecord(ing: OpenIngest): Promise<void> {
  await rm(join(ing.dir, RANGES_FILE), { force: true });
}

/** What the store made or found for an ingest before it is opened. */
export interface IngestFiles {
  readonly id: string;
  readonly dir: string;
  readonly path: string;
  readonly expected: Descriptor;
  /** The data file, open for writing. */
  readonly handle: FileHandle;
  /** Lets go of the ingest directory's owner lock. */
  readonly release: () => void;
  /** Ranges already in the data file (a resumed download). */
  readonly have: readonly [number, number][];
}

/** An ingest over an open data file. */
export function openIngest(o: IngestFiles): OpenIngest {
  const watermark = new Watermark(o.expected.size);
  for (const [a, b] of o.have) watermark.add(a, b);
  const record = new RangesRecord(join(o.dir, RANGES_FILE));
  let unsaved = 0;
  let savedAt = Date.now();
  // `from`: bytes before it are left out (the reader may free them, see Watermark.grantRelease).
  const save = (from = watermark.releaseGranted): void => {
    unsaved = 0;
    savedAt = Date.now();
    record.save(watermark.ranges(from));
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
    closeRanges: () => record.close(),
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
