// Sparse files in a tar: old GNU maps ('S' headers and their extension blocks) and GNU's PAX formats 0.0, 0.1 and 1.0.
import type { FastpullError } from '../../errors.js';
import { BLOCK, parseNumeric } from './tarheader.js';
import { paxInteger } from './tarpax.js';

/** A run of data in a sparse file; everything between runs is a hole. */
export interface SparseRegion {
  offset: number;
  length: number;
}

/** What an error says about the entry it is about. */
export type EntryDetails = { entry?: string; offset?: number };

/** The blocks of the entry being read, for a map stored in them. */
export interface SparseBlocks {
  /** The next 512-byte block; throws when the stream ends first. */
  next(): Promise<Buffer>;
  /** Most bytes a map may take (the reader's maxHeaderBytes). */
  readonly maxBytes: number;
  /** The error for a map over {@link maxBytes}. */
  tooLarge(message: string, details: EntryDetails): FastpullError;
}

/** A sparse entry as its PAX records or map describe it. */
export interface PaxSparse {
  sparse: SparseRegion[];
  /** The file's full size. */
  size: number;
  /** Bytes of data stored after the map. */
  dataSize: number;
  /** The real name (GNU.sparse.name), when given. */
  name: string | undefined;
}

/** The map of an old GNU sparse entry: up to 4 regions in the header, 21 more per extension block after it. */
export async function oldGnuSparseMap(
  block: Buffer,
  blocks: SparseBlocks,
  invalid: (m: string) => FastpullError,
  shown: string,
  details: EntryDetails,
): Promise<SparseRegion[]> {
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
    if (extBytes > blocks.maxBytes) throw blocks.tooLarge(`the sparse map of entry ${shown} exceeds ${blocks.maxBytes} bytes`, details);
    const ext = await blocks.next();
    read(ext, 0, 21);
    extended = ext[504] !== 0;
  }
  return regions;
}

/**
 * GNU's PAX sparse formats: 0.0 (repeated offset/numbytes records), 0.1 (one map record), 1.0 (map
 * in the data, read from `blocks`). undefined when the records describe no sparse file.
 */
export async function paxSparse(
  records: ReadonlyMap<string, Buffer>,
  dataSize: number,
  blocks: SparseBlocks,
  invalid: (m: string) => FastpullError,
  details: EntryDetails,
): Promise<PaxSparse | undefined> {
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
    if (mapBytes > blocks.maxBytes) throw blocks.tooLarge(`a sparse map exceeds ${blocks.maxBytes} bytes`, details);
    if (mapBytes > dataSize) throw invalid('the sparse map runs past the entry data');
    const block = await blocks.next();
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

/** Regions ascending, apart, inside the file, and exactly as many data bytes as stored. */
export function checkSparse(regions: readonly SparseRegion[], size: number, dataSize: number, invalid: (m: string) => FastpullError): void {
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

function decimal(text: string, what: string, invalid: (m: string) => FastpullError): number {
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw invalid(`${what} ${JSON.stringify(text.slice(0, 40))} is not a number`);
  return n;
}

function pairs(fields: string[], what: string, invalid: (m: string) => FastpullError): SparseRegion[] {
  const out: SparseRegion[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    out.push({ offset: decimal(fields[i]!, what, invalid), length: decimal(fields[i + 1]!, what, invalid) });
  }
  return out;
}
