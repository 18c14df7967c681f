// Tests of applyLayer: files, directories, links, special files, replacements, containment, owners and limits.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer, DEFAULT_APPLY_LIMITS } from './apply.js';
import { isRoot, makeSandbox, outsideDest, removeSandbox } from './apply.testkit.js';
import { chunksOf, code, makeTar, type Entry } from '../tar/tar.testkit.js';
import { lacksRoot } from '../../testing/needs.js';

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

describe('applyLayer: files, directories, metadata', () => {
  it('writes files and directories with their modes, owners and mtimes', async () => {
    const tar = await makeTar([
      { name: 'etc/', type: 'directory', mode: 0o750, uid: 1000, gid: 1001, mtime: new Date(1_500_000_000_000) },
      { name: 'etc/hosts', mode: 0o640, uid: 1000, gid: 1001, mtime: new Date(1_400_000_000_000), body: 'hello\n' },
      { name: 'bin/', type: 'directory', mode: 0o555, mtime: new Date(1_300_000_000_000) },
      { name: 'bin/su', mode: 0o4755, uid: 1000, gid: 0, body: 'su' },
      { name: 'bin/sg', mode: 0o2711, body: 'sg' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    expect(stats).toMatchObject({ entries: 5, files: 3, bytes: 10, whiteouts: 0 });

    expect(fs.readFileSync(path.join(dest, 'etc/hosts'), 'utf8')).toBe('hello\n');
    const hosts = fs.statSync(path.join(dest, 'etc/hosts'));
    expect(hosts.mode & 0o7777).toBe(0o640);
    expect(hosts.mtimeMs).toBe(1_400_000_000_000);
    const etc = fs.statSync(path.join(dest, 'etc'));
    expect(etc.mode & 0o7777).toBe(0o750);
    expect(etc.mtimeMs).toBe(1_500_000_000_000); // restored after its child was written
    const bin = fs.statSync(path.join(dest, 'bin'));
    expect(bin.mode & 0o7777).toBe(0o555);
    expect(bin.mtimeMs).toBe(1_300_000_000_000);
    expect(fs.statSync(path.join(dest, 'bin/sg')).mode & 0o7777).toBe(0o2711);
    const su = fs.statSync(path.join(dest, 'bin/su'));
    if (isRoot) {
      expect(su.mode & 0o7777).toBe(0o4755); // chmod after chown, which clears setuid
      expect([su.uid, su.gid]).toEqual([1000, 0]);
      expect([hosts.uid, hosts.gid]).toEqual([1000, 1001]);
      expect([etc.uid, etc.gid]).toEqual([1000, 1001]);
    }
  });

  it('creates missing parents as 0755 directories', async () => {
    const tar = await makeTar([{ name: './a/b/c/file', body: 'x' }]);
    await applyLayer(chunksOf(tar), dest);
    expect(fs.statSync(path.join(dest, 'a/b')).mode & 0o7777).toBe(0o755);
    expect(fs.readFileSync(path.join(dest, 'a/b/c/file'), 'utf8')).toBe('x');
  });

  it('strips leading / and ./ and ignores the root entry', async () => {
    const tar = await makeTar([
      { name: './', type: 'directory', mode: 0o700 },
      { name: '/abs', body: '1' },
      { name: './rel//x/./y', body: '2' },
    ]);
    const stats = await applyLayer(chunksOf(tar), dest);
    expect(fs.readFileSync(path.join(dest, 'abs'), 'utf8')).toBe('1');
    expect(fs.readFileSync(path.join(dest, 'rel/x/y'), 'utf8')).toBe('2');
    expect(fs.statSync(dest).mode & 0o7777).not.toBe(0o700);
    expect(stats.skipped).toBe(1);
  });

  it('keeps owners as the current user when sameOwner is false', async () => {
    const tar = await makeTar([{ name: 'f', uid: 1234, gid: 1234, mode: 0o4755, body: 'x' }]);
    await applyLayer(chunksOf(tar), dest, { sameOwner: false });
    const st = fs.statSync(path.join(dest, 'f'));
    expect(st.uid).toBe(process.getuid?.());
    expect(st.mode & 0o7777).toBe(0o4755);
  });

  it('streams a large file in chunks', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff;
    const tar = await makeTar([
      { name: 'big', body: big },
      { name: 'after', body: 'z' },
    ]);
    const stats = await applyLayer(chunksOf(tar, 64 * 1024), dest);
    expect(fs.readFileSync(path.join(dest, 'big')).equals(big)).toBe(true);
    expect(fs.readFileSync(path.join(dest, 'after'), 'utf8')).toBe('z');
    expect(stats.bytes).toBe(big.length + 1);
  });

  it('refuses a destination that is not empty', async () => {
    fs.writeFileSync(path.join(dest, 'old'), '');
    expect(await code(applyLayer(chunksOf(await makeTar([])), dest))).toBe('INVALID_ARGUMENT');
  });
});

describe('applyLayer: links and special files', () => {
  it('keeps symlink targets verbatim and never follows them', async () => {
    const tar = await makeTar([
      { name: 'passwd', type: 'symlink', linkname: '/etc/passwd', mtime: new Date(1_200_000_000_000) },
      { name: 'rel', type: 'symlink', linkname: '../../x' },
    ]);
    await applyLayer(chunksOf(tar), dest);
    const st = fs.lstatSync(path.join(dest, 'passwd'));
    expect(st.isSymbolicLink()).toBe(true);
    expect(st.mtimeMs).toBe(1_200_000_000_000); // lutimes: the link's own time
    expect(fs.readlinkSync(path.join(dest, 'passwd'))).toBe('/etc/passwd');
    expect(fs.readlinkSync(path.join(dest, 'rel'))).toBe('../../x');
  });

  it('makes hardlinks to the same inode, and to a symlink itself', async () => {
    const tar = await makeTar([
      { name: 'a/file', body: 'data' },
      { name: 'b/hard', type: 'link', linkname: './a/file' },
      { name: 'sym', type: 'symlink', linkname: '/etc/passwd' },
      { name: 'symhard', type: 'link', linkname: 'sym' },
    ]);
    await applyLayer(chunksOf(tar), dest);
    const a = fs.statSync(path.join(dest, 'a/file'));
    const b = fs.statSync(path.join(dest, 'b/hard'));
    expect(b.ino).toBe(a.ino);
    expect(a.nlink).toBe(2);
    const s = fs.lstatSync(path.join(dest, 'symhard'));
    expect(s.isSymbolicLink()).toBe(true);
    expect(s.ino).toBe(fs.lstatSync(path.join(dest, 'sym')).ino);
  });

  it('rejects hardlinks to what this layer did not create, or to a directory', async () => {
    const missing = await makeTar([{ name: 'h', type: 'link', linkname: 'nope' }]);
    expect(await code(applyLayer(chunksOf(missing), dest))).toBe('INVALID_LAYER');
    fs.rmSync(dest, { recursive: true });
    fs.mkdirSync(dest);
    const dir = await makeTar([
      { name: 'd/', type: 'directory' },
      { name: 'h', type: 'link', linkname: 'd' },
    ]);
    expect(await code(applyLayer(chunksOf(dir), dest))).toBe('INVALID_LAYER');
  });

  it.skipIf(lacksRoot())('creates device nodes and fifos', async () => {
    const tar = await makeTar([
      { name: 'dev/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 },
      { name: 'dev/loop9', type: 'block-device', devmajor: 7, devminor: 9, mode: 0o660 },
      { name: 'run/fifo', type: 'fifo', mode: 0o600 },
    ]);
    await applyLayer(chunksOf(tar), dest);
    const nul = fs.lstatSync(path.join(dest, 'dev/null'));
    expect(nul.isCharacterDevice()).toBe(true);
    expect(nul.rdev).toBe((1 << 8) | 3);
    expect(nul.mode & 0o7777).toBe(0o666);
    expect(fs.lstatSync(path.join(dest, 'dev/loop9')).isBlockDevice()).toBe(true);
    expect(fs.lstatSync(path.join(dest, 'run/fifo')).isFIFO()).toBe(true);
  });
});

describe('applyLayer: hostile layers', () => {
  const hostile: Array<[string, Entry[]]> = [
    ['../evil', [{ name: '../evil', body: 'x' }]],
    ['a/../../evil', [{ name: 'a/../../evil', body: 'x' }]],
    ['a dir entry ../evil/', [{ name: '../evil/', type: 'directory' }]],
    ['a hardlink to ../../etc/passwd', [{ name: 'passwd', type: 'link', linkname: '../../etc/passwd' }]],
    [
      'a symlink escape: link -> outside, then link/evil',
      [
        { name: 'link', type: 'symlink', linkname: 'OUTSIDE' },
        { name: 'link/evil', body: 'x' },
      ],
    ],
    [
      'a relative symlink escape',
      [
        { name: 'link', type: 'symlink', linkname: '../outside' },
        { name: 'link/evil', body: 'x' },
      ],
    ],
    [
      'a path through a file',
      [
        { name: 'f', body: 'x' },
        { name: 'f/evil', body: 'x' },
      ],
    ],
    [
      'a symlink reached through a hardlink',
      [
        { name: 'link', type: 'symlink', linkname: 'OUTSIDE' },
        { name: 'h', type: 'link', linkname: 'link' },
        { name: 'h/evil', body: 'x' },
      ],
    ],
    ['a whiteout of ..', [{ name: 'a/.wh...' }]],
  ];
  it.each(hostile)('rejects %s with HOSTILE_LAYER and writes nothing outside', async (_, entries) => {
    const outside = path.join(sandbox, 'outside');
    fs.mkdirSync(outside); // exists, so that following a link would succeed
    const tar = await makeTar(entries.map((e) => (e.linkname === 'OUTSIDE' ? { ...e, linkname: outside } : e)));
    expect(await code(applyLayer(chunksOf(tar), dest))).toBe('HOSTILE_LAYER');
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(outsideDest(sandbox)).toEqual([]);
  });

  it('names the entry in the error', async () => {
    const tar = await makeTar([{ name: 'a/../../evil', body: 'x' }]);
    await expect(applyLayer(chunksOf(tar), dest)).rejects.toThrow(/a\/\.\.\/\.\.\/evil/);
  });
});

describe('applyLayer: later entries replace earlier ones', () => {
  it('replaces files, directories and links, and merges directory over directory', async () => {
    const tar = await makeTar([
      { name: 'f', body: 'first' },
      { name: 'f', body: 'second' },
      { name: 'd/child', body: 'c' },
      { name: 'd', body: 'now a file' },
      { name: 'g', body: 'file' },
      { name: 'g/', type: 'directory', mode: 0o700 },
      { name: 'keep/a', body: 'a' },
      { name: 'keep/', type: 'directory', mode: 0o711 },
      { name: 'orig', body: 'old' },
      { name: 'hard', type: 'link', linkname: 'orig' },
      { name: 'orig', body: 'new' },
      { name: 's', type: 'symlink', linkname: '/one' },
      { name: 's', type: 'symlink', linkname: '/two' },
    ]);
    await applyLayer(chunksOf(tar), dest);
    expect(fs.readFileSync(path.join(dest, 'f'), 'utf8')).toBe('second');
    expect(fs.readFileSync(path.join(dest, 'd'), 'utf8')).toBe('now a file');
    expect(fs.statSync(path.join(dest, 'g')).isDirectory()).toBe(true);
    expect(fs.statSync(path.join(dest, 'g')).mode & 0o7777).toBe(0o700);
    expect(fs.readFileSync(path.join(dest, 'keep/a'), 'utf8')).toBe('a');
    expect(fs.statSync(path.join(dest, 'keep')).mode & 0o7777).toBe(0o711);
    expect(fs.readFileSync(path.join(dest, 'orig'), 'utf8')).toBe('new');
    expect(fs.readFileSync(path.join(dest, 'hard'), 'utf8')).toBe('old'); // the other name kept the old inode
    expect(fs.readlinkSync(path.join(dest, 's'))).toBe('/two');
  });
});

describe('applyLayer: owners, limits and failure', () => {
  it.skipIf(lacksRoot())('gives a whiteout the owner its entry names', async () => {
    const tar = await makeTar([{ name: 'd/.wh.gone', uid: 1234, gid: 5678 }]);
    await applyLayer(chunksOf(tar), dest);
    const st = fs.lstatSync(path.join(dest, 'd/gone'));
    expect(st.isCharacterDevice()).toBe(true);
    expect([st.uid, st.gid]).toEqual([1234, 5678]);
  });

  it('has documented defaults and takes overrides, refusing nonsense', async () => {
    expect(DEFAULT_APPLY_LIMITS).toEqual({
      maxPathBytes: 4096,
      maxPathDepth: 256,
      maxSymlinkBytes: 4096,
      maxEntries: 5_000_000,
      maxTotalBytes: 2 ** 40,
      maxPaxHeaderBytes: 2 ** 20,
      maxXattrs: 128,
      maxXattrBytes: 65_536,
    });
    const tar = await makeTar([{ name: 'a/b/c', body: 'x' }]);
    await expect(applyLayer(chunksOf(tar), dest, { limits: { maxPathDepth: 2 } })).rejects.toMatchObject({
      code: 'HOSTILE_LAYER',
      details: { limit: 'maxPathDepth', max: 2, entry: 'a/b/c' },
    });
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(await code(applyLayer(chunksOf(tar), dest, { limits: { maxEntries: bad } }))).toBe('INVALID_ARGUMENT');
    }
  });

  it('empties the snapshot when a layer fails part way', async () => {
    const tar = await makeTar([
      { name: 'a/b/c', body: 'x' },
      { name: 'd/', type: 'directory', mode: 0o555 },
      { name: 'd/e', body: 'y' },
      { name: 'link', type: 'symlink', linkname: '/' },
      { name: 'link/evil', body: 'z' },
    ]);
    expect(await code(applyLayer(chunksOf(tar), dest))).toBe('HOSTILE_LAYER');
    expect(fs.readdirSync(dest)).toEqual([]);
  });

  it('names the layer when told it', async () => {
    const tar = await makeTar([{ name: '../evil', body: 'x' }]);
    await expect(applyLayer(chunksOf(tar), dest, { layer: 'sha256:1234' })).rejects.toThrow(/^applying layer sha256:1234 to /);
  });
});
