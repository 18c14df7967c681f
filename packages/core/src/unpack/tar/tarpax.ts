// PAX extended headers and GNU long names: the records that override a tar header's fields.
import type { FastpullError } from '../../errors.js';

/** One PAX header's records: keys latin1, values raw bytes; the last of a key wins. */
export interface PaxRecords {
  records: Map<string, Buffer>;
}

/** "<len> <key>=<value>\n" records; values stay bytes. GNU sparse 0.0's repeated records become one map record. */
export function parsePax(data: Buffer, invalid: (m: string) => FastpullError): PaxRecords {
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
    // A copy: an entry's records are read after its data (xattrs), once the stream's buffer that
    // held them may be filled again (unpack/decompress/isal.ts reuseOutput).
    const value = Buffer.from(record.subarray(eq + 1));
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

/** A GNU long name or long link name: its data up to the trailing NULs, bytes as latin1 chars. */
export function stripTrailingNuls(data: Buffer): string {
  let end = data.length;
  while (end > 0 && data[end - 1] === 0) end--;
  return data.toString('latin1', 0, end);
}

/** A PAX integer (may be negative; the caller judges the range). */
export function paxInteger(text: string, key: string, invalid: (m: string) => FastpullError): number {
  const n = /^-?[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw invalid(`PAX ${key} ${JSON.stringify(text.slice(0, 40))} is not an integer`);
  return n;
}

/** A PAX time: decimal seconds with an optional fraction. */
export function paxTime(text: string, key: string, invalid: (m: string) => FastpullError): number {
  if (!/^-?[0-9]{1,16}(\.[0-9]*)?$/.test(text)) throw invalid(`PAX ${key} ${JSON.stringify(text.slice(0, 40))} is not a time`);
  return Number(text.endsWith('.') ? text.slice(0, -1) : text);
}
