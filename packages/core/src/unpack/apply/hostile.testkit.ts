// The table of hostile layers for applyLayer, and the raw tar writer it is built with: every field
// under the caller's control, including ones no tar writer emits. unpack/hostile.test.ts applies each
// to a snapshot directory; test/pull-hostile.test.ts pulls each, as a layer, from a registry.
import type { ApplyLimits } from './apply.js';
import { padded } from '../tar/tar.testkit.js';

// ---- raw tar building: every field under the test's control, including ones no tar writer emits ----

export interface Hdr {
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

export function header(h: Hdr): Buffer {
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

export function entry(h: Hdr, body: string | Buffer = ''): Buffer {
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
export function pax(records: Array<[string, string | Buffer]>, flag = 'x'): Buffer {
  const data = Buffer.concat(records.map(([k, v]) => paxRecord(k, v)));
  return Buffer.concat([header({ name: 'PaxHeaders/x', flag, size: data.length }), padded(data)]);
}

/** A GNU long name ('L') or long link name ('K') header, NUL-terminated as GNU tar writes it. */
export function longName(name: string | Buffer, flag = 'L'): Buffer {
  const data = Buffer.concat([Buffer.isBuffer(name) ? name : Buffer.from(name), Buffer.from([0])]);
  return Buffer.concat([header({ name: '././@LongLink', flag, size: data.length, magic: 'gnu' }), padded(data)]);
}

export const file = (name: string | Buffer, body = 'x', h: Partial<Hdr> = {}): Buffer => entry({ name, ...h }, body);
export const dir = (name: string, h: Partial<Hdr> = {}): Buffer => entry({ name, flag: '5', mode: 0o755, ...h });
export const symlink = (name: string, target: string): Buffer => entry({ name, flag: '2', linkname: target, mode: 0o777 });
export const hardlink = (name: string, target: string | Buffer): Buffer => entry({ name, flag: '1', linkname: target });
export const END = Buffer.alloc(1024);
export const tarOf = (...parts: Buffer[]): Buffer => Buffer.concat([...parts, END]);

/** A base-256 numeric field of `width` bytes. */
export function base256(n: bigint, width: number): Buffer {
  const b = Buffer.alloc(width);
  let x = n < 0n ? (1n << BigInt(width * 8)) + n : n;
  for (let i = width - 1; i >= 0; i--) {
    b[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  b[0]! |= 0x80;
  return b;
}

export type Expect = 'HOSTILE_LAYER' | 'INVALID_LAYER' | 'ok';
export interface Case {
  /** Builds the layer; `o` is the absolute path of the outside directory. */
  tar: (o: string) => Buffer;
  expect: Expect;
  /** Checks on the snapshot after a success. */
  check?: (snap: string, o: string) => void;
  limits?: Partial<ApplyLimits>;
  /** A fragment the error message must hold (the entry, the limit). */
  message?: RegExp;
}

/** Layers applyLayer must refuse, each with the code it must refuse it with. */
export const hostile: Array<[string, Case]> = [
  // -- names that leave the root --
  ['a ".." file name', { tar: () => tarOf(file('../evil')), expect: 'HOSTILE_LAYER', message: /"\.\.\/evil"/ }],
  ['a ".." in the middle of a name', { tar: () => tarOf(file('a/../../evil')), expect: 'HOSTILE_LAYER' }],
  ['a ".." directory entry aimed at outside', { tar: () => tarOf(dir('../outside/new/')), expect: 'HOSTILE_LAYER' }],
  [
    'a ".." name hidden in a PAX path',
    { tar: () => tarOf(pax([['path', '../../outside/evil']]), file('innocent')), expect: 'HOSTILE_LAYER', message: /outside\/evil/ },
  ],
  [
    'a ".." name hidden in a GNU long name',
    {
      tar: () =>
        tarOf(
          longName(
            `${'d/'.repeat(60)}../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../outside/evil`,
          ),
          file('innocent', 'x', { magic: 'gnu' }),
        ),
      expect: 'HOSTILE_LAYER',
    },
  ],
  [
    'a NUL in a PAX path (would alias "evil")',
    { tar: () => tarOf(file('evil'), pax([['path', 'evil\0/../../../outside/x']]), file('innocent')), expect: 'HOSTILE_LAYER', message: /NUL/ },
  ],
  ['a NUL inside a GNU long name', { tar: () => tarOf(longName('a\0../../outside/evil'), file('innocent', 'x', { magic: 'gnu' })), expect: 'HOSTILE_LAYER' }],

  // -- writing through symlinks this layer made --
  ['a file under a symlink to outside (absolute)', { tar: (o) => tarOf(symlink('link', o), file('link/evil')), expect: 'HOSTILE_LAYER', message: /"link"/ }],
  ['a file under a symlink to ../outside (relative)', { tar: () => tarOf(symlink('link', '../../outside'), file('link/evil')), expect: 'HOSTILE_LAYER' }],
  ['a file under a symlink to /', { tar: (o) => tarOf(symlink('link', '/'), file(`link${o}/evil`.slice(0, 100))), expect: 'HOSTILE_LAYER' }],
  [
    'an overwrite of an outside file through a symlinked parent',
    { tar: (o) => tarOf(symlink('link', o), file('link/victim', 'pwned')), expect: 'HOSTILE_LAYER' },
  ],
  ['a directory under a symlink', { tar: (o) => tarOf(symlink('link', o), dir('link/newdir/')), expect: 'HOSTILE_LAYER' }],
  ['a symlink under a symlink', { tar: (o) => tarOf(symlink('link', o), symlink('link/s', '/etc')), expect: 'HOSTILE_LAYER' }],
  ['a fifo under a symlink', { tar: (o) => tarOf(symlink('link', o), entry({ name: 'link/fifo', flag: '6' })), expect: 'HOSTILE_LAYER' }],
  ['a hardlink created under a symlink', { tar: (o) => tarOf(file('f'), symlink('link', o), hardlink('link/h', 'f')), expect: 'HOSTILE_LAYER' }],
  ['a chain of symlinks ending outside', { tar: (o) => tarOf(symlink('c', o), symlink('b', 'c'), symlink('a', 'b'), file('a/evil')), expect: 'HOSTILE_LAYER' }],
  ['a symlink loop', { tar: () => tarOf(symlink('a', 'b'), symlink('b', 'a'), file('a/evil')), expect: 'HOSTILE_LAYER' }],
  [
    'a directory replaced by a symlink, then written under',
    { tar: (o) => tarOf(dir('d/'), file('d/x'), symlink('d', o), file('d/evil')), expect: 'HOSTILE_LAYER' },
  ],
  [
    'a nested directory replaced by a symlink, then its old child replaced',
    { tar: (o) => tarOf(dir('a/b/'), file('a/b/victim'), symlink('a/b', o), file('a/b/victim', 'pwned')), expect: 'HOSTILE_LAYER' },
  ],
  ['a symlink reached through a hardlink', { tar: (o) => tarOf(symlink('link', o), hardlink('h', 'link'), file('h/evil')), expect: 'HOSTILE_LAYER' }],
  ['a path through a regular file', { tar: () => tarOf(file('f'), file('f/evil')), expect: 'HOSTILE_LAYER' }],

  // -- hardlinks --
  ['a hardlink to ../outside', { tar: () => tarOf(hardlink('h', '../../outside/victim')), expect: 'HOSTILE_LAYER' }],
  [
    'a hardlink through a symlink',
    { tar: (o) => tarOf(symlink('link', o), hardlink('h', 'link/victim')), expect: 'HOSTILE_LAYER', message: /goes through "link", a symlink/ },
  ],
  [
    'a hardlink to an absolute outside path (resolved in the root: missing)',
    { tar: (o) => tarOf(hardlink('h', `${o}/victim`.slice(0, 100))), expect: 'INVALID_LAYER' },
  ],
  ['a hardlink to a missing file', { tar: () => tarOf(hardlink('h', 'nope')), expect: 'INVALID_LAYER' }],
  ['a hardlink to a directory', { tar: () => tarOf(dir('d/'), hardlink('h', 'd')), expect: 'INVALID_LAYER' }],
  ['a hardlink whose target has a NUL', { tar: () => tarOf(file('f'), longName('f\0../../outside/victim', 'K'), hardlink('h', 'f')), expect: 'HOSTILE_LAYER' }],
  ['a hardlink to a file its own entry removes', { tar: () => tarOf(file('d/f'), hardlink('d', 'd/f')), expect: 'INVALID_LAYER' }],

  // -- whiteouts --
  ['a whiteout of "." at the top (.wh..)', { tar: () => tarOf(file('.wh..', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of "." in a directory (dir/.wh..)', { tar: () => tarOf(dir('dir/'), file('dir/.wh..', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of ".." (a/.wh...)', { tar: () => tarOf(file('a/.wh...', '')), expect: 'HOSTILE_LAYER' }],
  ['a whiteout of nothing (.wh.)', { tar: () => tarOf(file('.wh.', '')), expect: 'HOSTILE_LAYER' }],
  [
    'a whiteout through a symlink (would replace an outside file)',
    { tar: (o) => tarOf(symlink('link', o), file('link/.wh.victim', '')), expect: 'HOSTILE_LAYER' },
  ],
  [
    'an opaque marker through a symlink (would mark an outside dir)',
    { tar: (o) => tarOf(symlink('link', o), file('link/.wh..wh..opq', '')), expect: 'HOSTILE_LAYER' },
  ],

  // -- devices and owners --
  [
    'a device major beyond 12 bits (4097:1 would become 1:1, /dev/mem)',
    { tar: () => tarOf(entry({ name: 'mem', flag: '3', devmajor: 4097, devminor: 1 })), expect: 'HOSTILE_LAYER', message: /4097:1/ },
  ],
  ['a device minor beyond 20 bits', { tar: () => tarOf(entry({ name: 'blk', flag: '4', devmajor: 7, devminor: 0x100000 })), expect: 'HOSTILE_LAYER' }],
  ['a negative device major (base-256)', { tar: () => tarOf(entry({ name: 'neg', flag: '3', raw: { 329: base256(-1n, 8) } })), expect: 'HOSTILE_LAYER' }],
  ['a uid of 2^32-1 ("leave the owner unchanged")', { tar: () => tarOf(pax([['uid', '4294967295']]), file('f')), expect: 'HOSTILE_LAYER', message: /uid/ }],
  ['a negative gid', { tar: () => tarOf(pax([['gid', '-1']]), file('f')), expect: 'HOSTILE_LAYER' }],

  // -- overlay control xattrs --
  [
    'trusted.overlay.opaque smuggled as an xattr',
    { tar: () => tarOf(pax([['SCHILY.xattr.trusted.overlay.opaque', 'y']]), dir('d/')), expect: 'HOSTILE_LAYER', message: /trusted\.overlay\.opaque/ },
  ],
  [
    'trusted.overlay.redirect smuggled as an xattr',
    { tar: () => tarOf(pax([['SCHILY.xattr.trusted.overlay.redirect', '/etc']]), dir('d/')), expect: 'HOSTILE_LAYER' },
  ],
  ['user.overlay.origin smuggled as an xattr', { tar: () => tarOf(pax([['SCHILY.xattr.user.overlay.origin', 'x']]), file('f')), expect: 'HOSTILE_LAYER' }],

  // -- parser differentials and entry types --
  [
    'a header hidden in the "data" of a symlink (Go reads it as the next header)',
    {
      tar: () => tarOf(entry({ name: 's', flag: '2', linkname: 'target', size: 512 }, header({ name: '../evil', size: 0 })), file('innocent')),
      expect: 'HOSTILE_LAYER',
    },
  ],
  ['a zero block followed by more entries', { tar: () => Buffer.concat([file('a'), Buffer.alloc(512), file('../evil'), END]), expect: 'INVALID_LAYER' }],
  ['an unknown entry type (V, a volume label)', { tar: () => tarOf(entry({ name: 'label', flag: 'V' })), expect: 'INVALID_LAYER', message: /"V"/ }],
  ['a GNU dumpdir entry (D)', { tar: () => tarOf(entry({ name: 'dump', flag: 'D' }, 'Yfile\0\0')), expect: 'INVALID_LAYER' }],
  [
    'a sparse map reaching past the file',
    {
      tar: () =>
        tarOf(
          pax([
            ['GNU.sparse.size', '10'],
            ['GNU.sparse.numblocks', '1'],
            ['GNU.sparse.map', '8,4'],
          ]),
          file('sparse', 'abcd'),
        ),
      expect: 'INVALID_LAYER',
    },
  ],
  [
    'a bad header checksum',
    {
      tar: () => {
        const t = tarOf(file('a'));
        t[0] = 0x62;
        return t;
      },
      expect: 'INVALID_LAYER',
    },
  ],

  // -- resource limits --
  [
    'a path over maxPathBytes',
    { tar: () => tarOf(pax([['path', `${'n'.repeat(200)}/`.repeat(25)]]), file('x')), expect: 'HOSTILE_LAYER', message: /maxPathBytes/ },
  ],
  ['a path over maxPathDepth', { tar: () => tarOf(pax([['path', `${'d/'.repeat(300)}f`]]), file('x')), expect: 'HOSTILE_LAYER', message: /maxPathDepth/ }],
  [
    'a symlink target over maxSymlinkBytes',
    { tar: () => tarOf(pax([['linkpath', 't'.repeat(5000)]]), symlink('s', 'x')), expect: 'HOSTILE_LAYER', message: /maxSymlinkBytes/ },
  ],
  [
    'more entries than maxEntries',
    { tar: () => tarOf(file('a'), file('b'), file('c'), file('d')), limits: { maxEntries: 3 }, expect: 'HOSTILE_LAYER', message: /maxEntries/ },
  ],
  [
    'an entry declaring 2 TiB (refused before reading)',
    { tar: () => tarOf(entry({ name: 'huge', raw: { 124: base256(2n ** 41n, 12) } })), expect: 'INVALID_LAYER', message: /maxTotalBytes/ },
  ],
  [
    'a sparse file of 2 PiB in a few bytes',
    {
      tar: () =>
        tarOf(
          pax([
            ['GNU.sparse.size', String(2 ** 51)],
            ['GNU.sparse.numblocks', '1'],
            ['GNU.sparse.map', '0,1'],
          ]),
          file('sparse', 'a'),
        ),
      expect: 'INVALID_LAYER',
      message: /maxTotalBytes/,
    },
  ],
  [
    'a PAX header over maxPaxHeaderBytes',
    { tar: () => tarOf(header({ name: 'PaxHeaders/x', flag: 'x', size: 2 ** 21 }), file('x')), expect: 'INVALID_LAYER', message: /maxPaxHeaderBytes/ },
  ],
  [
    'a GNU long name over maxPaxHeaderBytes',
    {
      tar: () => tarOf(header({ name: '././@LongLink', flag: 'L', size: 2 ** 21, magic: 'gnu' }), file('x')),
      expect: 'INVALID_LAYER',
      message: /maxPaxHeaderBytes/,
    },
  ],
  [
    'a stream longer than maxTotalBytes',
    { tar: () => tarOf(file('a', 'x'.repeat(3000))), limits: { maxTotalBytes: 2048 }, expect: 'INVALID_LAYER', message: /maxTotalBytes/ },
  ],
  [
    'more extended attributes on one entry than maxXattrs',
    {
      tar: () => tarOf(pax(Array.from({ length: 129 }, (_, i) => [`SCHILY.xattr.user.a${i}`, 'v'] as [string, string])), file('f')),
      expect: 'HOSTILE_LAYER',
      message: /maxXattrs/,
    },
  ],
  [
    'an extended attribute over maxXattrBytes (the kernel refuses it; a filesystem full of them is no disk-full)',
    { tar: () => tarOf(pax([['SCHILY.xattr.user.big', 'v'.repeat(200_000)]]), file('f')), expect: 'HOSTILE_LAYER', message: /maxXattrBytes/ },
  ],
  // Whiteout markers are regular files: under any other type the name would mean two things.
  [
    'a directory named as a whiteout marker, with an entry of its own',
    { tar: () => tarOf(dir('.wh.x/'), file('.wh.x/c', 'c')), expect: 'HOSTILE_LAYER', message: /whiteout marker's name on a directory/ },
  ],
  ['a symlink named as a whiteout marker', { tar: () => tarOf(symlink('d/.wh.x', '/etc')), expect: 'HOSTILE_LAYER', message: /on a symlink/ }],
  ['a fifo named as a whiteout marker', { tar: () => tarOf(entry({ name: '.wh.x', flag: '6' })), expect: 'HOSTILE_LAYER' }],
  ['a directory named as the opaque marker', { tar: () => tarOf(dir('d/'), dir('d/.wh..wh..opq/')), expect: 'HOSTILE_LAYER' }],
  [
    'the opaque marker at the layer root (would hide every layer below)',
    { tar: () => tarOf(file('.wh..wh..opq', ''), file('a')), expect: 'HOSTILE_LAYER', message: /root/ },
  ],
];
