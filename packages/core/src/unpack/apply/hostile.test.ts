// A table of hostile layers for applyLayer: each must fail as expected, write nothing outside the snapshot, and leave the snapshot empty.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { applyLayer } from './apply.js';
import { nativeFs } from '../../native/addon.js';
import { base256, type Case, dir, entry, file, hardlink, hostile, pax, symlink, tarOf } from './hostile.testkit.js';
import { chunksOf } from '../tar/tar.testkit.js';
import { lacks, lacksRoot, notHere } from '../../testing/needs.js';

const isRoot = process.getuid?.() === 0;

// ---- the sandbox: <tmp>/outside holds things an escape would touch; <tmp>/root/snap is the snapshot ----

let tmp: string;
let outside: string;
let snap: string;

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-hostile-'));
  outside = path.join(tmp, 'outside');
  fs.mkdirSync(path.join(outside, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(outside, 'victim'), 'original');
  fs.chmodSync(path.join(outside, 'victim'), 0o600);
  fs.symlinkSync('victim', path.join(outside, 'alias'));
  for (const p of [outside, path.join(outside, 'sub'), path.join(outside, 'victim')]) fs.utimesSync(p, 1_000_000_000, 1_000_000_000);
  snap = path.join(tmp, 'root', 'snap');
  fs.mkdirSync(snap, { recursive: true });
});

afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Everything under `tmp` but inside the snapshot: names, types, modes, owners, times, contents, link targets, overlay xattrs. */
function world(): Map<string, string> {
  const out = new Map<string, string>();
  const visit = (p: string): void => {
    if (p === snap) return;
    const st = fs.lstatSync(p);
    let what = `${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.rdev} ${st.mtimeMs} ${st.nlink}`;
    if (st.isFile()) what += ` ${crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')}`;
    if (st.isSymbolicLink()) what += ` -> ${fs.readlinkSync(p)}`;
    if (st.isDirectory() && isRoot) what += ` opaque=${String(nativeFs().lgetxattr(p, 'trusted.overlay.opaque'))}`;
    out.set(path.relative(tmp, p) || '.', what);
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) visit(path.join(p, n));
  };
  visit(tmp);
  return out;
}

async function run(c: Case, rootless?: boolean): Promise<void> {
  const before = world();
  const tar = c.tar(outside);
  let err: unknown;
  try {
    await applyLayer(chunksOf(tar), snap, { ...(c.limits ? { limits: c.limits } : {}), ...(rootless === undefined ? {} : { rootless }) });
  } catch (e) {
    err = e;
  }
  if (c.expect === 'ok') {
    if (err !== undefined) throw err as unknown;
    c.check?.(snap, outside);
  } else {
    expect(err, 'the layer was applied').toBeDefined();
    if (!isFastpullError(err)) throw err;
    expect(`${err.code}: ${err.message}`).toMatch(new RegExp(`^${c.expect}: `));
    expect(err.message).toMatch(/^applying layer to /);
    if (c.message) expect(err.message).toMatch(c.message);
    expect(fs.readdirSync(snap), 'a failed apply leaves the snapshot empty').toEqual([]);
  }
  expect(world()).toEqual(before);
}

const legal: Array<[string, Case]> = [
  [
    'a whiteout marker longer than NAME_MAX whose name fits it',
    {
      tar: () => tarOf(pax([['path', `.wh.${'n'.repeat(253)}`]]), file('x', '')),
      expect: 'ok',
      check: (s) => expect(isRoot ? fs.lstatSync(path.join(s, 'n'.repeat(253))).isCharacterDevice() : true).toBe(true),
    },
  ],
  [
    'a whiteout marker that is a hardlink (aufs linked its markers to one inode)',
    {
      tar: () => tarOf(file('.wh..wh.plnk/1.1', ''), hardlink('.wh.gone', '.wh..wh.plnk/1.1')),
      expect: 'ok',
      check: (s) => expect(isRoot ? fs.lstatSync(path.join(s, 'gone')).isCharacterDevice() : true).toBe(true),
    },
  ],
  [
    'an absolute name, created inside the root',
    {
      tar: (o) => tarOf(file(`${o}/victim`.slice(0, 100), 'inside')),
      expect: 'ok',
      check: (s, o) => expect(fs.readFileSync(path.join(s, `${o}/victim`.slice(0, 100)), 'utf8')).toBe('inside'),
    },
  ],
  [
    'absolute and escaping symlink targets, kept verbatim',
    {
      tar: (o) => tarOf(symlink('abs', o), symlink('up', '../../../outside'), symlink('root', '/'), symlink('dotdot', '..')),
      expect: 'ok',
      check: (s, o) => {
        expect(fs.readlinkSync(path.join(s, 'abs'))).toBe(o);
        expect(fs.readlinkSync(path.join(s, 'up'))).toBe('../../../outside');
        expect(fs.readlinkSync(path.join(s, 'root'))).toBe('/');
        expect(fs.readlinkSync(path.join(s, 'dotdot'))).toBe('..');
      },
    },
  ],
  [
    'names that only look like "..": "..foo", "...", "a..b"',
    {
      tar: () => tarOf(file('..foo', '1'), file('...', '2'), file('d/a..b', '3')),
      expect: 'ok',
      check: (s) => expect(['..foo', '...', 'd/a..b'].map((n) => fs.readFileSync(path.join(s, n), 'utf8'))).toEqual(['1', '2', '3']),
    },
  ],
  [
    '".wh." inside a file\'s content and name middle',
    {
      tar: () => tarOf(file('notes.wh.txt', '.wh.secret\n.wh..wh..opq')),
      expect: 'ok',
      check: (s) => expect(fs.readFileSync(path.join(s, 'notes.wh.txt'), 'utf8')).toBe('.wh.secret\n.wh..wh..opq'),
    },
  ],
  [
    'a symlink to outside replaced by a file (the link is removed, not written through)',
    {
      tar: (o) => tarOf(symlink('victim', `${o}/victim`), file('victim', 'mine', { mode: 0o777 })),
      expect: 'ok',
      check: (s) => expect(fs.lstatSync(path.join(s, 'victim')).isFile()).toBe(true),
    },
  ],
  [
    'a directory with mode 0777 and new times replaced by a symlink to outside (no chmod or utimes through it)',
    {
      tar: (o) => tarOf(dir('d/', { mode: 0o777, mtime: 1_234_567_890 }), symlink('d', o)),
      expect: 'ok',
      check: (s, o) => expect(fs.readlinkSync(path.join(s, 'd'))).toBe(o),
    },
  ],
  [
    'a symlink to outside, then a directory of the same name with mode 0777',
    {
      tar: (o) => tarOf(symlink('d', o), dir('d/', { mode: 0o777 })),
      expect: 'ok',
      check: (s) => expect(fs.lstatSync(path.join(s, 'd')).isDirectory()).toBe(true),
    },
  ],
  [
    'a symlink to an outside file, then a fifo of the same name with mode 0666',
    {
      tar: (o) => tarOf(symlink('p', `${o}/victim`), entry({ name: 'p', flag: '6', mode: 0o666 })),
      expect: 'ok',
      check: (s) => {
        const st = fs.lstatSync(path.join(s, 'p'));
        expect(st.isFIFO()).toBe(true);
        expect(st.mode & 0o7777).toBe(0o666);
      },
    },
  ],
  [
    'a symlink with its own times and owner (lutimes, lchown)',
    {
      tar: (o) => tarOf(entry({ name: 's', flag: '2', linkname: `${o}/victim`, mtime: 1_300_000_000, uid: 1234, gid: 1234 })),
      expect: 'ok',
      check: (s) => {
        const st = fs.lstatSync(path.join(s, 's'));
        expect(st.mtimeMs).toBe(1_300_000_000_000);
        if (isRoot) expect(st.uid).toBe(1234);
      },
    },
  ],
  [
    'a hardlink to a symlink to outside (a second name for the link)',
    {
      tar: (o) => tarOf(symlink('s', o), hardlink('h', 's')),
      expect: 'ok',
      check: (s) => expect(fs.lstatSync(path.join(s, 'h')).ino).toBe(fs.lstatSync(path.join(s, 's')).ino),
    },
  ],
  [
    'a symlink as the root entry is ignored',
    {
      tar: (o) => tarOf(symlink('./', o), file('evil', 'inside')),
      expect: 'ok',
      check: (s) => expect(fs.readFileSync(path.join(s, 'evil'), 'utf8')).toBe('inside'),
    },
  ],
  [
    'names that are not UTF-8 stay apart (no replacement-character aliasing)',
    {
      tar: () =>
        tarOf(file(Buffer.from([0x63, 0x61, 0x66, 0xe9]), 'latin1'), file(Buffer.from([0x63, 0x61, 0x66, 0xff]), 'other'), file('caf\uFFFD', 'replacement')),
      expect: 'ok',
      check: (s) => {
        const names = fs
          .readdirSync(s, { encoding: 'buffer' })
          .map((b) => b.toString('hex'))
          .sort();
        expect(names).toEqual(['636166e9', '636166efbfbd', '636166ff']);
        expect(fs.readFileSync(Buffer.from(`${s}/caf\xe9`, 'latin1'), 'utf8')).toBe('latin1');
      },
    },
  ],
  [
    'a PAX global header with a hostile path is not applied',
    {
      tar: () => tarOf(pax([['path', '../../outside/evil']], 'g'), pax([['mtime', '1600000000.25']]), file('ok', 'fine')),
      expect: 'ok',
      check: (s) => expect(fs.readFileSync(path.join(s, 'ok'), 'utf8')).toBe('fine'),
    },
  ],
  [
    'paths and entries exactly at (lowered) limits',
    {
      tar: () => tarOf(file('a/b/c', 'deep'), symlink('s', '12345678'), file('x')),
      limits: { maxPathDepth: 3, maxPathBytes: 5, maxSymlinkBytes: 8, maxEntries: 3 },
      expect: 'ok',
      check: (s) => expect(fs.readFileSync(path.join(s, 'a/b/c'), 'utf8')).toBe('deep'),
    },
  ],
];

describe('applyLayer: hostile layers', () => {
  it('has at least thirty distinct attacks', () => {
    expect(new Set(hostile.map(([n]) => n)).size).toBe(hostile.length);
    expect(hostile.length).toBeGreaterThanOrEqual(30);
  });

  it.each(hostile)('refuses %s', async (_, c) => {
    await run(c);
  });
});

describe('applyLayer: layers that look hostile but are legal', () => {
  it.each(legal)('applies %s, touching nothing outside', async (_, c) => {
    await run(c);
  });
});

// overlayfs reads a character device 0:0 as a whiteout wherever it lies: written under an ordinary
// name it would delete that name of the layers below, which the OCI spec expresses only as `.wh.NAME`.
const deviceZero: Array<[string, Case]> = [
  [
    'a character device 0:0 at an ordinary name (a forged whiteout)',
    {
      tar: () => tarOf(dir('etc/'), entry({ name: 'etc/passwd', flag: '3', mode: 0o644 })),
      expect: 'HOSTILE_LAYER',
      message: /entry "etc\/passwd": a character device 0:0 is overlayfs's whiteout/,
    },
  ],
  [
    'a block device 0:0 at an ordinary name',
    { tar: () => tarOf(entry({ name: 'disk', flag: '4', mode: 0o600 })), expect: 'HOSTILE_LAYER', message: /entry "disk": a block device 0:0/ },
  ],
  [
    'a character device 0:0 whose name comes from a PAX path',
    { tar: () => tarOf(pax([['path', 'usr/bin/sudo']]), entry({ name: 'innocent', flag: '3' })), expect: 'HOSTILE_LAYER', message: /"usr\/bin\/sudo"/ },
  ],
  [
    'a character device 0:0 given in base-256 numbers',
    { tar: () => tarOf(entry({ name: 'f', flag: '3', raw: { 329: base256(0n, 8), 337: base256(0n, 8) } })), expect: 'HOSTILE_LAYER' },
  ],
  [
    'a character device 0:0 after a file of its name in the same layer',
    { tar: () => tarOf(file('f', 'kept?'), entry({ name: 'f', flag: '3' })), expect: 'HOSTILE_LAYER' },
  ],
];

/** Real device nodes: made as root, skipped with a warning without privilege (mknod's EPERM). */
const realDevices: Array<[string, Case]> = [
  [
    'a character device 1:3 (/dev/null)',
    {
      tar: () => tarOf(entry({ name: 'dev/null', flag: '3', mode: 0o666, devmajor: 1, devminor: 3 })),
      expect: 'ok',
      check: (s) => {
        const st = fs.lstatSync(path.join(s, 'dev/null'));
        expect([st.isCharacterDevice(), st.rdev, st.mode & 0o7777]).toEqual([true, 0x103, 0o666]);
      },
    },
  ],
  [
    'a block device 7:0 and a character device 0:1 (not 0:0, so no whiteout)',
    {
      tar: () => tarOf(entry({ name: 'loop0', flag: '4', mode: 0o660, devmajor: 7 }), entry({ name: 'zero-one', flag: '3', devminor: 1 })),
      expect: 'ok',
      check: (s) => {
        expect([fs.lstatSync(path.join(s, 'loop0')).isBlockDevice(), fs.lstatSync(path.join(s, 'loop0')).rdev]).toEqual([true, 0x700]);
        expect([fs.lstatSync(path.join(s, 'zero-one')).isCharacterDevice(), fs.lstatSync(path.join(s, 'zero-one')).rdev]).toEqual([true, 1]);
      },
    },
  ],
];

describe.each([
  ['rootful', false],
  ['rootless', true],
])('applyLayer: device nodes 0:0 in the %s layout', (_, rootless) => {
  it.each(deviceZero)('refuses %s', async (_, c) => {
    await run(c, rootless);
  });

  it.skipIf(lacks('root', isRoot || rootless ? undefined : 'not running as root, and no rootless layout'))(
    'still writes a whiteout from ".wh.NAME" as a character device 0:0',
    async () => {
      await run(
        {
          tar: () => tarOf(file('.wh.gone', '')),
          expect: 'ok',
          check: (s) => expect([fs.lstatSync(path.join(s, 'gone')).isCharacterDevice(), fs.lstatSync(path.join(s, 'gone')).rdev]).toEqual([true, 0]),
        },
        rootless,
      );
    },
  );

  it.skipIf(lacksRoot()).each(realDevices)('applies %s as root', async (_, c) => {
    await run(c, rootless);
  });
});

describe('applyLayer: errors name the layer and the entry', () => {
  it('puts the layer, the entry and its offset in the error', async () => {
    const tar = tarOf(file('fine'), symlink('link', outside), file('link/evil'));
    const err = await applyLayer(chunksOf(tar), snap, { layer: 'sha256:abc' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HOSTILE_LAYER', details: { entry: 'link/evil', offset: 1536 } });
    expect((err as Error).message).toMatch(/^applying layer sha256:abc to .*: entry "link\/evil": parent "link" of "link\/evil" is a symlink/);
  });
});

describe('applyLayer: a layer legal as a tar that the snapshot filesystem cannot hold', () => {
  const fsType = (): string => execFileSync('stat', ['-f', '-c', '%T', os.tmpdir()], { encoding: 'utf8' }).trim();
  it.skipIf(notHere(['ext2/ext3', 'ext4'].includes(fsType()) ? undefined : `the temporary directory is on ${fsType()}, which has no small limit on links`))(
    'more hard links to one file than ext4 allows: INVALID_LAYER naming EMLINK, not INTERNAL',
    async () => {
      const parts = [file('f', 'x')];
      for (let i = 0; i < 65_010; i++) parts.push(hardlink(`l${i}`, 'f'));
      const err = await applyLayer(chunksOf(tarOf(...parts)), snap).catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: 'INVALID_LAYER',
        message: expect.stringMatching(/hardlink target "f" has as many names as the snapshot's filesystem allows \(EMLINK\)/),
      });
      expect(fs.readdirSync(snap), 'a failed apply leaves the snapshot empty').toEqual([]);
    },
    120_000,
  );
});
