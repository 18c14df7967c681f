// Tests of PAX records and GNU long names on their own.
import { describe, expect, it } from 'vitest';
import { FastpullError } from '../../errors.js';
import { parsePax, paxInteger, paxTime, stripTrailingNuls } from './tarpax.js';

const invalid = (m: string): FastpullError => new FastpullError('INVALID_LAYER', m);

function record(key: string, value: string | Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

describe('parsePax', () => {
  it('keeps values as bytes, the last of a key winning, and allows NUL padding at the end', () => {
    const data = Buffer.concat([record('path', 'a'), record('SCHILY.xattr.user.x', Buffer.from([0, 0xff, 0x0a])), record('path', 'b'), Buffer.alloc(7)]);
    const { records } = parsePax(data, invalid);
    expect(records.get('path')?.toString()).toBe('b');
    expect(records.get('SCHILY.xattr.user.x')).toEqual(Buffer.from([0, 0xff, 0x0a]));
  });

  it('copies the values: the buffer they came in may be filled again', () => {
    const data = Buffer.concat([record('SCHILY.xattr.user.x', 'value'), record('linkpath', 'target')]);
    const { records } = parsePax(data, invalid);
    data.fill(0);
    expect(records.get('SCHILY.xattr.user.x')?.toString()).toBe('value');
    expect(records.get('linkpath')?.toString()).toBe('target');
  });

  it('folds GNU sparse 0.0 offset/numbytes pairs into one map record', () => {
    const data = Buffer.concat([
      record('GNU.sparse.offset', '0'),
      record('GNU.sparse.numbytes', '4'),
      record('GNU.sparse.offset', '100'),
      record('GNU.sparse.numbytes', '2'),
    ]);
    expect(parsePax(data, invalid).records.get('GNU.sparse.map')?.toString()).toBe('0,4,100,2');
    expect(() => parsePax(Buffer.concat([record('GNU.sparse.numbytes', '4')]), invalid)).toThrow('a malformed GNU sparse 0.0 map');
  });

  it.each([
    ['a record without a length', Buffer.from('path=a\n')],
    ['a record length of "99"', Buffer.from('99 path=a\n')],
    ['a record that does not end in a newline', Buffer.from('11 path=ab ')],
    ['a record without a key', Buffer.from('8 =abcd\n')],
    ['data after NUL padding', Buffer.concat([record('path', 'a'), Buffer.from([0, 1])])],
  ])('refuses %s', (message, data) => {
    expect(() => parsePax(data, invalid)).toThrow(message);
  });
});

describe('PAX values and long names', () => {
  it('reads integers and times as Go accepts them', () => {
    expect(paxInteger('-5', 'uid', invalid)).toBe(-5);
    expect(() => paxInteger('1e3', 'uid', invalid)).toThrow('PAX uid "1e3" is not an integer');
    expect(paxTime('1600000000.5', 'mtime', invalid)).toBe(1_600_000_000.5);
    expect(paxTime('7.', 'mtime', invalid)).toBe(7);
    expect(() => paxTime('.5', 'mtime', invalid)).toThrow('is not a time');
  });

  it('cuts the NULs that end a GNU long name, keeping the bytes', () => {
    expect(stripTrailingNuls(Buffer.from([0x61, 0xff, 0, 0]))).toBe('a\xff');
    expect(stripTrailingNuls(Buffer.from([0, 0x61, 0]))).toBe('\0a');
  });
});
