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

import { FastpullError } from '../errors.js';

const BLOCK = 512;
const ZERO_BLOCK = Buffer.alloc(BLOCK);

/** Rounds a tar data size up to whole 512-byte blocks. */
export function padToBlock(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

/** What an entry is; 'unknown' for a type flag that is none of these (see {@link TarEntry.flag}). */
export type TarEntryType = 'file' | 'link' | 'symlink' | 'character-device' | 'block-device' | 'directory' | 'fifo' | 'unknown';

/** A run of data in a sparse file; everything between runs is a hole. */
export interface SparseRegion {
  offset: number;
  length: number;
}

/** One entry as the tar describes it, PAX records, GNU long names and sparse maps applied. */
export interface TarEntry {
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

  constructor(
    private readonly source: AsyncIterator<Uint8Array>,
    private readonly options: TarReaderOptions,
  ) {}

  /** The next entry, or null at the end of the archive. */
  async next(): Promise<TarEntry | null> {
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

  private async entry(h: Header, pax: PaxRecords | undefined, longName: string | undefined, longLink: string | undefined, offset: number): Promise<TarEntry> {
    const records = pax?.records ?? new Map<string, Buffer>();
    const text = (key: string): string | undefined => records.get(key)?.toString('latin1');
    // As Go: an empty GNU long name or link name is no override.
    let name = (longName || undefined) ?? text('path') ?? h.name;
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
    if (dataStart + padToBlock(dataSize) > this.options.maxTarBytes) throw this.tooLarge(`entry ${shown} at byte ${offset} declares ${dataSize} bytes`, 'maxTotalBytes', details);

    let size = dataSize;
    let sparse: SparseRegion[] | undefined;
    if (h.flag === 'S') {
      if (h.format !== 'gnu') throw invalid('an old GNU sparse entry without the GNU magic');
      size = h.realSize;
      sparse = await this.oldGnuSparseMap(h.block, invalid, shown, details);
    } else {
      const sp = await this.paxSparse(records, dataSize, invalid, details);
      if (sp !== undefined) {
        if (type !== 'file') throw invalid(`sparse records on a ${type} entry`);
        ({ sparse } = sp);
        size = sp.size;
        dataSize = sp.dataSize;
        if (sp.name !== undefined) name = sp.name;
      }
    }
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
  }

  /** The map of an old GNU sparse entry: up to 4 regions in the header, 21 more per extension block after it. */
  private async oldGnuSparseMap(block: Buffer, invalid: (m: string) => FastpullError, shown: string, details: Details): Promise<SparseRegion[]> {
    const regions: SparseRegion[] = [];
    const read = (b: Buffer, at: number, count: number): void => {
      for (let i = 0; i < count; i++) {
        const field = at + i * 24;
        if (b[field] === 0) break; // as GNU and Go: an empty offset ends the list
        const offset = parseNumeric(b.subarray(field, field + 12));
        const length = parseNumeric(b.subarray(field + 12, field + 24));
        if (offset === undefined || length === undefined) throw invalid('an unreadable sparse map');
        regions.push({ offset, length });
      }
    };
    read(block, 386, 4);
    let extended = block[482] !== 0;
    let extBytes = 0;
    while (extended) {
      extBytes += BLOCK;
      if (extBytes > this.options.maxHeaderBytes) throw this.tooLarge(`the sparse map of entry ${shown} exceeds ${this.options.maxHeaderBytes} bytes`, 'maxPaxHeaderBytes', details);
      const ext = await this.readBlock(true);
      if (ext === null) throw this.truncated();
      read(ext, 0, 21);
      extended = ext[504] !== 0;
    }
    return regions;
  }

  /** GNU's PAX sparse formats: 0.0 (repeated offset/numbytes records), 0.1 (one map record), 1.0 (map in the data). */
  private async paxSparse(
    records: ReadonlyMap<string, Buffer>,
    dataSize: number,
    invalid: (m: string) => FastpullError,
    details: Details,
  ): Promise<{ sparse: SparseRegion[]; size: number; dataSize: number; name: string | undefined } | undefined> {
    const text = (key: string): string | undefined => records.get(key)?.toString('latin1');
    const major = text('GNU.sparse.major');
    const minor = text('GNU.sparse.minor');
    let v1: boolean;
    if (major === '0' && (minor === '0' || minor === '1')) v1 = false;
    else if (major === '1' && minor === '0') v1 = true;
    else if (major !== undefined || minor !== undefined) throw invalid(`unsupported GNU sparse format ${major ?? '?'}.${minor ?? '?'}`);
    else if (text('GNU.sparse.map') !== undefined) v1 = false;
    else return undefined;

    const sizeText = text('GNU.sparse.size') ?? text('GNU.sparse.realsize');
    if (sizeText === undefined) throw invalid('a sparse file without its size');
    const size = paxInteger(sizeText, 'GNU.sparse.size', invalid);
    const nameText = text('GNU.sparse.name');
    const name = nameText === '' ? undefined : nameText;

    if (!v1) {
      const numText = text('GNU.sparse.numblocks');
      const count = numText === undefined ? undefined : paxInteger(numText, 'GNU.sparse.numblocks', invalid);
      const map = text('GNU.sparse.map') ?? '';
      const fields = map === '' ? [] : map.split(',');
      if (count === undefined || fields.length !== 2 * count) throw invalid('GNU.sparse.map does not match GNU.sparse.numblocks');
      return { sparse: pairs(fields, 'GNU.sparse.map', invalid), size, dataSize, name };
    }

    // 1.0: decimal lines (count, then offset and length of each region) filling whole blocks before the data.
    const lines: string[] = [];
    let partial = '';
    let mapBytes = 0;
    let count: number | undefined;
    while (count === undefined || lines.length < 1 + 2 * count) {
      mapBytes += BLOCK;
      if (mapBytes > this.options.maxHeaderBytes) throw this.tooLarge(`a sparse map exceeds ${this.options.maxHeaderBytes} bytes`, 'maxPaxHeaderBytes', details);
      if (mapBytes > dataSize) throw invalid('the sparse map runs past the entry data');
      const block = await this.readBlock(true);
      if (block === null) throw this.truncated();
      const parts = (partial + block.toString('latin1')).split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        if (lines.length === 1) count = decimal(line, 'the sparse map size', invalid);
      }
    }
    const fields = lines.slice(1, 1 + 2 * count);
    return { sparse: pairs(fields, 'the sparse map', invalid), size, dataSize: dataSize - mapBytes, name };
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

  private invalid(message: string, details: Details = {}): FastpullError {
    return new FastpullError('INVALID_LAYER', `${this.options.what}: corrupt tar: ${message}`, { details });
  }

  private truncated(): FastpullError {
    return new FastpullError('INVALID_LAYER', `${this.options.what}: corrupt or truncated tar: the stream ends inside an entry (after ${this.bytesRead} bytes)`);
  }

  private tooLarge(message: string, limit: 'maxTotalBytes' | 'maxPaxHeaderBytes' = 'maxTotalBytes', details: Details = {}): FastpullError {
    const max = limit === 'maxTotalBytes' ? this.options.maxTarBytes : this.options.maxHeaderBytes;
    return new FastpullError('INVALID_LAYER', `${this.options.what}: ${message}, over the limit ${limit} (${max})`, { details: { ...details, limit, max } });
  }
}

/** What an error says about the entry it is about. */
type Details = { entry?: string; offset?: number };

interface Header {
  flag: string;
  format: 'v7' | 'ustar' | 'gnu';
  name: string;
  linkname: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  atime: number | undefined;
  devmajor: number;
  devminor: number;
  /** An old GNU sparse entry's full size. */
  realSize: number;
  block: Buffer;
}

/** One header block, checksum verified. Fields as Go's archive/tar reads them. */
function parseHeader(b: Buffer, invalid: (m: string) => FastpullError): Header {
  const num = (at: number, len: number, field: string): number => {
    const n = parseNumeric(b.subarray(at, at + len));
    if (n === undefined) throw invalid(`unreadable ${field} field`);
    return n;
  };
  const sum = parseNumeric(b.subarray(148, 156));
  let unsigned = 8 * 0x20;
  let signed = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) {
    if (i >= 148 && i < 156) continue;
    unsigned += b[i]!;
    signed += (b[i]! << 24) >> 24;
  }
  if (sum === undefined || (sum !== unsigned && sum !== signed)) throw invalid('bad checksum');

  const magic = b.toString('latin1', 257, 263);
  const version = b.toString('latin1', 263, 265);
  let format: Header['format'] = 'v7';
  let prefix = '';
  if (magic === 'ustar\0') {
    format = 'ustar';
    // star puts "tar\0" at the end of the block and has a shorter prefix.
    prefix = cString(b, 345, b.toString('latin1', 508, 512) === 'tar\0' ? 131 : 155);
  } else if (magic === 'ustar ' && version === ' \0') {
    format = 'gnu';
  }
  const flag = String.fromCharCode(b[156]!);
  const base = cString(b, 0, 100);
  const hasDev = format !== 'v7';
  return {
    flag,
    format,
    name: prefix === '' ? base : `${prefix}/${base}`,
    linkname: cString(b, 157, 100),
    mode: num(100, 8, 'mode'),
    uid: num(108, 8, 'uid'),
    gid: num(116, 8, 'gid'),
    size: num(124, 12, 'size'),
    mtime: num(136, 12, 'mtime'),
    atime: format === 'gnu' && b[345] !== 0 ? num(345, 12, 'atime') : undefined,
    devmajor: hasDev ? num(329, 8, 'devmajor') : 0,
    devminor: hasDev ? num(337, 8, 'devminor') : 0,
    realSize: flag === 'S' ? num(483, 12, 'realsize') : 0,
    block: b,
  };
}

function typeOf(flag: string): TarEntryType {
  switch (flag) {
    case '0':
    case '\0':
    case '7': // contiguous file: a regular file everywhere that matters
    case 'S':
      return 'file';
    case '1':
      return 'link';
    case '2':
      return 'symlink';
    case '3':
      return 'character-device';
    case '4':
      return 'block-device';
    case '5':
      return 'directory';
    case '6':
      return 'fifo';
    default:
      return 'unknown';
  }
}

/** A fixed-size string field: up to the first NUL, bytes as latin1 chars. */
function cString(b: Buffer, at: number, len: number): string {
  const end = b.indexOf(0, at);
  return b.toString('latin1', at, end === -1 || end > at + len ? at + len : end);
}

function stripTrailingNuls(data: Buffer): string {
  let end = data.length;
  while (end > 0 && data[end - 1] === 0) end--;
  return data.toString('latin1', 0, end);
}

/**
 * A numeric header field: base-256 when the top bit is set (negative when the next bit is), else
 * octal padded with spaces or NULs. undefined when unreadable or beyond what a double holds exactly.
 */
export function parseNumeric(field: Buffer): number | undefined {
  if (field.length > 0 && (field[0]! & 0x80) !== 0) {
    const inv = (field[0]! & 0x40) !== 0 ? 0xff : 0;
    let x = 0n;
    for (let i = 0; i < field.length; i++) {
      let c = field[i]! ^ inv;
      if (i === 0) c &= 0x7f;
      x = (x << 8n) | BigInt(c);
    }
    const n = inv === 0 ? x : -x - 1n;
    return n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER) ? undefined : Number(n);
  }
  let a = 0;
  let z = field.length;
  while (a < z && (field[a] === 0x20 || field[a] === 0)) a++;
  while (z > a && (field[z - 1] === 0x20 || field[z - 1] === 0)) z--;
  const nul = field.indexOf(0, a);
  if (nul !== -1 && nul < z) z = nul;
  if (a === z) return 0;
  const text = field.toString('latin1', a, z);
  if (!/^[0-7]+$/.test(text)) return undefined;
  const n = parseInt(text, 8);
  return Number.isSafeInteger(n) ? n : undefined;
}

interface PaxRecords {
  records: Map<string, Buffer>;
}

/** "<len> <key>=<value>\n" records; values stay bytes. GNU sparse 0.0's repeated records become one map record. */
function parsePax(data: Buffer, invalid: (m: string) => FastpullError): PaxRecords {
  const records = new Map<string, Buffer>();
  const sparse00: string[] = [];
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) {
      for (let i = pos; i < data.length; i++) if (data[i] !== 0) throw invalid('data after NUL padding');
      break;
    }
    const space = data.indexOf(0x20, pos);
    if (space === -1) throw invalid('a record without a length');
    const lenText = data.toString('latin1', pos, space);
    const len = /^[0-9]{1,10}$/.test(lenText) ? Number(lenText) : NaN;
    if (!(len >= 5) || pos + len > data.length || space >= pos + len) throw invalid(`a record length of ${JSON.stringify(lenText)}`);
    if (data[pos + len - 1] !== 0x0a) throw invalid('a record that does not end in a newline');
    const record = data.subarray(space + 1, pos + len - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw invalid('a record without a key');
    const key = record.toString('latin1', 0, eq);
    if (key.includes('\0')) throw invalid('NUL in a record key');
    const value = record.subarray(eq + 1);
    if (key === 'GNU.sparse.offset' || key === 'GNU.sparse.numbytes') {
      const wanted = sparse00.length % 2 === 0 ? 'GNU.sparse.offset' : 'GNU.sparse.numbytes';
      if (key !== wanted || value.includes(0x2c)) throw invalid('a malformed GNU sparse 0.0 map');
      sparse00.push(value.toString('latin1'));
    } else {
      records.set(key, value);
    }
    pos += len;
  }
  if (sparse00.length > 0) records.set('GNU.sparse.map', Buffer.from(sparse00.join(','), 'latin1'));
  return { records };
}

function decimal(text: string, what: string, invalid: (m: string) => FastpullError): number {
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw invalid(`${what} ${JSON.stringify(text.slice(0, 40))} is not a number`);
  return n;
}

/** A PAX integer (may be negative; the caller judges the range). */
function paxInteger(text: string, key: string, invalid: (m: string) => FastpullError): number {
  const n = /^-?[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw invalid(`PAX ${key} ${JSON.stringify(text.slice(0, 40))} is not an integer`);
  return n;
}

/** A PAX time: decimal seconds with an optional fraction. */
function paxTime(text: string, key: string, invalid: (m: string) => FastpullError): number {
  if (!/^-?[0-9]{1,16}(\.[0-9]*)?$/.test(text)) throw invalid(`PAX ${key} ${JSON.stringify(text.slice(0, 40))} is not a time`);
  return Number(text.endsWith('.') ? text.slice(0, -1) : text);
}

function pairs(fields: string[], what: string, invalid: (m: string) => FastpullError): SparseRegion[] {
  const out: SparseRegion[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    out.push({ offset: decimal(fields[i]!, what, invalid), length: decimal(fields[i + 1]!, what, invalid) });
  }
  return out;
}

/** Regions ascending, apart, inside the file, and exactly as many data bytes as stored. */
function checkSparse(regions: readonly SparseRegion[], size: number, dataSize: number, invalid: (m: string) => FastpullError): void {
  if (!Number.isSafeInteger(size) || size < 0) throw invalid(`sparse file size ${size}`);
  let end = 0;
  let total = 0;
  for (const r of regions) {
    if (!(r.offset >= 0 && r.length >= 0) || r.offset < end || r.offset + r.length > size) {
      throw invalid(`sparse region ${r.offset}+${r.length} overlaps another or lies outside the file of ${size} bytes`);
    }
    end = r.offset + r.length;
    total += r.length;
  }
  if (total !== dataSize) throw invalid(`the sparse map covers ${total} bytes but the entry stores ${dataSize}`);
}
