// Tests of applyLayer: the tar as a stream (its end, abort, errors), sparse files, GNU tar parity, dialects, names that are not UTF-8.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer } from './apply.js';
import { hasGnuTar, makeSandbox, paxRecord, rawHeader, removeSandbox } from './apply.testkit.js';
import { nativeFs } from '../../native/addon.js';
import { chunksOf, code, makeTar, padded } from '../tar/tar.testkit.js';
import { lacks, lacksRoot } from '../../testing/needs.js';

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

describe('applyLayer: the end of the tar', () => {
  it('reads every byte after the end-of-archive marker and ignores entries there', async () => {
    const tar = await makeTar([{ name: 'a', body: 'a' }]);
    const after = await makeTar([{ name: 'after-the-end', body: 'b' }]);
    const data = Buffer.concat([tar, after, Buffer.from('trailing junk that is not a tar header at all')]);
    let consumed = 0;
    async function* source(): AsyncGenerator<Buffer> {
      for await (const c of chunksOf(data, 333)) {
        consumed += c.length;
        yield c;
      }
    }
    const stats = await applyLayer(source(), dest);
    expect(consumed).toBe(data.length);
    expect(fs.readdirSync(dest)).toEqual(['a']);
    expect(stats.entries).toBe(1);

    // All in one write: the end is then found after the last entry rather than before a write.
    const again = path.join(sandbox, 'again');
    fs.mkdirSync(again);
    const once = await applyLayer(chunksOf(data, data.length), again);
    expect(fs.readdirSync(again)).toEqual(['a']);
    expect(once.entries).toBe(1);
  });

  it('takes a tar without an end marker that ends on an entry boundary', async () => {
    const tar = await makeTar([{ name: 'a', body: 'a' }]);
    await applyLayer(chunksOf(tar.subarray(0, 1024)), dest);
    expect(fs.readFileSync(path.join(dest, 'a'), 'utf8')).toBe('a');
  });

  it('rejects a truncated tar and a corrupt header with INVALID_LAYER', async () => {
    const tar = await makeTar([
      { name: 'a', body: 'x'.repeat(2000) },
      { name: 'b', body: 'b' },
    ]);
    expect(await code(applyLayer(chunksOf(tar.subarray(0, 1500)), dest))).toBe('INVALID_LAYER');
    fs.rmSync(dest, { recursive: true });
    fs.mkdirSync(dest);
    const corrupt = Buffer.from(tar);
    corrupt.write('garbage', 2560); // the header of "b"
    expect(await code(applyLayer(chunksOf(corrupt), dest))).toBe('INVALID_LAYER');
  });

  it('does not treat a zero block inside a file as the end', async () => {
    const zeros = Buffer.alloc(4096);
    const tar = await makeTar([
      { name: 'zeros', body: zeros },
      { name: 'next', body: 'n' },
    ]);
    await applyLayer(chunksOf(tar, 512), dest);
    expect(fs.readFileSync(path.join(dest, 'zeros')).equals(zeros)).toBe(true);
    expect(fs.readFileSync(path.join(dest, 'next'), 'utf8')).toBe('n');
  });
});

describe('applyLayer: abort and errors', () => {
  it('fails with ABORTED when the signal fires mid-layer', async () => {
    const tar = await makeTar([{ name: 'a', body: 'a' }]);
    const ac = new AbortController();
    async function* stalls(): AsyncGenerator<Buffer> {
      yield tar.subarray(0, 512);
      setTimeout(() => ac.abort(new Error('user')), 10);
      await new Promise(() => undefined); // never yields again
    }
    expect(await code(applyLayer(stalls(), dest, { signal: ac.signal }))).toBe('ABORTED');
    expect(await code(applyLayer(chunksOf(tar), dest, { signal: AbortSignal.abort() }))).toBe('ABORTED');
  });

  it('fails with ABORTED when the signal fires while draining past the end of the tar', async () => {
    const tar = await makeTar([{ name: 'a', body: 'a' }]);
    const ac = new AbortController();
    async function* stallsAfterEnd(): AsyncGenerator<Buffer> {
      yield tar;
      setTimeout(() => ac.abort(), 10);
      await new Promise(() => undefined);
    }
    expect(await code(applyLayer(stallsAfterEnd(), dest, { signal: ac.signal }))).toBe('ABORTED');
  });

  it('passes an error of the tar stream through unchanged', async () => {
    const tar = await makeTar([{ name: 'a', body: 'x'.repeat(5000) }]);
    async function* broken(): AsyncGenerator<Buffer> {
      yield tar.subarray(0, 1024);
      throw Object.assign(new Error('source broke'), { code: 'Z_DATA_ERROR' });
    }
    await expect(applyLayer(broken(), dest)).rejects.toMatchObject({ message: 'source broke', code: 'Z_DATA_ERROR' });
  });

  it.skipIf(lacksRoot())('reports a full filesystem as NO_SPACE', async (ctx) => {
    const small = path.join(sandbox, 'small');
    fs.mkdirSync(small);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { stdio: 'pipe' });
    } catch (e) {
      console.warn(`skipping NO_SPACE test: cannot mount tmpfs: ${(e as Error).message}`);
      lacks('tmpfs', `cannot mount tmpfs: ${(e as Error).message}`);
      ctx.skip();
    }
    try {
      const tar = await makeTar([{ name: 'big', body: Buffer.alloc(1024 * 1024, 1) }]);
      expect(await code(applyLayer(chunksOf(tar, 64 * 1024), small))).toBe('NO_SPACE');
    } finally {
      execFileSync('umount', [small]);
    }
  });
});

describe('applyLayer: sparse files', () => {
  /** A 2 MiB file of a few data runs (some mid-block, one at the very start) with holes between and after. */
  function makeSparse(file: string): Buffer {
    const size = 2 * 1024 * 1024;
    const expected = Buffer.alloc(size);
    const runs: Array<[number, string]> = [
      [0, 'head'],
      [200_000, 'a'.repeat(5000)],
      [400_123, 'b'],
      [600_000, 'c'],
      [800_000, 'd'],
      [1_000_000, 'e'],
      [1_500_000, 'f'.repeat(9000)],
    ];
    const fd = fs.openSync(file, 'w');
    for (const [at, text] of runs) {
      fs.writeSync(fd, text, at);
      expected.write(text, at);
    }
    fs.ftruncateSync(fd, size);
    fs.closeSync(fd);
    return expected;
  }

  const formats: Array<[string, string[]]> = [
    ['old GNU (S, with extension blocks)', ['--format=gnu']],
    ['PAX 1.0', ['--format=pax', '--sparse-version=1.0']],
    ['PAX 0.1', ['--format=pax', '--sparse-version=0.1']],
    ['PAX 0.0', ['--format=pax', '--sparse-version=0.0']],
  ];
  it.skipIf(lacks('tar', hasGnuTar ? undefined : 'GNU tar is not installed')).each(formats)(
    'writes a %s sparse file from GNU tar sparse, with the same bytes',
    async (_, flags) => {
      const src = path.join(sandbox, 'src');
      fs.mkdirSync(src);
      const expected = makeSparse(path.join(src, 'sparse'));
      fs.writeFileSync(path.join(src, 'after'), 'next entry');
      // An all-hole file: a map with no data at all.
      fs.closeSync(fs.openSync(path.join(src, 'empty-hole'), 'w'));
      fs.truncateSync(path.join(src, 'empty-hole'), 1024 * 1024);
      const tar = execFileSync('tar', ['--sparse', ...flags, '-cf', '-', '-C', src, 'sparse', 'empty-hole', 'after'], { maxBuffer: 64 * 1024 * 1024 });
      expect(tar.length).toBeLessThan(200 * 1024); // the tar itself holds only the data

      const stats = await applyLayer(chunksOf(tar, 4096), dest);
      expect(fs.readdirSync(dest).sort()).toEqual(['after', 'empty-hole', 'sparse']);
      const out = path.join(dest, 'sparse');
      expect(fs.readFileSync(out).equals(expected)).toBe(true);
      const st = fs.statSync(out);
      expect(st.size).toBe(expected.length);
      expect(st.blocks * 512).toBeLessThan(expected.length / 4); // holes were skipped, not written as zeros
      expect(fs.statSync(path.join(dest, 'empty-hole')).size).toBe(1024 * 1024);
      expect(fs.readFileSync(path.join(dest, 'after'), 'utf8')).toBe('next entry');
      expect(stats.files).toBe(3);
    },
  );

  it('refuses a sparse map whose data does not match what the entry stores', async () => {
    const pax = Buffer.concat([
      paxRecord('GNU.sparse.size', Buffer.from('100')),
      paxRecord('GNU.sparse.numblocks', Buffer.from('1')),
      paxRecord('GNU.sparse.map', Buffer.from('10,5')),
    ]);
    const tar = Buffer.concat([
      rawHeader('PaxHeaders/s', 'x', pax.length),
      padded(pax),
      rawHeader('s', '0', 3),
      padded(Buffer.from('abc')),
      Buffer.alloc(1024),
    ]);
    expect(await code(applyLayer(chunksOf(tar), dest))).toBe('INVALID_LAYER');
  });
});

describe('applyLayer: parity with GNU tar', () => {
  it.skipIf(lacks('tar', hasGnuTar ? undefined : 'GNU tar is not installed')).each([['gnu'], ['pax'], ['ustar']])(
    'extracts a --format=%s tree as GNU tar made it',
    async (format) => {
      const src = path.join(sandbox, 'src');
      const long = `${'long-directory-name-'.repeat(4)}/${'x'.repeat(120)}`;
      fs.mkdirSync(path.join(src, path.dirname(long)), { recursive: true });
      fs.writeFileSync(path.join(src, long), 'deep');
      fs.writeFileSync(path.join(src, 'exec'), '#!/bin/sh\n');
      fs.chmodSync(path.join(src, 'exec'), 0o751);
      fs.symlinkSync(format === 'ustar' ? 'exec' : `../${'t'.repeat(150)}`, path.join(src, 'link'));
      fs.linkSync(path.join(src, 'exec'), path.join(src, 'hard'));
      fs.utimesSync(path.join(src, 'exec'), 1_500_000_000, 1_500_000_000);
      const names = format === 'ustar' ? ['exec', 'link', 'hard'] : ['exec', 'link', 'hard', long];
      const tar = execFileSync('tar', [`--format=${format}`, '-cf', '-', '-C', src, ...names]);
      await applyLayer(chunksOf(tar, 1000), dest);
      for (const n of names) {
        const a = fs.lstatSync(path.join(src, n));
        const b = fs.lstatSync(path.join(dest, n));
        expect([n, b.mode & 0o170777, b.size]).toEqual([n, a.mode & 0o170777, a.size]);
        // PAX keeps nanoseconds; the others whole seconds.
        const [ans, bns] = [fs.lstatSync(path.join(src, n), { bigint: true }).mtimeNs, fs.lstatSync(path.join(dest, n), { bigint: true }).mtimeNs];
        expect([n, bns]).toEqual([n, format === 'pax' ? ans : (ans / 1_000_000_000n) * 1_000_000_000n]);
      }
      expect(fs.readlinkSync(path.join(dest, 'link'))).toBe(fs.readlinkSync(path.join(src, 'link')));
      expect(fs.statSync(path.join(dest, 'hard')).ino).toBe(fs.statSync(path.join(dest, 'exec')).ino);
    },
  );
});

describe('applyLayer: tar dialects', () => {
  it('reads a pre-POSIX (v7) tar, whose directories are marked by a trailing slash', async () => {
    const v7 = (name: string, flag: string, size: number): Buffer => {
      const b = rawHeader(name, flag, size);
      b.fill(0, 257, 265); // no magic
      b.fill(0x20, 148, 156);
      let sum = 0;
      for (const byte of b) sum += byte;
      b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
      return b;
    };
    const tar = Buffer.concat([v7('d/', '\0', 0), v7('d/f', '\0', 2), padded(Buffer.from('hi')), Buffer.alloc(1024)]);
    await applyLayer(chunksOf(tar), dest);
    expect(fs.statSync(path.join(dest, 'd')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(dest, 'd/f'), 'utf8')).toBe('hi');
  });

  it('takes sizes from PAX records and base-256 fields, and treats contiguous files as files', async () => {
    const pax = paxRecord('size', Buffer.from('5'));
    const b256 = rawHeader('b256', '0', 0);
    b256.fill(0, 124, 136);
    b256[124] = 0x80;
    b256[135] = 3;
    b256.fill(0x20, 148, 156);
    let sum = 0;
    for (const byte of b256) sum += byte;
    b256.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    const tar = Buffer.concat([
      rawHeader('PaxHeaders/p', 'x', pax.length),
      padded(pax),
      rawHeader('p', '0', 0),
      padded(Buffer.from('fives')),
      b256,
      padded(Buffer.from('abc')),
      rawHeader('contig', '7', 2),
      padded(Buffer.from('ok')),
      Buffer.alloc(1024),
    ]);
    await applyLayer(chunksOf(tar, 100), dest);
    expect(['p', 'b256', 'contig'].map((n) => fs.readFileSync(path.join(dest, n), 'utf8'))).toEqual(['fives', 'abc', 'ok']);
  });

  it('refuses entry types it cannot extract instead of dropping them', async () => {
    for (const flag of ['V', 'M', 'N', 'Z']) {
      const tar = Buffer.concat([rawHeader('x', flag, 0), Buffer.alloc(1024)]);
      await expect(applyLayer(chunksOf(tar), dest)).rejects.toMatchObject({ code: 'INVALID_LAYER', details: { typeflag: flag } });
    }
  });
});

describe('applyLayer: names that are not UTF-8', () => {
  const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

  it.skipIf(lacksRoot())('makes whiteouts, devices, xattrs and opaque markers under such names', async () => {
    const dirName = latin1('r\xe9p/'); // "rép" in Latin-1: not UTF-8
    const xattr = paxRecord('SCHILY.xattr.user.tag', Buffer.from('v'));
    const tar = Buffer.concat([
      rawHeader(dirName, '5', 0, 0o755),
      rawHeader(latin1('r\xe9p/.wh.gon\xe9'), '0', 0),
      rawHeader(latin1('r\xe9p/null\xff'), '3', 0, 0o666, [1, 3]),
      rawHeader('PaxHeaders/x', 'x', xattr.length),
      padded(xattr),
      rawHeader(latin1('r\xe9p/f\xe9'), '0', 1),
      padded(Buffer.from('x')),
      rawHeader('PaxHeaders/y', 'x', xattr.length),
      padded(xattr),
      rawHeader(latin1('r\xe9p/sub\xe9/'), '5', 0, 0o700),
      rawHeader('PaxHeaders/z', 'x', xattr.length),
      padded(xattr),
      rawHeader(latin1('r\xe9p/utf8-\xc3\xa9'), '0', 0), // a UTF-8 name in a directory whose name is not
      rawHeader(latin1('r\xe9p/.wh..wh..opq'), '0', 0),
      Buffer.alloc(1024),
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    const at = (rel: string): Buffer => Buffer.concat([Buffer.from(`${dest}/`), latin1(rel)]);
    const names = fs
      .readdirSync(at('r\xe9p'), { encoding: 'buffer' })
      .map((b) => b.toString('latin1'))
      .sort();
    expect(names).toEqual(['f\xe9', 'gon\xe9', 'null\xff', 'sub\xe9', 'utf8-\xc3\xa9']); // no temporary names left
    expect(fs.lstatSync(at('r\xe9p/gon\xe9')).rdev).toBe(0);
    expect(fs.lstatSync(at('r\xe9p/gon\xe9')).isCharacterDevice()).toBe(true);
    expect(fs.lstatSync(at('r\xe9p/null\xff')).isCharacterDevice()).toBe(true);
    expect(fs.lstatSync(at('r\xe9p/null\xff')).rdev).toBe(0x103);
    expect(fs.lstatSync(at('r\xe9p/sub\xe9')).mode & 0o7777).toBe(0o700);
    // The addon takes UTF-8 strings only, so reach them by descriptor to check.
    const fd = fs.openSync(at('r\xe9p'), 'r');
    try {
      fs.renameSync(at('r\xe9p/f\xe9'), at('r\xe9p/plain'));
      fs.renameSync(at('r\xe9p/sub\xe9'), at('r\xe9p/subdir'));
      expect(nativeFs().lgetxattr(`/proc/self/fd/${fd}/plain`, 'user.tag')?.toString()).toBe('v');
      expect(nativeFs().lgetxattr(`/proc/self/fd/${fd}/subdir`, 'user.tag')?.toString()).toBe('v');
      expect(nativeFs().lgetxattr(`/proc/self/fd/${fd}/utf8-\u00e9`, 'user.tag')?.toString()).toBe('v');
      expect(nativeFs().lgetxattr(`/proc/self/fd/${fd}/.`, 'trusted.overlay.opaque')?.toString()).toBe('y');
    } finally {
      fs.closeSync(fd);
    }
    expect(stats.whiteouts).toBe(2);
  });
});

describe('applyLayer: what it lets go of', () => {
  it('says how far it holds nothing of the stream: before each entry and after each piece of a large file, only ever forward', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 100, 7);
    const tar = await makeTar([
      { name: 'a', body: 'x' },
      { name: 'big', body: big },
      { name: 'b', body: 'y' },
    ]);
    const offsets: number[] = [];
    await applyLayer(chunksOf(tar, 64 * 1024), dest, { onReleased: (n) => offsets.push(n) });
    expect(fs.readFileSync(path.join(dest, 'big')).equals(big)).toBe(true);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThanOrEqual(offsets[i - 1]!);
    expect(offsets[0]).toBe(0);
    expect(offsets.at(-1)!).toBeLessThanOrEqual(tar.length);
    // The big file's data runs from after its header (two 512-byte blocks and 'a''s data block in) for 3 MiB:
    // pieces of it were let go of while it was still being written.
    const inside = offsets.filter((n) => n > 2048 && n < 2048 + big.length);
    expect(inside.length).toBeGreaterThan(10);
  });
});
