// Tests of the overlay whiteout converter on its own: which entries it takes, what it makes, what it refuses.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LayerTree } from './layertree.js';
import { nativeFs } from '../../native/addon.js';
import { ApplyReport } from './report.js';
import { tarEntry } from '../tar/tar.testkit.js';
import type { ParsedTarEntry } from '../tar/tarreader.js';
import { OVERLAY_OPAQUE_XATTR, OverlayWhiteouts, ROOTLESS_OPAQUE_XATTR } from './whiteouts.js';
import { lacksRoot } from '../../testing/needs.js';

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('skipping whiteout converter cases that need root: mknod of a 0:0 device and trusted.* xattrs');

let root: string;
let report: ApplyReport;
let tree: LayerTree;
let converter: OverlayWhiteouts;

function setUp(opaqueXattr: string): void {
  report = new ApplyReport('applying layer to test');
  tree = new LayerTree(root, report, (dir) => converter.madeDir(dir, true));
  converter = new OverlayWhiteouts(tree, report, { opaqueXattr, sameOwner: isRoot, owner: (e) => ({ uid: e.uid, gid: e.gid }) });
}

/** Runs one entry through the converter as the writer does: begin, then convert. */
function convert(e: ParsedTarEntry, rel = e.name): boolean {
  report.begin(e);
  return converter.convert(rel, e);
}

const opaque = (rel: string, name = OVERLAY_OPAQUE_XATTR): string | undefined => nativeFs().lgetxattr(path.join(root, rel), name)?.toString();

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-whiteouts-'));
  setUp(OVERLAY_OPAQUE_XATTR);
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe('OverlayWhiteouts', () => {
  it('leaves ordinary entries to the generic apply, whatever their type', () => {
    expect(convert(tarEntry({ name: 'etc/passwd' }))).toBe(false);
    expect(convert(tarEntry({ name: 'notes.wh.txt' }))).toBe(false);
    expect(convert(tarEntry({ name: 'dev/null', type: 'character-device', flag: '3', devmajor: 1, devminor: 3 }))).toBe(false);
    expect(convert(tarEntry({ name: 'zero-one', type: 'character-device', flag: '3', devminor: 1 }))).toBe(false);
    expect(convert(tarEntry({ name: 'pipe', type: 'fifo', flag: '6' }))).toBe(false);
    expect(fs.readdirSync(root)).toEqual([]);
    expect(report.stats).toMatchObject({ whiteouts: 0, skipped: 0 });
  });

  it.skipIf(lacksRoot())('makes .wh.NAME a character device 0:0 at NAME, owned as the entry says, and records it in the tree', () => {
    expect(convert(tarEntry({ name: 'd/.wh.gone', uid: 7, gid: 8 }))).toBe(true);
    const st = fs.lstatSync(path.join(root, 'd/gone'));
    expect([st.isCharacterDevice(), st.rdev, st.uid, st.gid]).toEqual([true, 0, 7, 8]);
    expect(tree.lookup('d/gone')?.kind).toBe('whiteout');
    expect(tree.lookup('d')?.meta).toEqual({ mode: 0o755, implied: true });
    expect(report.stats.whiteouts).toBe(1);
  });

  it.skipIf(lacksRoot())('marks DIR opaque for DIR/.wh..wh..opq, with the xattr of the layout', () => {
    expect(convert(tarEntry({ name: 'a/.wh..wh..opq' }))).toBe(true);
    expect(opaque('a')).toBe('y');
    fs.rmSync(path.join(root, 'a'), { recursive: true });
    setUp(ROOTLESS_OPAQUE_XATTR);
    expect(convert(tarEntry({ name: 'b/.wh..wh..opq' }))).toBe(true);
    expect([opaque('b', ROOTLESS_OPAQUE_XATTR), opaque('b')]).toEqual(['y', undefined]);
  });

  it('drops aufs bookkeeping at the top and in directories, counting it as skipped', () => {
    expect(convert(tarEntry({ name: '.wh..wh.plnk/1.2', type: 'link', flag: '1' }))).toBe(true);
    expect(convert(tarEntry({ name: '.wh..wh.aufs' }))).toBe(true);
    expect(convert(tarEntry({ name: 'd/.wh..wh.orph' }))).toBe(true);
    expect(report.stats).toMatchObject({ skipped: 3, whiteouts: 0 });
    expect(fs.readdirSync(root)).toEqual([]); // not even the parent of a nested one
  });

  it('keeps what this layer made at a whited-out name, and makes such a directory opaque', () => {
    fs.writeFileSync(path.join(root, 'f'), 'mine');
    tree.root.children!.set('f', { kind: 'file' });
    fs.mkdirSync(path.join(root, 'd'));
    tree.root.children!.set('d', { kind: 'dir', children: new Map() });
    expect(convert(tarEntry({ name: '.wh.f' }))).toBe(true);
    expect(convert(tarEntry({ name: '.wh.d' }))).toBe(true);
    expect(fs.readFileSync(path.join(root, 'f'), 'utf8')).toBe('mine');
    expect(fs.lstatSync(path.join(root, 'd')).isDirectory()).toBe(true);
    if (isRoot) expect(opaque('d')).toBe('y');
    expect(report.stats.whiteouts).toBe(2);
  });

  it.skipIf(lacksRoot())('makes a directory opaque when it is made where this layer deleted or replaced something', () => {
    convert(tarEntry({ name: '.wh.later' }));
    // Whatever took the whiteout's place since (an unprivileged apply never makes it), the name was deleted below.
    fs.unlinkSync(path.join(root, 'later'));
    tree.root.children!.delete('later');
    fs.mkdirSync(path.join(root, 'later'));
    converter.madeDir('later', false);
    fs.mkdirSync(path.join(root, 'plain'));
    converter.madeDir('plain', false); // nothing was here
    fs.mkdirSync(path.join(root, 'replaced'));
    converter.madeDir('replaced', true); // this layer's file was here
    expect([opaque('later'), opaque('plain'), opaque('replaced')]).toEqual(['y', undefined, 'y']);
    // `.wh.x`, then `x/f`: the tree replaces the whiteout with a directory and tells the converter.
    convert(tarEntry({ name: '.wh.x' }));
    tree.ensureParents('x/f');
    expect(fs.lstatSync(path.join(root, 'x')).isDirectory()).toBe(true);
    expect(opaque('x')).toBe('y');
  });

  it.each([
    ['.wh.', ''],
    ['.wh..', '.'],
    ['d/.wh...', '..'],
  ])('refuses the whiteout %s, which names no entry', (name, shown) => {
    expect(() => convert(tarEntry({ name }))).toThrow(
      expect.objectContaining({ code: 'HOSTILE_LAYER', message: expect.stringContaining(`whiteout of ${JSON.stringify(shown)}`) }),
    );
  });

  it.each([
    ['character-device', '3', /entry "etc\/passwd": a character device 0:0 is overlayfs's whiteout: it would hide "etc\/passwd"/],
    ['block-device', '4', /entry "etc\/passwd": a block device 0:0 names no device/],
  ] as const)('refuses a %s 0:0 under an ordinary name, in either layout', (type, flag, message) => {
    for (const xattr of [OVERLAY_OPAQUE_XATTR, ROOTLESS_OPAQUE_XATTR]) {
      setUp(xattr);
      const e = tarEntry({ name: 'etc/passwd', type, flag });
      expect(() => convert(e)).toThrow(
        expect.objectContaining({
          code: 'HOSTILE_LAYER',
          message: expect.stringMatching(message),
          details: expect.objectContaining({ devmajor: 0, devminor: 0 }),
        }),
      );
    }
    expect(fs.readdirSync(root)).toEqual([]);
  });
});
