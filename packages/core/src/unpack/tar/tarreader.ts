// Reads a layer's tar entry by entry as Go's archive/tar (containerd's reader) does, keeping names as raw bytes.
//
// Why a reader of our own rather than a general tar library: the applier must see exactly what
// containerd sees, or a crafted layer could mean one thing here and another there. So, as in Go:
// the archive ends at a zero block; header-only types (links, devices, directories, fifos) carry
// no data whatever their size field says; a later PAX header replaces an earlier one and a global
// one ('g') is not applied; GNU long names win over PAX paths; sparse files (old GNU 'S', PAX 0.0,
// 0.1 and 1.0) come with their map. Unlike general libraries it never decodes a name: a name is its
// bytes (held one char per byte, latin1), so two names that are not valid UTF-8 cannot collapse
// into one replacement-character string. Every meta header is bounded.

import { FastpullError } from '../../errors.js';
import { BLOCK, type Header, padToBlock, parseHeader, type TarEntryType, typeOf, ZERO_BLOCK } from './tarheader.js';
import { type PaxRecords, parsePax, paxInteger, paxTime, stripTrailingNuls } from './tarpax.js';
import { checkSparse, type EntryDetails, oldGnuSparseMap, paxSparse, type SparseBlocks, type SparseRegion } from './tarsparse.js';

export { padToBlock, parseNumeric, type TarEntryType } from './tarheader.js';
/** Type flags of the headers only {@link TarReader.next} reads: PAX, PAX global, GNU long name and link, old GNU sparse. */
const FLAG_PAX = 0x78;
const FLAG_GLOBAL = 0x67;
const FLAG_LONG_NAME = 0x4c;
const FLAG_LONG_LINK = 0x4b;
const FLAG_OLD_SPARSE = 0x53;
/** The records of an entry without a PAX header (shared: nothing adds to it). */
const NO_RECORDS: ReadonlyMap<string, Buffer> = new Map();

export type { SparseRegion } from './tarsparse.js';

/** One entry as the tar describes it, PAX records, GNU long names and sparse maps applied. */
export interface ParsedTarEntry {
  type: TarEntryType;
  /** The type flag byte as it was in the header ('0', 'S', 'V', ...). */
  flag: string;
  /** The path as raw bytes, one char per byte (latin1); not cleaned. */
  name: string;
  /** A link's target as raw bytes, one char per byte (latin1); '' when none. */
  linkname: string;
  /** Permission bits and whatever else the header's mode field held. */
  mode: number;
  uid: number;
  gid: number;
  /** Bytes of content: a sparse file's full size, 0 for header-only types. */
  size: number;
  /** Seconds since the epoch, with a fraction when PAX gave one. */
  mtime: number;
  atime: number | undefined;
  devmajor: number;
  devminor: number;
  /** The entry's own PAX records (keys latin1, values raw bytes); the last of a key wins. */
  pax: ReadonlyMap<string, Buffer>;
  /** Where the data of a sparse file goes, in order; undefined for any other entry. */
  sparse: readonly SparseRegion[] | undefined;
  /** Offset in the tar of the entry's first header (a PAX or long-name header when it has one). */
  offset: number;
}

export interface TarReaderOptions {
  /** Opens every message: what was being done. */
  what: string;
  /** Most bytes one PAX header, GNU long name or sparse map may have. */
  maxHeaderBytes: number;
  /** Most bytes the whole stream may have. */
  maxTarBytes: number;
  /** The limit `maxTarBytes` comes from, as errors name it; default 'maxTotalBytes'. */
  tarLimit?: string;
  /** Wraps every wait on the source (to give up on abort). */
  race?: <T>(p: Promise<T>) => Promise<T>;
}

/**
 * Pulls a tar from `source` one entry at a time: {@link next} gives the next entry's header,
 * {@link data} its stored bytes (a sparse file's data regions back to back); whatever data the
 * caller does not read is skipped. Errors: INVALID_LAYER for a corrupt, truncated or oversized
 * tar; an error of the source itself is rethrown unchanged and kept in {@link sourceError}.
 */
export class TarReader {
  /** Bytes taken from the source so far. */
  bytesRead = 0;
  /** What the source threw, if it did. */
  sourceError: unknown = undefined;
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  /** Stream offset of the first buffered byte. */
  private position = 0;
  private eof = false;
  private ended = false;
  /** Unread data of the current entry, then its padding. */
  private remaining = 0;
  private padding = 0;

  /** Milliseconds spent waiting for the source to give the next chunk. */
  inputWaitMs = 0;

  /**
   * Offset in the stream of the first byte not yet taken: everything before it was handed out
   * (headers, data) or skipped. What the reader buffers lies after it.
   */
  get consumed(): number {
    return this.position;
  }
  /** The blocks of the entry being read, for sparse maps stored in them. */
  private readonly sparseBlocks: SparseBlocks;

  constructor(
    private readonly source: AsyncIterator<Uint8Array>,
    private readonly options: TarReaderOptions,
  ) {
    this.sparseBlocks = {
      next: async () => (await this.readBlock(true))!, // mid-entry: the end of the stream throws
      maxBytes: options.maxHeaderBytes,
      tooLarge: (message, details) => this.tooLarge(message, 'maxPaxHeaderBytes', details),
    };
  }

  /** The next entry, or null at the end of the archive. */
  async next(): Promise<ParsedTarEntry | null> {
    if (this.ended) return null;
    await this.skip(this.remaining + this.padding);
    this.remaining = this.padding = 0;

    let pax: PaxRecords | undefined;
    let longName: string | undefined;
    let longLink: string | undefined;
    const offset = this.position;
    for (;;) {
      const headerAt = this.position;
      const block = await this.readBlock(pax !== undefined || longName !== undefined || longLink !== undefined);
      if (block === null) return this.end();
      if (block.equals(ZERO_BLOCK)) {
        // Go's reader: two zero blocks, or one and then nothing, end the archive; one and then a header is corrupt.
        const second = await this.readBlock(false);
        if (second !== null && !second.equals(ZERO_BLOCK)) throw this.invalid(`a zero block at byte ${headerAt} is followed by data`);
        return this.end();
      }
      const h = parseHeader(block, (m) => this.invalid(`header at byte ${headerAt}: ${m}`));
      switch (h.flag) {
        case 'x':
          pax = parsePax(await this.readMeta(h.size, 'PAX header', headerAt), (m) => this.invalid(`PAX header at byte ${headerAt}: ${m}`));
          continue;
        case 'g':
          // Global records are not applied to later entries (Go returns them as an entry of their own,
          // which containerd ignores), and they end what came before them. They must still parse.
          parsePax(await this.readMeta(h.size, 'PAX global header', headerAt), (m) => this.invalid(`PAX global header at byte ${headerAt}: ${m}`));
          pax = undefined;
          longName = longLink = undefined;
          continue;
        case 'L':
          longName = stripTrailingNuls(await this.readMeta(h.size, 'GNU long name', headerAt));
          continue;
        case 'K':
          longLink = stripTrailingNuls(await this.readMeta(h.size, 'GNU long link name', headerAt));
          continue;
      }
      return this.entry(h, pax, longName, longLink, offset);
    }
  }

  /**
   * The next entry when what is buffered already holds its header, else undefined with nothing of
   * it taken ({@link next} then reads it; what was left of the previous entry may be skipped
   * already, as next() would). Only plain headers: one with PAX records, a GNU long name, a sparse
   * map or the end of the archive is left to {@link next}. A layer of small files reads most of its
   * entries this way, without a promise each.
   */
  nextSync(): ParsedTarEntry | null | undefined {
    if (this.ended) return null;
    const skip = this.remaining + this.padding;
    if (this.buffered < skip + BLOCK) return undefined;
    this.skipBuffered(skip);
    this.remaining = this.padding = 0;
    const offset = this.position;
    const flag = this.peekByte(156);
    if (flag === FLAG_PAX || flag === FLAG_GLOBAL || flag === FLAG_LONG_NAME || flag === FLAG_LONG_LINK || flag === FLAG_OLD_SPARSE) return undefined;
    const block = this.take(BLOCK);
    if (block.equals(ZERO_BLOCK)) {
      this.untake(block);
      return undefined;
    }
    const h = parseHeader(block, (m) => this.invalid(`header at byte ${offset}: ${m}`));
    const e = this.entry(h, undefined, undefined, undefined, offset);
    // Without PAX records and not 'S', an entry has no sparse map to read: never a promise here.
    if (e instanceof Promise) throw new FastpullError('INTERNAL', `${this.options.what}: entry at byte ${offset} needs a sparse map read`);
    return e;
  }

  /**
   * All the data of the entry just read when it is buffered already, as views of the stream's
   * buffers (a sparse file's data regions back to back); undefined, with nothing taken, when some
   * is still to come ({@link data} then reads it).
   */
  takeData(): Buffer[] | undefined {
    if (this.remaining > this.buffered) return undefined;
    const out: Buffer[] = [];
    while (this.remaining > 0) {
      const piece = this.takeUpTo(this.remaining);
      this.remaining -= piece.length;
      out.push(piece);
    }
    return out;
  }

  /** The stored bytes of the entry {@link next} returned, in pieces as they arrive. */
  async *data(): AsyncGenerator<Buffer> {
    while (this.remaining > 0) {
      if (this.buffered === 0 && !(await this.pull())) throw this.truncated();
      const piece = this.takeUpTo(this.remaining);
      this.remaining -= piece.length;
      yield piece;
    }
  }

  /** Reads the source to its end (what follows the end of the archive is read, never parsed). */
  async drain(): Promise<void> {
    this.ended = true;
    this.dropBuffered();
    while (await this.pull()) this.dropBuffered();
  }

  private entry(
    h: Header,
    pax: PaxRecords | undefined,
    longName: string | undefined,
    longLink: string | undefined,
    offset: number,
  ): ParsedTarEntry | Promise<ParsedTarEntry> {
    const records = pax?.records ?? NO_RECORDS;
    const text = (key: string): string | undefined => records.get(key)?.toString('latin1');
    // As Go: an empty GNU long name or link name is no override.
    const name = (longName || undefined) ?? text('path') ?? h.name;
    const entryName = Buffer.from(name, 'latin1').toString('utf8');
    const shown = JSON.stringify(entryName);
    const details = { entry: entryName, offset };
    const invalid = (m: string): FastpullError => this.invalid(`entry ${shown} at byte ${offset}: ${m}`, details);
    const linkname = (longLink || undefined) ?? text('linkpath') ?? h.linkname;
    let type = typeOf(h.flag);
    if (h.flag === '\0' && name.endsWith('/')) type = 'directory'; // pre-POSIX tars mark directories by the slash
    const headerOnly = type !== 'file' && type !== 'unknown';

    let dataSize = h.size;
    const paxSize = text('size');
    if (paxSize !== undefined) dataSize = paxInteger(paxSize, 'size', invalid);
    if (dataSize < 0) throw invalid(`negative size ${dataSize}`);
    if (headerOnly) dataSize = 0;

    const uid = text('uid') !== undefined ? paxInteger(text('uid')!, 'uid', invalid) : h.uid;
    const gid = text('gid') !== undefined ? paxInteger(text('gid')!, 'gid', invalid) : h.gid;
    const mtime = text('mtime') !== undefined ? paxTime(text('mtime')!, 'mtime', invalid) : h.mtime;
    const atime = text('atime') !== undefined ? paxTime(text('atime')!, 'atime', invalid) : h.atime;

    // Nothing is read until the claim fits the limit: a header must not make us read a terabyte first.
    const dataStart = this.position;
    if (dataStart + padToBlock(dataSize) > this.options.maxTarBytes)
      throw this.tooLarge(`entry ${shown} at byte ${offset} declares ${dataSize} bytes`, 'maxTotalBytes', details);

    const made = (sparse: SparseRegion[] | undefined, size: number, dataSize: number, name: string): ParsedTarEntry => {
      if (sparse !== undefined) checkSparse(sparse, size, dataSize, invalid);
      this.remaining = dataSize;
      this.padding = padToBlock(dataSize) - dataSize; // a sparse map before the data fills whole blocks
      return {
        type,
        flag: h.flag,
        name,
        linkname,
        mode: h.mode,
        uid,
        gid,
        size: headerOnly ? 0 : size,
        mtime,
        atime,
        devmajor: h.devmajor,
        devminor: h.devminor,
        pax: records,
        sparse,
        offset,
      };
    };
    if (h.flag === 'S') {
      if (h.format !== 'gnu') throw invalid('an old GNU sparse entry without the GNU magic');
      return oldGnuSparseMap(h.block, this.sparseBlocks, invalid, shown, details).then((sparse) => made(sparse, h.realSize, dataSize, name));
    }
    // Most entries have no PAX records at all: no sparse map to look for, and no promise to make.
    if (records.size === 0) return made(undefined, dataSize, dataSize, name);
    return paxSparse(records, dataSize, this.sparseBlocks, invalid, details).then((sp) => {
      if (sp === undefined) return made(undefined, dataSize, dataSize, name);
      if (type !== 'file') throw invalid(`sparse records on a ${type} entry`);
      return made(sp.sparse, sp.size, sp.dataSize, sp.name ?? name);
    });
  }

  private end(): null {
    this.ended = true;
    return null;
  }

  /** The data of a meta header (PAX records, long name), within the limit. */
  private async readMeta(size: number, kind: string, headerAt: number): Promise<Buffer> {
    // As Go's reader: a negative size (base-256) is a corrupt header, not an empty one.
    if (size < 0) throw this.invalid(`${kind} at byte ${headerAt} has a negative size ${size}`);
    if (size > this.options.maxHeaderBytes) throw this.tooLarge(`${kind} at byte ${headerAt} has ${size} bytes`, 'maxPaxHeaderBytes');
    const padded = padToBlock(size);
    if (!(await this.fill(padded))) throw this.truncated();
    const data = this.take(padded);
    return data.subarray(0, size);
  }

  /** The next 512 bytes; null at a clean end of the stream (when `midEntry` is false). */
  private async readBlock(midEntry: boolean): Promise<Buffer | null> {
    if (!(await this.fill(BLOCK))) {
      if (this.buffered === 0 && !midEntry) return null;
      throw this.truncated();
    }
    return this.take(BLOCK);
  }

  private async skip(n: number): Promise<void> {
    while (n > 0) {
      if (this.buffered === 0 && !(await this.pull())) throw this.truncated();
      n -= this.takeUpTo(n).length;
    }
  }

  /** Drops `n` bytes that are buffered already. */
  private skipBuffered(n: number): void {
    while (n > 0) n -= this.takeUpTo(n).length;
  }

  /** The buffered byte `at` bytes ahead (there must be that many). */
  private peekByte(at: number): number {
    for (const c of this.chunks) {
      if (at < c.length) return c[at]!;
      at -= c.length;
    }
    throw new RangeError('peek past the buffered bytes');
  }

  /** Puts back bytes just taken, as if they had not been. */
  private untake(b: Buffer): void {
    this.chunks.unshift(b);
    this.buffered += b.length;
    this.position -= b.length;
  }

  /** Makes `n` bytes buffered; false when the stream ends first. */
  private async fill(n: number): Promise<boolean> {
    while (this.buffered < n) if (!(await this.pull())) return false;
    return true;
  }

  private async pull(): Promise<boolean> {
    if (this.eof) return false;
    let r: IteratorResult<Uint8Array>;
    const t = performance.now();
    try {
      const p = this.source.next();
      r = await (this.options.race ? this.options.race(p) : p);
    } catch (e) {
      this.sourceError = e;
      throw e;
    } finally {
      this.inputWaitMs += performance.now() - t;
    }
    if (r.done === true) {
      this.eof = true;
      return false;
    }
    const data = r.value;
    const chunk = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.bytesRead += chunk.length;
    if (this.bytesRead > this.options.maxTarBytes) throw this.tooLarge(`the tar exceeds ${this.options.maxTarBytes} bytes`);
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    return true;
  }

  /** Exactly `n` buffered bytes (a copy only when they span chunks). */
  private take(n: number): Buffer {
    // An empty meta header (a PAX header of size 0) may end exactly where the buffered bytes do.
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    if (first.length >= n) return this.takeUpTo(n);
    const out = Buffer.allocUnsafe(n);
    let got = 0;
    while (got < n) {
      const piece = this.takeUpTo(n - got);
      piece.copy(out, got);
      got += piece.length;
    }
    return out;
  }

  /** Up to `n` bytes from the first buffered chunk, without copying. */
  private takeUpTo(n: number): Buffer {
    const first = this.chunks[0]!;
    let piece: Buffer;
    if (first.length <= n) {
      piece = first;
      this.chunks.shift();
    } else {
      piece = first.subarray(0, n);
      this.chunks[0] = first.subarray(n);
    }
    this.buffered -= piece.length;
    this.position += piece.length;
    return piece;
  }

  private dropBuffered(): void {
    this.position += this.buffered;
    this.chunks.length = 0;
    this.buffered = 0;
  }

  private invalid(message: string, details: EntryDetails = {}): FastpullError {
    return new FastpullError('INVALID_LAYER', `${this.options.what}: corrupt tar: ${message}`, { details });
  }

  private truncated(): FastpullError {
    return new FastpullError(
      'INVALID_LAYER',
      `${this.options.what}: corrupt or truncated tar: the stream ends inside an entry (after ${this.bytesRead} bytes)`,
    );
  }

  private tooLarge(message: string, which: 'maxTotalBytes' | 'maxPaxHeaderBytes' = 'maxTotalBytes', details: EntryDetails = {}): FastpullError {
    const max = which === 'maxTotalBytes' ? this.options.maxTarBytes : this.options.maxHeaderBytes;
    const limit = which === 'maxTotalBytes' ? (this.options.tarLimit ?? which) : which;
    return new FastpullError('INVALID_LAYER', `${this.options.what}: ${message}, over the limit ${limit} (${max})`, { details: { ...details, limit, max } });
  }
}
