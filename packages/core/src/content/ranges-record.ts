// The ranges record of an ingest: which bytes of its data file are on disk, so that a download a
// killed process left behind resumes where it stopped instead of starting over.
import { closeSync, constants as fsc, fstatSync, openSync, readFileSync, writeSync } from 'node:fs';

/** The ingest's record of ranges on disk. */
export const RANGES_FILE = 'ranges';
/** The ranges record is updated after this many new bytes or this long, whichever comes first:
 * a kill loses at most that much work. */
export const RANGES_SAVE_BYTES = 8 * 1024 * 1024;
export const RANGES_SAVE_MS = 250;

/**
 * The ranges record: JSON, rewritten in place (one write from offset 0, no truncate, no fsync) after
 * the bytes it lists were written, padded with spaces to the length it had. After a kill -9 both are
 * in the page cache; after a power loss it may claim more than the disk holds, or hold a write cut
 * short, which the digest check at commit catches or the parse refuses (the bytes are then fetched
 * again). A temporary file renamed over the record made ext4 start writing the new record back
 * at each save (its replace-by-rename rule), and a new inode each time: 392 ms of the main thread's
 * rename calls in a pull of the ML bench image (some 75 saves).
 */
export function readRanges(path: string, size: number): [number, number][] {
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

/** One ingest's record, open for saves in place (see {@link readRanges} for why in place). */
export class RangesRecord {
  private fd: number | undefined;
  /** Bytes of the record on disk: a shorter one is padded to it, so no old byte is left after it. */
  private length = 0;

  constructor(private readonly path: string) {}

  /** Writes `ranges` as the record, opening it on the first save. */
  save(ranges: readonly (readonly [number, number])[]): void {
    if (this.fd === undefined) {
      this.fd = openSync(this.path, fsc.O_WRONLY | fsc.O_CREAT, 0o644);
      this.length = fstatSync(this.fd).size;
    }
    const json = JSON.stringify(ranges);
    const bytes = Buffer.from(json.length < this.length ? json.padEnd(this.length) : json);
    // A failed write (ENOSPC past the record's length) may leave a record that does not parse: the
    // next pull then fetches the blob from its start.
    let off = 0;
    while (off < bytes.length) off += writeSync(this.fd, bytes, off, bytes.length - off, off);
    this.length = Math.max(this.length, bytes.length);
  }

  /** Closes the record's descriptor; a later save opens it again. */
  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
