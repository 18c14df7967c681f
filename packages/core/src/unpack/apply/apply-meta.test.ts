// Tests of applyLayer: xattrs and times to the nanosecond.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer } from './apply.js';
import { makeSandbox, paxRecord, rawHeader, removeSandbox } from './apply.testkit.js';
import { nativeFs } from '../../native/addon.js';
import { chunksOf, padded } from '../tar/tar.testkit.js';

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

describe('applyLayer: xattrs', () => {
  // Overlay's own xattrs (trusted.overlay.*, user.overlay.*) now fail the layer: see hostile.test.ts.
  it('sets SCHILY.xattr records byte for byte and drops other trusted.* from the layer', async () => {
    const value = Buffer.from([0x01, 0x00, 0x80, 0xff, 0xc3, 0x28, 0x00, 0x02]); // not UTF-8
    const pax = Buffer.concat([
      paxRecord('SCHILY.xattr.user.bin', value),
      paxRecord('SCHILY.xattr.trusted.other', Buffer.from('y')),
      paxRecord('mtime', Buffer.from('1600000000.5')),
    ]);
    const body = Buffer.from('content');
    const tar = Buffer.concat([
      rawHeader('dir/', '5', 0, 0o755),
      rawHeader('PaxHeaders/f', 'x', pax.length),
      padded(pax),
      rawHeader('dir/f', '0', body.length),
      padded(body),
      Buffer.alloc(1024),
    ]);
    const stats = await applyLayer(chunksOf(tar, 100), dest);
    const addon = nativeFs();
    const f = path.join(dest, 'dir/f');
    expect(fs.readFileSync(f, 'utf8')).toBe('content');
    expect(addon.lgetxattr(f, 'user.bin')).toEqual(value);
    expect(addon.lgetxattr(f, 'trusted.other')).toBeNull();
    expect(fs.statSync(f).mtimeMs).toBe(1_600_000_000_500);
    expect(stats.warnings.join('\n')).toMatch(/trusted\.other/);
  });
});

describe('applyLayer: times', () => {
  /** An entry with PAX records, written raw: tar-stream's packer writes whole seconds only. */
  function withPax(records: Array<[string, string]>, header: Buffer, data?: Buffer): Buffer[] {
    const pax = Buffer.concat(records.map(([k, v]) => paxRecord(k, Buffer.from(v))));
    return [rawHeader('PaxHeaders/x', 'x', pax.length), padded(pax), header, ...(data === undefined ? [] : [padded(data)])];
  }
  const symlinkHeader = (name: string | Buffer, target: string): Buffer => {
    const b = rawHeader(name, '2', 0, 0o777);
    b.write(target, 157, 100, 'utf8');
    b.fill(0x20, 148, 156);
    let sum = 0;
    for (const byte of b) sum += byte;
    b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    return b;
  };
  const mtimeNs = (rel: string | Buffer): bigint =>
    fs.lstatSync(Buffer.isBuffer(rel) ? Buffer.concat([Buffer.from(`${dest}/`), rel]) : path.join(dest, rel), { bigint: true }).mtimeNs;
  const atimeNs = (rel: string): bigint => fs.lstatSync(path.join(dest, rel), { bigint: true }).atimeNs;

  it('keeps PAX mtimes to the nanosecond on files, directories, symlinks and fifos, before 1970 too', async () => {
    const nonUtf8 = Buffer.from('l\xe9', 'latin1');
    const tar = Buffer.concat([
      ...withPax([['mtime', '1600000000.123456789']], rawHeader('d/', '5', 0, 0o755)),
      ...withPax([['mtime', '1600000000.987654321']], rawHeader('d/f', '0', 1), Buffer.from('x')),
      ...withPax([['mtime', '1500000000.000000001']], symlinkHeader('d/s', '/nowhere')),
      ...withPax([['mtime', '1400000000.5']], rawHeader('fifo', '6', 0)),
      ...withPax([['mtime', '-1.25']], rawHeader('before-1970', '0', 0)),
      ...withPax([['mtime', '-0.000000001']], rawHeader('just-before', '0', 0)),
      ...withPax([['mtime', '-86400']], rawHeader('old-dir/', '5', 0, 0o755)),
      ...withPax([['mtime', '1600000000.1234567891999']], rawHeader('cut', '0', 0)), // digits past the ninth are cut, as Go does
      ...withPax([['mtime', '1600000000.']], rawHeader('dot', '0', 0)),
      ...withPax([['mtime', '1300000000.000000042']], symlinkHeader(nonUtf8, 'target')), // set through its parent's descriptor
      Buffer.alloc(1024),
    ]);
    await applyLayer(chunksOf(tar), dest);
    expect(mtimeNs('d')).toBe(1_600_000_000_123_456_789n); // restored after its children were written
    expect(mtimeNs('d/f')).toBe(1_600_000_000_987_654_321n);
    expect(fs.lstatSync(path.join(dest, 'd/s')).isSymbolicLink()).toBe(true);
    expect(mtimeNs('d/s')).toBe(1_500_000_000_000_000_001n);
    expect(mtimeNs('fifo')).toBe(1_400_000_000_500_000_000n);
    expect(mtimeNs('before-1970')).toBe(-1_250_000_000n);
    expect(mtimeNs('just-before')).toBe(-1n);
    expect(mtimeNs('old-dir')).toBe(-86_400_000_000_000n);
    expect(mtimeNs('cut')).toBe(1_600_000_000_123_456_789n);
    expect(mtimeNs('dot')).toBe(1_600_000_000_000_000_000n);
    expect(mtimeNs(nonUtf8)).toBe(1_300_000_000_000_000_042n);
    expect(fs.readdirSync(dest, { encoding: 'buffer' }).filter((n) => n.toString('latin1').startsWith('.fastpull-tmp'))).toEqual([]);
  });

  it('takes a later PAX atime to the nanosecond, and mtime as atime when atime is earlier', async () => {
    const tar = Buffer.concat([
      ...withPax(
        [
          ['mtime', '1600000000.1'],
          ['atime', '1600000000.100000001'],
        ],
        rawHeader('later', '0', 0),
      ),
      ...withPax(
        [
          ['mtime', '1600000000.1'],
          ['atime', '1500000000.999999999'],
        ],
        rawHeader('earlier', '0', 0),
      ),
      Buffer.alloc(1024),
    ]);
    await applyLayer(chunksOf(tar), dest);
    expect(atimeNs('later')).toBe(1_600_000_000_100_000_001n);
    expect(atimeNs('earlier')).toBe(1_600_000_000_100_000_000n);
  });

  it('refuses a time out of range', async () => {
    const tar = Buffer.concat([...withPax([['mtime', '-100000000000.5']], rawHeader('f', '0', 0)), Buffer.alloc(1024)]);
    await expect(applyLayer(chunksOf(tar), dest)).rejects.toMatchObject({ code: 'INVALID_LAYER', message: /out of range/ });
  });

  it('sets nanosecond times through the native addon, taking bigint seconds and refusing fractions', () => {
    const f = path.join(dest, 'f');
    fs.writeFileSync(f, '');
    const addon = nativeFs();
    addon.lutimesNs(f, -5n, 1, -3, 999_999_999);
    const st = fs.lstatSync(f, { bigint: true });
    expect([st.atimeNs, st.mtimeNs]).toEqual([-4_999_999_999n, -2_000_000_001n]);
    const fd = fs.openSync(f, 'r');
    try {
      addon.futimesNs(fd, 0, 0, 2n ** 33n, 7);
      expect(fs.fstatSync(fd, { bigint: true }).mtimeNs).toBe(2n ** 33n * 1_000_000_000n + 7n);
    } finally {
      fs.closeSync(fd);
    }
    for (const bad of [
      [1.5, 0],
      [0, 1e9],
      [0, -1],
      [0, 0.5],
      [Number.NaN, 0],
      [2n ** 63n, 0],
    ] as const) {
      expect(() => addon.lutimesNs(f, bad[0], bad[1], 0, 0)).toThrow(TypeError);
    }
    expect(() => addon.lutimesNs(path.join(dest, 'missing'), 0, 0, 0, 0)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
