// Tests of tar header blocks on their own: numeric fields (octal, base-256), checksums, formats, prefixes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FastpullError } from '../../errors.js';
import { BLOCK, padToBlock, parseHeader, parseNumeric, parseNumericAt, typeOf } from './tarheader.js';

const invalid = (m: string): FastpullError => new FastpullError('INVALID_LAYER', m);

/** A header block with `fields` written at their offsets and a correct checksum (unless `sum` is given). */
function block(fields: Record<number, string | Buffer>, sum?: string): Buffer {
  const b = Buffer.alloc(BLOCK);
  for (const [at, v] of Object.entries(fields)) (Buffer.isBuffer(v) ? v : Buffer.from(v, 'latin1')).copy(b, Number(at));
  b.fill(0x20, 148, 156);
  let s = 0;
  for (const byte of b) s += byte;
  b.write(sum ?? `${s.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}

describe('parseNumeric', () => {
  it('reads octal padded with spaces or NULs, and empty fields as 0', () => {
    expect(parseNumeric(Buffer.from('0000644\0'))).toBe(0o644);
    expect(parseNumeric(Buffer.from('  755 \0\0'))).toBe(0o755);
    expect(parseNumeric(Buffer.alloc(8))).toBe(0);
    expect(parseNumeric(Buffer.from('12\x0034'))).toBe(0o12); // a NUL ends the number
    expect(parseNumeric(Buffer.from('0008'))).toBeUndefined();
  });

  it('reads base-256, negative ones too, and refuses what a double cannot hold exactly', () => {
    expect(parseNumeric(Buffer.from([0x80, 0, 0, 0, 0, 0, 1, 0]))).toBe(256);
    expect(parseNumeric(Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))).toBe(-1);
    const big = Buffer.alloc(12);
    big.writeBigUInt64BE(2n ** 53n - 1n, 4);
    big[0] = 0x80;
    expect(parseNumeric(big)).toBe(Number.MAX_SAFE_INTEGER);
    big.writeBigUInt64BE(2n ** 53n, 4);
    expect(parseNumeric(big)).toBeUndefined();
  });

  it('reads octal at the edge of the safe range exactly, and refuses one past it', () => {
    expect(parseNumeric(Buffer.from(Number.MAX_SAFE_INTEGER.toString(8)))).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseNumeric(Buffer.from((2n ** 53n).toString(8)))).toBeUndefined();
    expect(parseNumeric(Buffer.from('7'.repeat(30)))).toBeUndefined();
    expect(parseNumeric(Buffer.from('0'.repeat(30) + '17'))).toBe(0o17);
    expect(parseNumeric(Buffer.from('12 34'))).toBeUndefined(); // a space inside is not padding
  });

  it('reads any octal field as the text rule does: trim spaces and NULs, stop at a NUL, digits 0-7 only', () => {
    /** The rule spelled out with strings (how the field was read before it went digit by digit). */
    function byText(field: Buffer): number | undefined {
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
    const byte = fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: 0x30, max: 0x37 }) },
      { weight: 2, arbitrary: fc.constantFrom(0x20, 0x00, 0x38, 0x39, 0x2b, 0x2d) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 0x7f }) },
    );
    fc.assert(
      fc.property(fc.array(byte, { minLength: 1, maxLength: 24 }), (bytes) => {
        const field = Buffer.from(bytes);
        expect(parseNumeric(field)).toBe(byText(field));
      }),
      { numRuns: 5000 },
    );
  });

  it('reads a field inside a block as it reads the same bytes on their own', () => {
    const byte = fc.oneof(fc.integer({ min: 0x30, max: 0x37 }), fc.constantFrom(0x20, 0x00, 0x80, 0xff, 0x38), fc.integer({ min: 0, max: 0xff }));
    fc.assert(
      fc.property(fc.array(byte, { minLength: 1, maxLength: 40 }), fc.nat(), fc.nat(), (bytes, x, y) => {
        const b = Buffer.from(bytes);
        const start = x % b.length;
        const end = start + (y % (b.length - start + 1));
        expect(parseNumericAt(b, start, end)).toBe(parseNumeric(Buffer.from(b.subarray(start, end))));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('parseHeader', () => {
  it('reads a ustar header with its prefix, device numbers and type', () => {
    const h = parseHeader(
      block({ 0: 'name', 100: '0000600\0', 124: '00000000012\0', 156: '3', 257: 'ustar\x0000', 329: '0000001\0', 337: '0000003\0', 345: 'some/dir' }),
      invalid,
    );
    expect(h).toMatchObject({ format: 'ustar', name: 'some/dir/name', mode: 0o600, size: 10, flag: '3', devmajor: 1, devminor: 3 });
    expect(typeOf(h.flag)).toBe('character-device');
  });

  it("ignores device fields of a v7 header, and reads a GNU header's atime", () => {
    expect(parseHeader(block({ 0: 'f', 329: '0000001\0' }), invalid)).toMatchObject({ format: 'v7', devmajor: 0 });
    expect(parseHeader(block({ 0: 'f', 257: 'ustar  \0', 345: '00000000017\0' }), invalid)).toMatchObject({ format: 'gnu', atime: 0o17 });
  });

  it('accepts a signed-byte checksum, as Go does, and refuses a wrong one', () => {
    const b = block({ 0: 'caf\xe9' });
    let signed = 0;
    for (let i = 0; i < BLOCK; i++) signed += i >= 148 && i < 156 ? 0x20 : (b[i]! << 24) >> 24;
    expect(parseHeader(block({ 0: 'caf\xe9' }, `${signed.toString(8).padStart(6, '0')}\0 `), invalid).name).toBe('caf\xe9');
    expect(() => parseHeader(block({ 0: 'f' }, '0000001\0'), invalid)).toThrow('bad checksum');
  });

  it('names the field it cannot read', () => {
    expect(() => parseHeader(block({ 0: 'f', 108: 'x\0' }), invalid)).toThrow('unreadable uid field');
  });

  it('maps type flags as Go does', () => {
    expect(['0', '\0', '7', 'S', '1', '2', '4', '5', '6', 'V'].map(typeOf)).toEqual([
      'file',
      'file',
      'file',
      'file',
      'link',
      'symlink',
      'block-device',
      'directory',
      'fifo',
      'unknown',
    ]);
    expect([0, 1, 512, 513].map(padToBlock)).toEqual([0, 512, 512, 1024]);
  });
});
