// Tests of raw entry paths on their own: cleaning, and native calls on names that are not UTF-8 under a temporary name.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cleanEntryPath, display, fsPath, RawRoot } from './rawpath.js';

describe('cleanEntryPath', () => {
  it('cleans paths and rejects NUL and ..', () => {
    expect(cleanEntryPath('./a//b/./c/', 't')).toBe('a/b/c');
    expect(cleanEntryPath('/', 't')).toBe('');
    expect(cleanEntryPath('..a/b..', 't')).toBe('..a/b..');
    expect(() => cleanEntryPath('a\0b', 't')).toThrow(expect.objectContaining({ code: 'HOSTILE_LAYER' }));
    expect(() => cleanEntryPath('a/b/../c', 't')).toThrow(
      expect.objectContaining({ code: 'HOSTILE_LAYER', message: 't: path "a/b/../c" has a ".." component' }),
    );
  });

  it('cleans any name as splitting on / and dropping empty and . components does, and refuses the same', () => {
    /** The rule spelled out (how every name was cleaned before clean names were passed through as they are). */
    function bySplit(name: string): string {
      if (name.includes('\0')) throw new Error('NUL');
      const parts: string[] = [];
      for (const part of name.split('/')) {
        if (part === '' || part === '.') continue;
        if (part === '..') throw new Error('..');
        parts.push(part);
      }
      return parts.join('/');
    }
    const outcome = (f: () => string): string => {
      try {
        return `ok ${f()}`;
      } catch (e) {
        return `fails ${(e as { code?: string }).code ?? 'HOSTILE_LAYER'}`;
      }
    };
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', 'b', '.', '/', '\0', '\xe9'), { maxLength: 12 }), (chars) => {
        const name = chars.join('');
        expect(outcome(() => cleanEntryPath(name, 't'))).toBe(outcome(() => bySplit(name)));
      }),
      { numRuns: 5000 },
    );
  });
});

describe('display and fsPath', () => {
  it('shows raw bytes decoded as UTF-8, and gives node:fs a string for ASCII, else the bytes', () => {
    const raw = Buffer.from('café', 'utf8').toString('latin1');
    expect(display(raw)).toBe('café');
    expect(fsPath('plain/name')).toBe('plain/name');
    expect(fsPath(raw)).toEqual(Buffer.from('café', 'utf8'));
    expect(fsPath('caf\xe9')).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  });
});

describe('RawRoot.native', () => {
  let root: string;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-rawpath-'));
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  const names = (dir: string | Buffer = root): string[] =>
    fs
      .readdirSync(dir, { encoding: 'buffer' })
      .map((b) => b.toString('latin1'))
      .sort();

  it('hands ASCII and UTF-8 paths through as strings', () => {
    const paths = new RawRoot(root, () => false);
    const seen: string[] = [];
    paths.native('a/b', false, (p) => seen.push(p));
    paths.native(Buffer.from('é', 'utf8').toString('latin1'), false, (p) => seen.push(p));
    expect(seen).toEqual([`${root}/a/b`, `${root}/é`]);
  });

  it('reaches a name that is not UTF-8 under a temporary name that avoids the taken ones, and renames it back', () => {
    fs.mkdirSync(Buffer.from(`${root}/d\xe9`, 'latin1'));
    fs.writeFileSync(Buffer.from(`${root}/d\xe9/f\xff`, 'latin1'), 'x');
    const taken = new Set([`d\xe9/.fastpull-tmp-${process.pid}-1`]);
    const paths = new RawRoot(root, (rel) => taken.has(rel));
    let during: string[] = [];
    const got = paths.native('d\xe9/f\xff', false, (p) => {
      during = names(path.dirname(p)); // the parent's descriptor
      expect(fs.readFileSync(p, 'utf8')).toBe('x');
      return p;
    });
    expect(got).toMatch(new RegExp(`^/proc/self/fd/\\d+/\\.fastpull-tmp-${process.pid}-2$`));
    expect(during).toEqual([`.fastpull-tmp-${process.pid}-2`]);
    expect(names(Buffer.from(`${root}/d\xe9`, 'latin1'))).toEqual(['f\xff']);
  });

  it('renames a made entry into place, and leaves nothing when the call fails', () => {
    const paths = new RawRoot(root, () => false);
    paths.native('n\xff', true, (p) => fs.writeFileSync(p, 'made'));
    expect(names()).toEqual(['n\xff']);
    expect(() =>
      paths.native('m\xff', true, () => {
        throw new Error('mknod failed');
      }),
    ).toThrow('mknod failed');
    expect(names()).toEqual(['n\xff']);
  });
});
