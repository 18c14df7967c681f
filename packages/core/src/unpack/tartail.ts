// Keeps the raw tar bytes past the last parsed entry: finds the end-of-archive marker and reads PAX records byte-exact.
//
// tar-stream decodes PAX values as UTF-8, which corrupts binary xattrs (security.capability), and it
// parses on past the end-of-archive marker where Go's archive/tar (containerd) stops. This sees the
// same bytes the parser is fed and keeps only those at or after `from`, the end of the last entry's
// data: the next header, any PAX headers before it, or the end marker.

const BLOCK = 512;
const TYPE_PAX = 0x78; // 'x': PAX extended header for the next entry

/** Rounds a tar data size up to whole 512-byte blocks. */
export function padToBlock(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

export class TarTail {
  private chunks: Buffer[] = [];
  /** Offset of chunks[0] in the stream. */
  private start = 0;
  /** Bytes pushed so far. */
  private fed = 0;
  /** Where the parser's next header (or the end marker) begins. */
  private from = 0;

  /** Records bytes about to be fed to the parser. */
  push(chunk: Buffer): void {
    if (this.fed + chunk.length > this.from) {
      if (this.chunks.length === 0) this.start = this.fed;
      this.chunks.push(chunk);
    }
    this.fed += chunk.length;
  }

  /** Offset of the next header; the parser has consumed everything before it. */
  get position(): number {
    return this.from;
  }

  /** Moves past the entry whose data ends at `offset`; drops what is no longer needed. */
  advance(offset: number): void {
    if (offset <= this.from) return;
    this.from = offset;
    while (this.chunks.length > 0) {
      const first = this.chunks[0]!;
      if (this.start + first.length > offset) break;
      this.start += first.length;
      this.chunks.shift();
    }
  }

  /** Bytes [a, b) when all of them are held, else undefined. */
  slice(a: number, b: number): Buffer | undefined {
    if (a < this.start || a < this.from || b > this.fed || b < a) return undefined;
    const parts: Buffer[] = [];
    let off = this.start;
    for (const c of this.chunks) {
      const end = off + c.length;
      if (end > a && off < b) parts.push(c.subarray(Math.max(0, a - off), Math.min(c.length, b - off)));
      off = end;
      if (off >= b) break;
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  /**
   * True when the block at the current position is all zeros (the end-of-archive marker: Go's reader
   * stops there, and so does fastpull); false when a non-zero byte is seen there; undefined when
   * those bytes have not arrived yet.
   */
  atEnd(): boolean | undefined {
    const have = Math.min(this.fed, this.from + BLOCK);
    const bytes = this.slice(this.from, have);
    if (bytes === undefined) return undefined;
    for (let i = 0; i < bytes.length; i++) if (bytes[i] !== 0) return false;
    return have === this.from + BLOCK ? true : undefined;
  }

  /**
   * The raw records of the last PAX header ('x') between the current position and the header that
   * starts at `headerStart`; undefined when those bytes are not all held or do not parse.
   */
  paxRecords(headerStart: number): Map<string, Buffer> | undefined {
    let records = new Map<string, Buffer>();
    let pos = this.from;
    while (pos + BLOCK <= headerStart) {
      const header = this.slice(pos, pos + BLOCK);
      if (header === undefined) return undefined;
      const size = parseTarNumber(header.subarray(124, 136));
      if (size === undefined) return undefined;
      const dataStart = pos + BLOCK;
      if (header[156] === TYPE_PAX) {
        const data = this.slice(dataStart, dataStart + size);
        if (data === undefined) return undefined;
        const parsed = parsePaxRecords(data);
        if (parsed === undefined) return undefined;
        records = parsed; // a later 'x' header replaces an earlier one, as in tar-stream and Go
      }
      pos = dataStart + padToBlock(size);
    }
    return pos === headerStart ? records : undefined;
  }
}

/** A tar numeric field: octal ASCII (space or NUL padded) or base-256 when the top bit is set. */
function parseTarNumber(field: Buffer): number | undefined {
  if (field.length > 0 && (field[0]! & 0x80) !== 0) {
    if ((field[0]! & 0x40) !== 0) return undefined; // negative
    let n = field[0]! & 0x3f;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i]!;
    return Number.isSafeInteger(n) ? n : undefined;
  }
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) return undefined;
  return parseInt(text, 8);
}

/** PAX records "<len> <key>=<value>\n" with keys as UTF-8 and values as raw bytes. */
function parsePaxRecords(data: Buffer): Map<string, Buffer> | undefined {
  const out = new Map<string, Buffer>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break; // NUL padding
    const space = data.indexOf(0x20, pos);
    if (space === -1) return undefined;
    const len = Number(data.toString('latin1', pos, space));
    if (!Number.isSafeInteger(len) || len <= space - pos || pos + len > data.length) return undefined;
    const record = data.subarray(space + 1, pos + len - 1); // drop the trailing '\n'
    const eq = record.indexOf(0x3d);
    if (eq === -1) return undefined;
    out.set(record.toString('utf8', 0, eq), record.subarray(eq + 1));
    pos += len;
  }
  return out;
}
