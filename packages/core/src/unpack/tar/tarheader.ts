// One 512-byte tar header block, read field by field as Go's archive/tar reads it.
import type { FastpullError } from '../../errors.js';

/** Bytes in a tar block: headers and data padding come in these. */
export const BLOCK = 512;
export const ZERO_BLOCK = Buffer.alloc(BLOCK);

/** Rounds a tar data size up to whole 512-byte blocks. */
export function padToBlock(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

/** What an entry is; 'unknown' for a type flag that is none of these (see {@link ParsedTarEntry.flag}). */
export type TarEntryType = 'file' | 'link' | 'symlink' | 'character-device' | 'block-device' | 'directory' | 'fifo' | 'unknown';

/** A header block's fields, before PAX records or GNU long names apply. */
export interface Header {
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
export function parseHeader(b: Buffer, invalid: (m: string) => FastpullError): Header {
  const num = (at: number, len: number, field: string): number => {
    const n = parseNumericAt(b, at, at + len);
    if (n === undefined) throw invalid(`unreadable ${field} field`);
    return n;
  };
  const sum = parseNumericAt(b, 148, 156);
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

/** The entry type a type flag names. */
export function typeOf(flag: string): TarEntryType {
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

/**
 * A numeric header field: base-256 when the top bit is set (negative when the next bit is), else
 * octal padded with spaces or NULs. undefined when unreadable or beyond what a double holds exactly.
 */
export function parseNumeric(field: Buffer): number | undefined {
  return parseNumericAt(field, 0, field.length);
}

/** {@link parseNumeric} of the field at bytes [start, end) of `b`, without a view of it. */
export function parseNumericAt(b: Buffer, start: number, end: number): number | undefined {
  if (end > start && (b[start]! & 0x80) !== 0) {
    const inv = (b[start]! & 0x40) !== 0 ? 0xff : 0;
    let x = 0n;
    for (let i = start; i < end; i++) {
      let c = b[i]! ^ inv;
      if (i === start) c &= 0x7f;
      x = (x << 8n) | BigInt(c);
    }
    const n = inv === 0 ? x : -x - 1n;
    return n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER) ? undefined : Number(n);
  }
  let a = start;
  let z = end;
  while (a < z && (b[a] === 0x20 || b[a] === 0)) a++;
  while (z > a && (b[z - 1] === 0x20 || b[z - 1] === 0)) z--;
  for (let i = a; i < z; i++) {
    if (b[i] === 0) {
      z = i;
      break;
    }
  }
  // Digit by digit: six fields of every header, so no string and no regular expression each time.
  // Every partial value up to the true one is exact in a double, so one past the safe range stays past it.
  let n = 0;
  for (let i = a; i < z; i++) {
    const d = b[i]! - 0x30;
    if (d < 0 || d > 7) return undefined;
    n = n * 8 + d;
  }
  return n <= Number.MAX_SAFE_INTEGER ? n : undefined;
}
