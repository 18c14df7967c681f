// A table of hostile layers for applyLayer: each must fail as expected, write nothing outside the snapshot, and leave the snapshot empty.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isFastpullError } from '../errors.js';
import { applyLayer, type ApplyLimits } from './apply.js';
import { nativeFs } from './native.js';
import { chunksOf, padded } from './tar.testkit.js';
import { lacks, lacksRoot } from '../testing/needs.js';

const isRoot = process.getuid?.() === 0;

// ---- raw tar building: every field under the test's control, including ones no tar writer emits ----

interface Hdr {
  name: string | Buffer;
  /** The type flag character; default '0'. */
  flag?: string;
  size?: number;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: number;
  linkname?: string | Buffer;
  devmajor?: number;
  devminor?: number;
  /** Raw bytes for a numeric field (base-256 numbers, say), by field offset. */
  raw?: Record<number, Buffer>;
  /** Magic: 'ustar' (POSIX, the default) or 'gnu'. */
  magic?: 'ustar' | 'gnu';
}

const oct = (n: number, width: number): string => `${n.toString(8).padStart(width - 1, '0')}\0`;

function header(h: Hdr): Buffer {
  const b = Buffer.alloc(512);
  const name = Buffer.isBuffer(h.name) ? h.name : Buffer.from(h.name);
  if (name.length > 100) throw new Error(`test bug: name over 100 bytes: use longName or pax`);
  name.copy(b, 0);
  b.write(oct(h.mode ?? 0o644, 8), 100, 'latin1');
  b.write(oct(h.uid ?? 0, 8), 108, 'latin1');
  b.write(oct(h.gid ?? 0, 8), 116, 'latin1');
  b.write(oct(h.size ?? 0, 12), 124, 'latin1');
  b.write(oct(h.mtime ?? 1_600_000_000, 12), 136, 'latin1');
  b.write(h.flag ?? '0', 156, 'latin1');
  if (h.linkname !== undefined) (Buffer.isBuffer(h.linkname) ? h.linkname : Buffer.from(h.linkname)).copy(b, 157);
  if (h.magic === 'gnu') b.write('ustar  \0', 257, 'latin1');
  else b.write('ustar\x0000', 257, 'latin1');
  b.write(oct(h.devmajor ?? 0, 8), 329, 'latin1');
  b.write(oct(h.devminor ?? 0, 8), 337, 'latin1');
  for (const [at, bytes] of Object.entries(h.raw ?? {})) bytes.copy(b, Number(at));
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}


function entry(h: Hdr, body: string | Buffer = ''): Buffer {
  const data = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return Buffer.concat([header({ size: data.length, ...h }), padded(data)]);
}

function paxRecord(key: string, value: string | Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

/** A PAX header ('x', or 'g' for a global one) for the entry after it. */
function pax(records: Array<[string, string | Buffer]>, flag = 'x'): Buffer {
  const data = Buffer.concat(records.map(([k, v]) => paxRecord(k, v)));
  return Buffer.concat([header({ name: 'PaxHeaders/x', flag, size: data.length }), padded(data)]);
}

/** A GNU long name ('L') or long link name ('K') header, NUL-terminated as GNU tar writes it. */
function longName(name: string | Buffer, flag = 'L'): Buffer {
  const data = Buffer.concat([Buffer.isBuffer(name) ? name : Buffer.from(name), Buffer.from([0])]);
  return Buffer.concat([header({ name: '././@LongLink', flag, size: data.length, magic: 'gnu' }), padded(data)]);
}

const file = (name: string | Buffer, body = 'x', h: Partial<Hdr> = {}): Buffer => entry({ name, ...h }, body);
const dir = (name: string, h: Partial<Hdr> = {}): Buffer => entry({ name, flag: '5', mode: 0o755, ...h });
const symlink = (name: string, target: string): Buffer => entry({ name, flag: '2', linkname: target, mode: 0o777 });
const hardlink = (name: string, target: string | Buffer): Buffer => entry({ name, flag: '1', linkname: target });
const END = Buffer.alloc(1024);
const tarOf = (...parts: Buffer[]): Buffer => Buffer.concat([...parts, END]);

/** A base-256 numeric field of `width` bytes. */
function base256(n: bigint, width: number): Buffer {
  const b = Buffer.alloc(width);
  let x = n < 0n ? (1n << BigInt(width * 8)) + n : n;
  for (let i = width - 1; i >= 0; i--) {
    b[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  b[0]! |= 0x80;
  return b;
}

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


type Expect = 'HOSTILE_LAYER' | 'INVALID_LAYER' | 'ok';
interface Case {
  /** Builds the layer; `o` is the absolute path of the outside directory. */
  tar: (o: string) => Buffer;
  expect: Expect;
  /** Checks on the snapshot after a success. */
  check?: (snap: string, o: string) => void;
  limits?: Partial<ApplyLimits>;
  /** A fragment the error message must hold (the entry, the limit). */
  message?: RegExp;
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
    if (err !== undefined) throw err;
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

const hostile: Array<[string, Case]> = [
  // -- names that leave the root --
  ['a ".." file name', { tar: () => tarOf(file('../evil')), expect: 'HOSTILE_LAYER', message: /"\.\.\/evil"/ }],
  ['a ".." in the middle of a name', { tar: () => tarOf(file('a/../../evil')), expect: 'HOSTILE_LAYER' }],
  ['a ".." directory entry aimed at outside', { tar: () => tarOf(dir('../outside/new/')), expect: 'HOSTILE_LAYER' }],
  ['a ".." name hidden in a PAX path', { tar: () => tarOf(pax([['path', '../../outside/evil']]), file('innocent')), expect: 'HOSTILE_LAYER', message: /outside\/evil/ }],
  ['a ".." name hidden in a GNU long name', { tar: () => tarOf(longName(`${'d/'.repeat(60)}../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../outside/evil`), file('innocent', 'x', { magic: 'gnu' })), expect: 'HOSTILE_LAYER' }],
  ['a NUL in a PAX path (would alias "evil")', { tar: () => tarOf(file('evil'), pax([['path', 'evil\0/../../../outside/x']]), file('innocent')), expect: 'HOSTILE_LAYER', message: /NUL/ }],
  ['a NUL inside a GNU long name', { tar: () => tarOf(longName('a\0../../outside/evil'), file('innocent', 'x', { magic: 'gnu' })), expect: 'HOSTILE_LAYER' }],

  // -- writing through symlinks this layer made --
  ['a file under a symlink to outside (absolute)', { tar: (o) => tarOf(symlink('link', o), file('link/evil')), expect: 'HOSTILE_LAYER', message: /"link"/ }],
  ['a file under a symlink to ../outside (relative)', { tar: () => tarOf(symlink('link', '../../outside'), file('link/evil')), expect: 'HOSTILE_LAYER' }],
  ['a file under a symlink to /', { tar: (o) => tarOf(symlink('link', '/'), file(`link${o}/evil`.slice(0, 100))), expect: 'HOSTILE_LAYER' }],
  ['an overwrite of an outside file through a symlinked parent', { tar: (o) => tarOf(symlink('link', o), file('link/victim', 'pwned')), expect: 'HOSTILE_LAYER' }],
  ['a directory under a symlink', { tar: (o) => tarOf(symlink('link', o), dir('link/newdir/')), expect: 'HOSTILE_LAYER' }],
  ['a symlink under a symlink', { tar: (o) => tarOf(symlink('link', o), symlink('link/s', '/etc')), expect: 'HOSTILE_LAYER' }],
  ['a fifo under a symlink', { tar: (o) => tarOf(symlink('link', o), entry({ name: 'link/fifo', flag: '6' })), expect: 'HOSTILE_LAYER' }],
  ['a hardlink created under a symlink', { tar: (o) => tarOf(file('f'), symlink('link', o), hardlink('link/h', 'f')), expect: 'HOSTILE_LAYER' }],
  ['a chain of symlinks ending outside', { tar: (o) => tarOf(symlink('c', o), symlink('b', 'c'), symlink('a', 'b'), file('a/evil')), expect: 'HOSTILE_LAYER' }],
  ['a symlink loop', { tar: () => tarOf(symlink('a', 'b'), symlink('b', 'a'), file('a/evil')), expect: 'HOSTILE_LAYER' }],
  ['a directory replaced by a symlink, then written under', { tar: (o) => tarOf(dir('d/'), file('d/x'), symlink('d', o), file('d/evil')), expect: 'HOSTILE_LAYER' }],
  ['a nested directory replaced by a symlink, then its old child replaced', { tar: (o) => tarOf(dir('a/b/'), file('a/b/victim'), symlink('a/b', o), file('a/b/victim', 'pwned')), expect: 'HOSTILE_LAYER' }],
  ['a symlink reached through a hardlink', { tar: (o) => tarOf(symlink('link', o), hardlink('h', 'link'), file('h/evil')), expect: 'HOSTILE_LAYER' }],
  ['a path through a regular file', { tar: () => tarOf(file('f'), file('f/evil')), expect: 'HOSTILE_LAYER' }],

  // -- hardlinks --
  ['a hardlink to ../outside', { tar: () => tarOf(hardlink('h', '../../outside/victim')), expect: 'HOSTILE_LAYER' }],
  ['a hardlink through a symlink', { tar: (o) => tarOf(symlink('link', o), hardlink('h', 'link/victim')), expect: 'HOSTILE_LAYER', message: /goes through "link", a symlink/ }],
  ['a hardlink to an absolute outside path (resolved in the root: missing)', { tar: (o) => tarOf(hardlink('h', `${o}/victim`.slice(0, 100))), expect: 'INVALID_LAYER' }],
  ['a hardlink to a missing file', { tar: () => tarOf(hardlink('h', 'nope')), expect: 'INVALID_LAYER' }],
  ['a hardlink to a directory', { tar: () => tarOf(dir('d/'), hardlink('h', 'd')), expect: 'INVALID_LAYER' }],
  ['a hardlink whose target has a NUL', { tar: () => tarOf(file('f'), longName('f\0../../outside/victim', 'K'), hardlink('h', 'f')), expect: 'HOSTILE_LAYER' }],
  ['a hardlink to a file its own entry removes', { tar: () => tarOf(file('d/f'), hardlink('d', 'd/f')), expect: 'INVALID_LAYER' }],

  // -- whiteouts --
  ['a whiteout of "." at the top (.wh..)', { tar: () => tarOf(file('.wh..', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of "." in a directory (dir/.wh..)', { tar: () => tarOf(dir('dir/'), file('dir/.wh..', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of ".." (a/.wh...)', { tar: () => tarOf(file('a/.wh...', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of nothing (.wh.)', { tar: () => tarOf(file('.wh.', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout through a symlink (would replace an outside file)', { tar: (o) => tarOf(symlink('link', o), file('link/.wh.victim', '')), expect: 'HOSTILE_LAYER' }],
  ['an opaque marker through a symlink (would mark an outside dir)', { tar: (o) => tarOf(symlink('link', o), file('link/.wh..wh..opq', '')), expect: 'HOSTILE_LAYER' }],

  // -- devices and owners --
  ['a device major beyond 12 bits (4097:1 would become 1:1, /dev/mem)', { tar: () => tarOf(entry({ name: 'mem', flag: '3', devmajor: 4097, devminor: 1 })), expect: 'HOSTILE_LAYER', message: /4097:1/ }],
  ['a device minor beyond 20 bits', { tar: () => tarOf(entry({ name: 'blk', flag: '4', devmajor: 7, devminor: 0x100000 })), expect: 'HOSTILE_LAYER' }],
  ['a negative device major (base-256)', { tar: () => tarOf(entry({ name: 'neg', flag: '3', raw: { 329: base256(-1n, 8) } })), expect: 'HOSTILE_LAYER' }],
  ['a uid of 2^32-1 ("leave the owner unchanged")', { tar: () => tarOf(pax([['uid', '4294967295']]), file('f')), expect: 'HOSTILE_LAYER', message: /uid/ }],
  ['a negative gid', { tar: () => tarOf(pax([['gid', '-1']]), file('f')), expect: 'HOSTILE_LAYER' }],

  // -- overlay control xattrs --
  ['trusted.overlay.opaque smuggled as an xattr', { tar: () => tarOf(pax([['SCHILY.xattr.trusted.overlay.opaque', 'y']]), dir('d/')), expect: 'HOSTILE_LAYER', message: /trusted\.overlay\.opaque/ }],
  ['trusted.overlay.redirect smuggled as an xattr', { tar: () => tarOf(pax([['SCHILY.xattr.trusted.overlay.redirect', '/etc']]), dir('d/')), expect: 'HOSTILE_LAYER' }],
  ['user.overlay.origin smuggled as an xattr', { tar: () => tarOf(pax([['SCHILY.xattr.user.overlay.origin', 'x']]), file('f')), expect: 'HOSTILE_LAYER' }],

  // -- parser differentials and entry types --
  ['a header hidden in the "data" of a symlink (Go reads it as the next header)', {
    tar: () => tarOf(entry({ name: 's', flag: '2', linkname: 'target', size: 512 }, header({ name: '../evil', size: 0 })), file('innocent')),
    expect: 'HOSTILE_LAYER',
  }],
  ['a zero block followed by more entries', { tar: () => Buffer.concat([file('a'), Buffer.alloc(512), file('../evil'), END]), expect: 'INVALID_LAYER' }],
  ['an unknown entry type (V, a volume label)', { tar: () => tarOf(entry({ name: 'label', flag: 'V' })), expect: 'INVALID_LAYER', message: /"V"/ }],
  ['a GNU dumpdir entry (D)', { tar: () => tarOf(entry({ name: 'dump', flag: 'D' }, 'Yfile\0\0')), expect: 'INVALID_LAYER' }],
  ['a sparse map reaching past the file', {
    tar: () => tarOf(pax([['GNU.sparse.size', '10'], ['GNU.sparse.numblocks', '1'], ['GNU.sparse.map', '8,4']]), file('sparse', 'abcd')),
    expect: 'INVALID_LAYER',
  }],
  ['a bad header checksum', { tar: () => { const t = tarOf(file('a')); t[0] = 0x62; return t; }, expect: 'INVALID_LAYER' }],

  // -- resource limits --
  ['a path over maxPathBytes', { tar: () => tarOf(pax([['path', `${'n'.repeat(200)}/`.repeat(25)]]), file('x')), expect: 'HOSTILE_LAYER', message: /maxPathBytes/ }],
  ['a path over maxPathDepth', { tar: () => tarOf(pax([['path', `${'d/'.repeat(300)}f`]]), file('x')), expect: 'HOSTILE_LAYER', message: /maxPathDepth/ }],
  ['a symlink target over maxSymlinkBytes', { tar: () => tarOf(pax([['linkpath', 't'.repeat(5000)]]), symlink('s', 'x')), expect: 'HOSTILE_LAYER', message: /maxSymlinkBytes/ }],
  ['more entries than maxEntries', { tar: () => tarOf(file('a'), file('b'), file('c'), file('d')), limits: { maxEntries: 3 }, expect: 'HOSTILE_LAYER', message: /maxEntries/ }],
  ['an entry declaring 2 TiB (refused before reading)', { tar: () => tarOf(entry({ name: 'huge', raw: { 124: base256(2n ** 41n, 12) } })), expect: 'INVALID_LAYER', message: /maxTotalBytes/ }],
  ['a sparse file of 2 PiB in a few bytes', {
    tar: () => tarOf(pax([['GNU.sparse.size', String(2 ** 51)], ['GNU.sparse.numblocks', '1'], ['GNU.sparse.map', '0,1']]), file('sparse', 'a')),
    expect: 'INVALID_LAYER',
    message: /maxTotalBytes/,
  }],
  ['a PAX header over maxPaxHeaderBytes', { tar: () => tarOf(header({ name: 'PaxHeaders/x', flag: 'x', size: 2 ** 21 }), file('x')), expect: 'INVALID_LAYER', message: /maxPaxHeaderBytes/ }],
  ['a GNU long name over maxPaxHeaderBytes', { tar: () => tarOf(header({ name: '././@LongLink', flag: 'L', size: 2 ** 21, magic: 'gnu' }), file('x')), expect: 'INVALID_LAYER', message: /maxPaxHeaderBytes/ }],
  ['a stream longer than maxTotalBytes', { tar: () => tarOf(file('a', 'x'.repeat(3000))), limits: { maxTotalBytes: 2048 }, expect: 'INVALID_LAYER', message: /maxTotalBytes/ }],
  ['more extended attributes on one entry than maxXattrs', { tar: () => tarOf(pax(Array.from({ length: 129 }, (_, i) => [`SCHILY.xattr.user.a${i}`, 'v'] as [string, string])), file('f')), expect: 'HOSTILE_LAYER', message: /maxXattrs/ }],
  ['an extended attribute over maxXattrBytes (the kernel refuses it; a filesystem full of them is no disk-full)', { tar: () => tarOf(pax([['SCHILY.xattr.user.big', 'v'.repeat(200_000)]]), file('f')), expect: 'HOSTILE_LAYER', message: /maxXattrBytes/ }],
  // Whiteout markers are regular files: under any other type the name would mean two things.
  ['a directory named as a whiteout marker, with an entry of its own', { tar: () => tarOf(dir('.wh.x/'), file('.wh.x/c', 'c')), expect: 'HOSTILE_LAYER', message: /whiteout marker's name on a directory/ }],
  ['a symlink named as a whiteout marker', { tar: () => tarOf(symlink('d/.wh.x', '/etc')), expect: 'HOSTILE_LAYER', message: /on a symlink/ }],
  ['a fifo named as a whiteout marker', { tar: () => tarOf(entry({ name: '.wh.x', flag: '6' })), expect: 'HOSTILE_LAYER' }],
  ['a directory named as the opaque marker', { tar: () => tarOf(dir('d/'), dir('d/.wh..wh..opq/')), expect: 'HOSTILE_LAYER' }],
  ['the opaque marker at the layer root (would hide every layer below)', { tar: () => tarOf(file('.wh..wh..opq', ''), file('a')), expect: 'HOSTILE_LAYER', message: /root/ }],
];

const legal: Array<[string, Case]> = [
  ['a whiteout marker longer than NAME_MAX whose name fits it', {
    tar: () => tarOf(pax([['path', `.wh.${'n'.repeat(253)}`]]), file('x', '')),
    expect: 'ok',
    check: (s) => expect(isRoot ? fs.lstatSync(path.join(s, 'n'.repeat(253))).isCharacterDevice() : true).toBe(true),
  }],
  ['a whiteout marker that is a hardlink (aufs linked its markers to one inode)', {
    tar: () => tarOf(file('.wh..wh.plnk/1.1', ''), hardlink('.wh.gone', '.wh..wh.plnk/1.1')),
    expect: 'ok',
    check: (s) => expect(isRoot ? fs.lstatSync(path.join(s, 'gone')).isCharacterDevice() : true).toBe(true),
  }],
  ['an absolute name, created inside the root', {
    tar: (o) => tarOf(file(`${o}/victim`.slice(0, 100), 'inside')),
    expect: 'ok',
    check: (s, o) => expect(fs.readFileSync(path.join(s, `${o}/victim`.slice(0, 100)), 'utf8')).toBe('inside'),
  }],
  ['absolute and escaping symlink targets, kept verbatim', {
    tar: (o) => tarOf(symlink('abs', o), symlink('up', '../../../outside'), symlink('root', '/'), symlink('dotdot', '..')),
    expect: 'ok',
    check: (s, o) => {
      expect(fs.readlinkSync(path.join(s, 'abs'))).toBe(o);
      expect(fs.readlinkSync(path.join(s, 'up'))).toBe('../../../outside');
      expect(fs.readlinkSync(path.join(s, 'root'))).toBe('/');
      expect(fs.readlinkSync(path.join(s, 'dotdot'))).toBe('..');
    },
  }],
  ['names that only look like "..": "..foo", "...", "a..b"', {
    tar: () => tarOf(file('..foo', '1'), file('...', '2'), file('d/a..b', '3')),
    expect: 'ok',
    check: (s) => expect(['..foo', '...', 'd/a..b'].map((n) => fs.readFileSync(path.join(s, n), 'utf8'))).toEqual(['1', '2', '3']),
  }],
  ['".wh." inside a file\'s content and name middle', {
    tar: () => tarOf(file('notes.wh.txt', '.wh.secret\n.wh..wh..opq')),
    expect: 'ok',
    check: (s) => expect(fs.readFileSync(path.join(s, 'notes.wh.txt'), 'utf8')).toBe('.wh.secret\n.wh..wh..opq'),
  }],
  ['a symlink to outside replaced by a file (the link is removed, not written through)', {
    tar: (o) => tarOf(symlink('victim', `${o}/victim`), file('victim', 'mine', { mode: 0o777 })),
    expect: 'ok',
    check: (s) => expect(fs.lstatSync(path.join(s, 'victim')).isFile()).toBe(true),
  }],
  ['a directory with mode 0777 and new times replaced by a symlink to outside (no chmod or utimes through it)', {
    tar: (o) => tarOf(dir('d/', { mode: 0o777, mtime: 1_234_567_890 }), symlink('d', o)),
    expect: 'ok',
    check: (s, o) => expect(fs.readlinkSync(path.join(s, 'd'))).toBe(o),
  }],
  ['a symlink to outside, then a directory of the same name with mode 0777', {
    tar: (o) => tarOf(symlink('d', o), dir('d/', { mode: 0o777 })),
    expect: 'ok',
    check: (s) => expect(fs.lstatSync(path.join(s, 'd')).isDirectory()).toBe(true),
  }],
  ['a symlink to an outside file, then a fifo of the same name with mode 0666', {
    tar: (o) => tarOf(symlink('p', `${o}/victim`), entry({ name: 'p', flag: '6', mode: 0o666 })),
    expect: 'ok',
    check: (s) => {
      const st = fs.lstatSync(path.join(s, 'p'));
      expect(st.isFIFO()).toBe(true);
      expect(st.mode & 0o7777).toBe(0o666);
    },
  }],
  ['a symlink with its own times and owner (lutimes, lchown)', {
    tar: (o) => tarOf(entry({ name: 's', flag: '2', linkname: `${o}/victim`, mtime: 1_300_000_000, uid: 1234, gid: 1234 })),
    expect: 'ok',
    check: (s) => {
      const st = fs.lstatSync(path.join(s, 's'));
      expect(st.mtimeMs).toBe(1_300_000_000_000);
      if (isRoot) expect(st.uid).toBe(1234);
    },
  }],
  ['a hardlink to a symlink to outside (a second name for the link)', {
    tar: (o) => tarOf(symlink('s', o), hardlink('h', 's')),
    expect: 'ok',
    check: (s) => expect(fs.lstatSync(path.join(s, 'h')).ino).toBe(fs.lstatSync(path.join(s, 's')).ino),
  }],
  ['a symlink as the root entry is ignored', {
    tar: (o) => tarOf(symlink('./', o), file('evil', 'inside')),
    expect: 'ok',
    check: (s) => expect(fs.readFileSync(path.join(s, 'evil'), 'utf8')).toBe('inside'),
  }],
  ['names that are not UTF-8 stay apart (no replacement-character aliasing)', {
    tar: () => tarOf(file(Buffer.from([0x63, 0x61, 0x66, 0xe9]), 'latin1'), file(Buffer.from([0x63, 0x61, 0x66, 0xff]), 'other'), file('caf\uFFFD', 'replacement')),
    expect: 'ok',
    check: (s) => {
      const names = fs.readdirSync(s, { encoding: 'buffer' }).map((b) => b.toString('hex')).sort();
      expect(names).toEqual(['636166e9', '636166efbfbd', '636166ff']);
      expect(fs.readFileSync(Buffer.from(`${s}/caf\xe9`, 'latin1'), 'utf8')).toBe('latin1');
    },
  }],
  ['a PAX global header with a hostile path is not applied', {
    tar: () => tarOf(pax([['path', '../../outside/evil']], 'g'), pax([['mtime', '1600000000.25']]), file('ok', 'fine')),
    expect: 'ok',
    check: (s) => expect(fs.readFileSync(path.join(s, 'ok'), 'utf8')).toBe('fine'),
  }],
  ['paths and entries exactly at (lowered) limits', {
    tar: () => tarOf(file('a/b/c', 'deep'), symlink('s', '12345678'), file('x')),
    limits: { maxPathDepth: 3, maxPathBytes: 5, maxSymlinkBytes: 8, maxEntries: 3 },
    expect: 'ok',
    check: (s) => expect(fs.readFileSync(path.join(s, 'a/b/c'), 'utf8')).toBe('deep'),
  }],
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
  ['a character device 0:0 at an ordinary name (a forged whiteout)', { tar: () => tarOf(dir('etc/'), entry({ name: 'etc/passwd', flag: '3', mode: 0o644 })), expect: 'HOSTILE_LAYER', message: /entry "etc\/passwd": a character device 0:0 is overlayfs's whiteout/ }],
  ['a block device 0:0 at an ordinary name', { tar: () => tarOf(entry({ name: 'disk', flag: '4', mode: 0o600 })), expect: 'HOSTILE_LAYER', message: /entry "disk": a block device 0:0/ }],
  ['a character device 0:0 whose name comes from a PAX path', { tar: () => tarOf(pax([['path', 'usr/bin/sudo']]), entry({ name: 'innocent', flag: '3' })), expect: 'HOSTILE_LAYER', message: /"usr\/bin\/sudo"/ }],
  ['a character device 0:0 given in base-256 numbers', { tar: () => tarOf(entry({ name: 'f', flag: '3', raw: { 329: base256(0n, 8), 337: base256(0n, 8) } })), expect: 'HOSTILE_LAYER' }],
  ['a character device 0:0 after a file of its name in the same layer', { tar: () => tarOf(file('f', 'kept?'), entry({ name: 'f', flag: '3' })), expect: 'HOSTILE_LAYER' }],
];

/** Real device nodes: made as root, skipped with a warning without privilege (mknod's EPERM). */
const realDevices: Array<[string, Case]> = [
  ['a character device 1:3 (/dev/null)', {
    tar: () => tarOf(entry({ name: 'dev/null', flag: '3', mode: 0o666, devmajor: 1, devminor: 3 })),
    expect: 'ok',
    check: (s) => {
      const st = fs.lstatSync(path.join(s, 'dev/null'));
      expect([st.isCharacterDevice(), st.rdev, st.mode & 0o7777]).toEqual([true, 0x103, 0o666]);
    },
  }],
  ['a block device 7:0 and a character device 0:1 (not 0:0, so no whiteout)', {
    tar: () => tarOf(entry({ name: 'loop0', flag: '4', mode: 0o660, devmajor: 7 }), entry({ name: 'zero-one', flag: '3', devminor: 1 })),
    expect: 'ok',
    check: (s) => {
      expect([fs.lstatSync(path.join(s, 'loop0')).isBlockDevice(), fs.lstatSync(path.join(s, 'loop0')).rdev]).toEqual([true, 0x700]);
      expect([fs.lstatSync(path.join(s, 'zero-one')).isCharacterDevice(), fs.lstatSync(path.join(s, 'zero-one')).rdev]).toEqual([true, 1]);
    },
  }],
];

describe.each([
  ['rootful', false],
  ['rootless', true],
])('applyLayer: device nodes 0:0 in the %s layout', (_, rootless) => {
  it.each(deviceZero)('refuses %s', async (_, c) => {
    await run(c, rootless);
  });

  it.skipIf(lacks('root', isRoot || rootless ? undefined : 'not running as root, and no rootless layout'))('still writes a whiteout from ".wh.NAME" as a character device 0:0', async () => {
    await run({ tar: () => tarOf(file('.wh.gone', '')), expect: 'ok', check: (s) => expect([fs.lstatSync(path.join(s, 'gone')).isCharacterDevice(), fs.lstatSync(path.join(s, 'gone')).rdev]).toEqual([true, 0]) }, rootless);
  });

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
