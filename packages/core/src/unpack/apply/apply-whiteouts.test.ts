// Tests of applyLayer: OCI whiteouts and opaque markers in overlay form, against entries of the same layer.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer } from './apply.js';
import { makeSandbox, removeSandbox } from './apply.testkit.js';
import { nativeFs } from '../../native/addon.js';
import { chunksOf, makeTar, type Entry } from '../tar/tar.testkit.js';
import { lacksRoot } from '../../testing/needs.js';

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

describe('applyLayer: whiteouts', () => {
  const opaqueOf = (rel: string): string | undefined => nativeFs().lgetxattr(path.join(dest, rel), 'trusted.overlay.opaque')?.toString();

  it.skipIf(lacksRoot())('turns .wh.NAME into a 0:0 character device', async () => {
    const tar = await makeTar([{ name: 'etc/.wh.lower-only' }, { name: '.wh.dir' }, { name: 'twice/.wh.x' }, { name: 'twice/.wh.x' }]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const p of ['etc/lower-only', 'dir', 'twice/x']) {
      const st = fs.lstatSync(path.join(dest, p));
      expect(st.isCharacterDevice()).toBe(true);
      expect(st.rdev).toBe(0);
      expect(st.mode & 0o7777).toBe(0);
    }
    expect(fs.readdirSync(path.join(dest, 'etc'))).toEqual(['lower-only']);
    expect(stats.whiteouts).toBe(4);
  });

  // image-spec layer.md: "Whiteout files MUST only apply to resources in lower/parent layers."
  const kinds: Array<[string, Entry, (rel: string) => void]> = [
    ['file', { name: 'n', body: 'own' }, (rel) => expect(fs.readFileSync(path.join(dest, rel), 'utf8')).toBe('own')],
    ['symlink', { name: 'n', type: 'symlink', linkname: '/own/target' }, (rel) => expect(fs.readlinkSync(path.join(dest, rel))).toBe('/own/target')],
    ['directory', { name: 'n/', type: 'directory', mode: 0o750 }, (rel) => expect(fs.lstatSync(path.join(dest, rel)).mode & 0o7777).toBe(0o750)],
  ];
  it.skipIf(lacksRoot()).each(kinds)('keeps a %s of its own layer that a later whiteout names, opaque when a directory', async (kind, entry, check) => {
    const children: Entry[] = kind === 'directory' ? [{ name: 'n/own-child', body: 'c' }] : [];
    const tar = await makeTar([
      entry,
      ...children,
      { name: '.wh.n' },
      { ...entry, name: `sub/${entry.name}` },
      ...children.map((c) => ({ ...c, name: `sub/${c.name}` })),
      { name: 'sub/.wh.n' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const rel of ['n', 'sub/n']) {
      check(rel);
      expect(opaqueOf(rel)).toBe(kind === 'directory' ? 'y' : undefined); // a non-directory hides the lower entry by itself
    }
    if (kind === 'directory') expect(fs.readdirSync(path.join(dest, 'n'))).toEqual(['own-child']);
    expect(stats.whiteouts).toBe(2);
  });

  it.skipIf(lacksRoot()).each(kinds)('replaces a whiteout with a later %s of its own layer, opaque when a directory', async (kind, entry, check) => {
    const tar = await makeTar([{ name: '.wh.n' }, entry, { name: 'sub/.wh.n' }, { ...entry, name: `sub/${entry.name}` }]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const rel of ['n', 'sub/n']) {
      check(rel);
      expect(opaqueOf(rel)).toBe(kind === 'directory' ? 'y' : undefined);
    }
    expect(stats.whiteouts).toBe(2);
  });

  it.skipIf(lacksRoot())('makes a directory opaque when a whiteout of its path came earlier in the layer, whatever came between', async () => {
    const tar = await makeTar([
      { name: '.wh.a' },
      { name: 'a', body: 'a file first' },
      { name: 'a/', type: 'directory' },
      { name: 'b/', type: 'directory' },
      { name: 'b/.wh.c' },
      { name: 'b/.wh.c' },
      { name: 'b/c/', type: 'directory' },
      { name: 'plain/', type: 'directory' },
      { name: 'plain/child', body: 'x' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    expect(opaqueOf('a')).toBe('y');
    expect(opaqueOf('b/c')).toBe('y');
    expect(opaqueOf('b')).toBeUndefined();
    expect(opaqueOf('plain')).toBeUndefined(); // no whiteout named it: it merges with the lower one
    expect(stats.whiteouts).toBe(3);
  });

  it.skipIf(lacksRoot())('makes a directory opaque where the same layer had a whiteout or a non-directory before it', async () => {
    const tar = await makeTar([
      { name: '.wh.w' },
      { name: 'w/f', body: 'below a whiteout of this layer' }, // implies w/
      { name: 'g', body: 'a file first' },
      { name: 'g/', type: 'directory', mode: 0o750 },
      { name: 's', type: 'symlink', linkname: '/elsewhere' },
      { name: 's/', type: 'directory' },
      { name: 'kept/', type: 'directory' },
      { name: 'kept/', type: 'directory', mode: 0o700 }, // a directory over a directory merges
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const rel of ['w', 'g', 's']) {
      expect(fs.lstatSync(path.join(dest, rel)).isDirectory(), rel).toBe(true);
      expect(opaqueOf(rel), rel).toBe('y');
    }
    expect(fs.readdirSync(path.join(dest, 'w'))).toEqual(['f']);
    expect(opaqueOf('kept')).toBeUndefined();
    expect(stats.lowerChecks).toEqual({ impliedDirs: ['w'], whiteouts: [] });
  });

  it.skipIf(lacksRoot())('lists the parents it implies and the whiteouts it makes, for the layers below to settle', async () => {
    const tar = await makeTar([
      { name: 'a/b/c/file', body: 'x' },
      { name: 'a/b/', type: 'directory', mode: 0o750 }, // named after all: no longer implied
      { name: 'gone/.wh.x' },
      { name: '.wh.top' },
      { name: '.wh.back' },
      { name: 'back', body: 'recreated' }, // replaces its whiteout
      { name: 'o/.wh..wh..opq' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    expect([...stats.lowerChecks.impliedDirs].sort()).toEqual(['a', 'a/b/c', 'gone', 'o']);
    expect([...stats.lowerChecks.whiteouts].sort()).toEqual(['gone/x', 'top']);
  });

  it.skipIf(lacksRoot())('marks opaque directories with trusted.overlay.opaque=y and drops aufs metadata', async () => {
    const tar = await makeTar([
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh..wh..opq' },
      { name: 'new/.wh..wh..opq' }, // its directory does not exist yet
      { name: '.wh..wh.plnk/', type: 'directory' },
      { name: '.wh..wh.plnk/123.456', body: 'x' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    const addon = nativeFs();
    expect(addon.lgetxattr(path.join(dest, 'd'), 'trusted.overlay.opaque')?.toString()).toBe('y');
    expect(addon.lgetxattr(path.join(dest, 'new'), 'trusted.overlay.opaque')?.toString()).toBe('y');
    expect(fs.readdirSync(path.join(dest, 'd'))).toEqual([]);
    expect(fs.readdirSync(dest).sort()).toEqual(['d', 'new']);
    expect(stats.whiteouts).toBe(2);
  });
});
