// Tests of applyLayer: tar entries -> overlay lower directory, containment, whiteouts, metadata.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer, DEFAULT_APPLY_LIMITS } from './apply.js';
import { nativeFs } from './native.js';
import { chunksOf, code, makeTar, padded, type Entry } from './tar.testkit.js';


/** A raw ustar header block, for tars tar-stream's packer cannot write (binary PAX values, odd names). */
function rawHeader(name: string | Buffer, typeflag: string, size: number, mode = 0o644, dev: readonly [number, number] = [0, 0]): Buffer {
  const b = Buffer.alloc(512);
  if (Buffer.isBuffer(name)) name.copy(b, 0, 0, 100);
  else b.write(name, 0, 100, 'utf8');
  b.write(`${mode.toString(8).padStart(7, '0')}\0`, 100);
  b.write('0000000\0', 108);
  b.write('0000000\0', 116);
  b.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  b.write(`${(1_600_000_000).toString(8).padStart(11, '0')}\0`, 136);
  b.write(typeflag, 156);
  b.write('ustar\x0000', 257, 'latin1');
  b.write(`${dev[0].toString(8).padStart(7, '0')}\0`, 329);
  b.write(`${dev[1].toString(8).padStart(7, '0')}\0`, 337);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}


function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len)), body]);
}



const isRoot = process.getuid?.() === 0;
const hasGnuTar = ((): boolean => {
  try {
    return execFileSync('tar', ['--version'], { encoding: 'utf8' }).includes('GNU tar');
  } catch {
    return false;
  }
})();
let sandbox: string;
let dest: string;

beforeEach(() => {
  sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-apply-'));
  dest = path.join(sandbox, 'fs');
  fs.mkdirSync(dest);
});

afterEach(() => {
  if (!isRoot) execFileSync('chmod', ['-R', 'u+w', sandbox]); // layers leave 0555 directories
  fs.rmSync(sandbox, { recursive: true, force: true });
});

/** Everything in the sandbox besides the snapshot dir: must stay empty. */
function outsideDest(): string[] {
  return fs.readdirSync(sandbox).filter((n) => n !== 'fs' && n !== 'outside' && n !== 'again');
}

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
    const tar = await makeTar([{ name: 'big', body: big }, { name: 'after', body: 'z' }]);
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
    const dir = await makeTar([{ name: 'd/', type: 'directory' }, { name: 'h', type: 'link', linkname: 'd' }]);
    expect(await code(applyLayer(chunksOf(dir), dest))).toBe('INVALID_LAYER');
  });

  it.skipIf(!isRoot)('creates device nodes and fifos', async () => {
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

describe('applyLayer: whiteouts', () => {
  const opaqueOf = (rel: string): string | undefined => nativeFs().lgetxattr(path.join(dest, rel), 'trusted.overlay.opaque')?.toString();

  it.skipIf(!isRoot)('turns .wh.NAME into a 0:0 character device', async () => {
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
  it.skipIf(!isRoot).each(kinds)('keeps a %s of its own layer that a later whiteout names, opaque when a directory', async (kind, entry, check) => {
    const children: Entry[] = kind === 'directory' ? [{ name: 'n/own-child', body: 'c' }] : [];
    const tar = await makeTar([entry, ...children, { name: '.wh.n' }, { ...entry, name: `sub/${entry.name}` }, ...children.map((c) => ({ ...c, name: `sub/${c.name}` })), { name: 'sub/.wh.n' }]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const rel of ['n', 'sub/n']) {
      check(rel);
      expect(opaqueOf(rel)).toBe(kind === 'directory' ? 'y' : undefined); // a non-directory hides the lower entry by itself
    }
    if (kind === 'directory') expect(fs.readdirSync(path.join(dest, 'n'))).toEqual(['own-child']);
    expect(stats.whiteouts).toBe(2);
  });

  it.skipIf(!isRoot).each(kinds)('replaces a whiteout with a later %s of its own layer, opaque when a directory', async (kind, entry, check) => {
    const tar = await makeTar([{ name: '.wh.n' }, entry, { name: 'sub/.wh.n' }, { ...entry, name: `sub/${entry.name}` }]);
    const stats = await applyLayer(chunksOf(tar), dest);
    for (const rel of ['n', 'sub/n']) {
      check(rel);
      expect(opaqueOf(rel)).toBe(kind === 'directory' ? 'y' : undefined);
    }
    expect(stats.whiteouts).toBe(2);
  });

  it.skipIf(!isRoot)('makes a directory opaque when a whiteout of its path came earlier in the layer, whatever came between', async () => {
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

  it.skipIf(!isRoot)('makes a directory opaque where the same layer had a whiteout or a non-directory before it', async () => {
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

  it.skipIf(!isRoot)('lists the parents it implies and the whiteouts it makes, for the layers below to settle', async () => {
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

  it.skipIf(!isRoot)('marks opaque directories with trusted.overlay.opaque=y and drops aufs metadata', async () => {
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

describe('applyLayer: hostile layers', () => {
  const hostile: Array<[string, Entry[]]> = [
    ['../evil', [{ name: '../evil', body: 'x' }]],
    ['a/../../evil', [{ name: 'a/../../evil', body: 'x' }]],
    ['a dir entry ../evil/', [{ name: '../evil/', type: 'directory' }]],
    ['a hardlink to ../../etc/passwd', [{ name: 'passwd', type: 'link', linkname: '../../etc/passwd' }]],
    ['a symlink escape: link -> outside, then link/evil', [{ name: 'link', type: 'symlink', linkname: 'OUTSIDE' }, { name: 'link/evil', body: 'x' }]],
    ['a relative symlink escape', [{ name: 'link', type: 'symlink', linkname: '../outside' }, { name: 'link/evil', body: 'x' }]],
    ['a path through a file', [{ name: 'f', body: 'x' }, { name: 'f/evil', body: 'x' }]],
    ['a symlink reached through a hardlink', [{ name: 'link', type: 'symlink', linkname: 'OUTSIDE' }, { name: 'h', type: 'link', linkname: 'link' }, { name: 'h/evil', body: 'x' }]],
    ['a whiteout of ..', [{ name: 'a/.wh...' }]],
  ];
  it.each(hostile)('rejects %s with HOSTILE_LAYER and writes nothing outside', async (_, entries) => {
    const outside = path.join(sandbox, 'outside');
    fs.mkdirSync(outside); // exists, so that following a link would succeed
    const tar = await makeTar(entries.map((e) => (e.linkname === 'OUTSIDE' ? { ...e, linkname: outside } : e)));
    expect(await code(applyLayer(chunksOf(tar), dest))).toBe('HOSTILE_LAYER');
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(outsideDest()).toEqual([]);
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
  const mtimeNs = (rel: string | Buffer): bigint => fs.lstatSync(Buffer.isBuffer(rel) ? Buffer.concat([Buffer.from(`${dest}/`), rel]) : path.join(dest, rel), { bigint: true }).mtimeNs;
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
      ...withPax([['mtime', '1600000000.1'], ['atime', '1600000000.100000001']], rawHeader('later', '0', 0)),
      ...withPax([['mtime', '1600000000.1'], ['atime', '1500000000.999999999']], rawHeader('earlier', '0', 0)),
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
    for (const bad of [[1.5, 0], [0, 1e9], [0, -1], [0, 0.5], [Number.NaN, 0], [2n ** 63n, 0]] as const) {
      expect(() => addon.lutimesNs(f, bad[0], bad[1], 0, 0)).toThrow(TypeError);
    }
    expect(() => addon.lutimesNs(path.join(dest, 'missing'), 0, 0, 0, 0)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});

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
    const tar = await makeTar([{ name: 'a', body: 'x'.repeat(2000) }, { name: 'b', body: 'b' }]);
    expect(await code(applyLayer(chunksOf(tar.subarray(0, 1500)), dest))).toBe('INVALID_LAYER');
    fs.rmSync(dest, { recursive: true });
    fs.mkdirSync(dest);
    const corrupt = Buffer.from(tar);
    corrupt.write('garbage', 2560); // the header of "b"
    expect(await code(applyLayer(chunksOf(corrupt), dest))).toBe('INVALID_LAYER');
  });

  it('does not treat a zero block inside a file as the end', async () => {
    const zeros = Buffer.alloc(4096);
    const tar = await makeTar([{ name: 'zeros', body: zeros }, { name: 'next', body: 'n' }]);
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

  it.skipIf(!isRoot)('reports a full filesystem as NO_SPACE', async (ctx) => {
    const small = path.join(sandbox, 'small');
    fs.mkdirSync(small);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { stdio: 'pipe' });
    } catch (e) {
      console.warn(`skipping NO_SPACE test: cannot mount tmpfs: ${(e as Error).message}`);
      ctx.skip(`cannot mount tmpfs: ${(e as Error).message}`);
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
  it.skipIf(!hasGnuTar).each(formats)('writes a %s sparse file from GNU tar sparse, with the same bytes', async (_, flags) => {
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
  });

  it('refuses a sparse map whose data does not match what the entry stores', async () => {
    const pax = Buffer.concat([paxRecord('GNU.sparse.size', Buffer.from('100')), paxRecord('GNU.sparse.numblocks', Buffer.from('1')), paxRecord('GNU.sparse.map', Buffer.from('10,5'))]);
    const tar = Buffer.concat([rawHeader('PaxHeaders/s', 'x', pax.length), padded(pax), rawHeader('s', '0', 3), padded(Buffer.from('abc')), Buffer.alloc(1024)]);
    expect(await code(applyLayer(chunksOf(tar), dest))).toBe('INVALID_LAYER');
  });
});

describe('applyLayer: parity with GNU tar', () => {
  it.skipIf(!hasGnuTar).each([['gnu'], ['pax'], ['ustar']])('extracts a --format=%s tree as GNU tar made it', async (format) => {
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
  });
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

  it.skipIf(!isRoot)('makes whiteouts, devices, xattrs and opaque markers under such names', async () => {
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
    const names = fs.readdirSync(at('r\xe9p'), { encoding: 'buffer' }).map((b) => b.toString('latin1')).sort();
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

describe('applyLayer: owners, limits and failure', () => {
  it.skipIf(!isRoot)('gives a whiteout the owner its entry names', async () => {
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
