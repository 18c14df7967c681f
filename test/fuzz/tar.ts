// Tar streams for the hostile-input campaign, written byte by byte (no tar library: the point is
// to write what a library would refuse): headers with random fields, checksums right or wrong,
// numbers octal or base-256, PAX records whose lengths may lie, GNU long names and sparse maps,
// names that climb out (`..`, absolute, through symlinks), then the whole stream mutated.
import fc from 'fast-check';
import { mutateBytes } from './gen.js';

const BLOCK = 512;

/** One header's fields as written; `checksum` says how the checksum field is filled. */
export interface RawHeader {
  name: Buffer;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  flag: string;
  linkname: Buffer;
  magic: 'ustar' | 'gnu' | 'v7' | 'star';
  devmajor: number;
  devminor: number;
  prefix: Buffer;
  checksum: 'ok' | 'signed' | 'bad' | 'garbage';
  base256: boolean;
  /** Bytes written over the block after everything else (offset, bytes). */
  poke?: readonly [number, number] | undefined;
}

function putNumber(b: Buffer, at: number, len: number, n: number, base256: boolean): void {
  if (base256 || n < 0 || n >= 8 ** (len - 1)) {
    // Base-256: top bit set, two's complement big-endian for negatives.
    let x = BigInt(n);
    if (x < 0n) x = (1n << BigInt(8 * len)) + x;
    for (let i = len - 1; i >= 0; i--) {
      b[at + i] = Number(x & 0xffn);
      x >>= 8n;
    }
    b[at] = b[at]! | 0x80;
    return;
  }
  b.write(n.toString(8).padStart(len - 1, '0') + '\0', at, len, 'latin1');
}

/** One 512-byte header block. */
export function headerBlock(h: RawHeader): Buffer {
  const b = Buffer.alloc(BLOCK);
  h.name.copy(b, 0, 0, Math.min(100, h.name.length));
  putNumber(b, 100, 8, h.mode, h.base256);
  putNumber(b, 108, 8, h.uid, h.base256);
  putNumber(b, 116, 8, h.gid, h.base256);
  putNumber(b, 124, 12, h.size, h.base256);
  putNumber(b, 136, 12, h.mtime, h.base256);
  b.write(h.flag.slice(0, 1), 156, 1, 'latin1');
  h.linkname.copy(b, 157, 0, Math.min(100, h.linkname.length));
  if (h.magic === 'ustar' || h.magic === 'star') b.write('ustar\x0000', 257, 8, 'latin1');
  else if (h.magic === 'gnu') b.write('ustar  \0', 257, 8, 'latin1');
  if (h.magic !== 'v7') {
    putNumber(b, 329, 8, h.devmajor, h.base256);
    putNumber(b, 337, 8, h.devminor, h.base256);
  }
  if (h.magic === 'ustar') h.prefix.copy(b, 345, 0, Math.min(155, h.prefix.length));
  if (h.magic === 'star') b.write('tar\0', 508, 4, 'latin1');
  if (h.poke) b[h.poke[0] % BLOCK] = h.poke[1];
  let sum = 8 * 0x20;
  let signed = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) {
    if (i >= 148 && i < 156) continue;
    sum += b[i]!;
    signed += (b[i]! << 24) >> 24;
  }
  const value = h.checksum === 'ok' ? sum : h.checksum === 'signed' ? signed : h.checksum === 'bad' ? sum + 1 : -1;
  if (value >= 0) b.write(value.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'latin1');
  else b.write('zz\0\0\0\0\0\0', 148, 8, 'latin1');
  return b;
}

/** `data` padded to whole blocks. */
export function pad(data: Buffer): Buffer {
  const rest = data.length % BLOCK;
  return rest === 0 ? data : Buffer.concat([data, Buffer.alloc(BLOCK - rest)]);
}

/** One PAX record `<len> <key>=<value>\n`; `lie` adds to the length it states. */
export function paxRecord(key: string, value: Buffer, lie = 0): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`, 'latin1'), value, Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len + lie)), body]);
}

/** Sandbox facts the generator aims names at: escapes must land where the test looks. */
export interface Aim {
  /** Absolute path of the sandbox around the snapshot directory. */
  sandbox: string;
  /** The file name every escape attempt uses, searched for outside the snapshot afterwards. */
  canary: string;
}

/** Entry names: ordinary, whiteouts, and every way of climbing out. */
export function nameArb(aim: Aim): fc.Arbitrary<Buffer> {
  const plain = fc.constantFrom(
    'a',
    'b',
    'dir',
    'dir/x',
    'dir/sub/y',
    'link',
    'l2',
    '.wh.a',
    'dir/.wh..wh..opq',
    '.wh..wh.plnk',
    '.wh..',
    'dir/',
    '.',
    './',
    '',
  );
  const climb = fc
    .tuple(fc.integer({ min: 1, max: 8 }), fc.constantFrom('', 'dir/', './', 'link/', 'l2/'))
    .map(([n, pre]) => `${pre}${'../'.repeat(n)}${aim.canary}`);
  const abs = fc.constantFrom(`/${aim.canary}`, `${aim.sandbox}/${aim.canary}`, `${aim.sandbox}/victim/secret.txt`, `/etc/${aim.canary}`, `//${aim.canary}`);
  const through = fc.constantFrom(`link/${aim.canary}`, `l2/${aim.canary}`, `link/secret.txt`, `dir/link/${aim.canary}`);
  const odd = fc.oneof(
    fc.constantFrom('a\0b', 'caf\xe9', '\xff\xfe', 'a/'.repeat(60), 'x'.repeat(300), `${'d/'.repeat(300)}f`, 'a//b', 'a/./b'),
    fc.string({ unit: 'binary-ascii', maxLength: 20 }),
  );
  return fc
    .oneof(
      { weight: 6, arbitrary: plain },
      { weight: 3, arbitrary: climb },
      { weight: 2, arbitrary: abs },
      { weight: 2, arbitrary: through },
      { weight: 1, arbitrary: odd },
    )
    .map((s) => Buffer.from(s, 'latin1'));
}

/** Link targets: inside, climbing out, absolute into the sandbox. */
export function targetArb(aim: Aim): fc.Arbitrary<Buffer> {
  return fc
    .oneof(
      fc.constantFrom(
        'a',
        'dir',
        'dir/x',
        '.',
        '..',
        '../..',
        '../../..',
        '/',
        `${aim.sandbox}/victim`,
        `${aim.sandbox}/victim/secret.txt`,
        aim.sandbox,
        `/tmp`,
        'link',
        '',
      ),
      fc.integer({ min: 1, max: 8 }).map((n) => `${'../'.repeat(n)}victim`),
    )
    .map((s) => Buffer.from(s, 'latin1'));
}

const paxKey = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.constantFrom(
      'path',
      'linkpath',
      'size',
      'uid',
      'gid',
      'mtime',
      'atime',
      'GNU.sparse.major',
      'GNU.sparse.minor',
      'GNU.sparse.map',
      'GNU.sparse.size',
      'GNU.sparse.realsize',
      'GNU.sparse.numblocks',
      'GNU.sparse.name',
      'GNU.sparse.offset',
      'GNU.sparse.numbytes',
      'SCHILY.xattr.user.fuzz',
      'SCHILY.xattr.trusted.overlay.opaque',
      'SCHILY.xattr.user.overlay.opaque',
      'SCHILY.xattr.security.capability',
      'SCHILY.xattr.',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 12 }) },
);

function paxValueArb(aim: Aim): fc.Arbitrary<Buffer> {
  return fc.oneof(
    fc
      .constantFrom(
        '0',
        '1',
        '-1',
        '10',
        '512',
        '1.5',
        '1e3',
        '9007199254740993',
        '99999999999999999',
        '0,0',
        '0,10,20,5',
        '1,2,3',
        'y',
        '',
        '0.0',
        '-0.5',
        '1700000000.123456789',
      )
      .map((s) => Buffer.from(s)),
    nameArb(aim),
    fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  );
}

/** PAX header data: records whose stated lengths sometimes lie, sometimes NUL padding or junk after them. */
export function paxDataArb(aim: Aim, dirty = true): fc.Arbitrary<Buffer> {
  const lie = dirty ? fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: -12, max: 12 }) }) : fc.constant(0);
  return fc
    .tuple(
      fc.array(fc.tuple(paxKey, paxValueArb(aim), lie), { maxLength: 5 }),
      dirty ? fc.constantFrom('', '\0\0\0', 'junk', '\0x') : fc.constantFrom('', '\0\0\0'),
    )
    .map(([recs, tail]) => Buffer.concat([...recs.map(([k, v, lie]) => paxRecord(k, v, lie)), Buffer.from(tail, 'latin1')]));
}

const FLAGS = ['0', '0', '0', '\0', '1', '2', '2', '3', '4', '5', '5', '6', '7', 'S', 'L', 'K', 'x', 'g', 'V', 'M', 'N', 'D', 'A', '~'];

/** One entry: optional PAX or GNU long-name headers, the header, its data. */
function entryArb(aim: Aim, dirty: boolean): fc.Arbitrary<Buffer> {
  const header = fc.record({
    name: nameArb(aim),
    mode: fc.oneof(fc.constantFrom(0o644, 0o755, 0o4755, 0o7777, 0o1000000, 0), fc.integer({ min: -5, max: 0o7777777 })),
    uid: fc.oneof(fc.constantFrom(0, 1000, 65534, 0xfffffffe, 0xffffffff, 2 ** 40), fc.integer({ min: -2, max: 70000 })),
    gid: fc.oneof(fc.constantFrom(0, 1000, 0xffffffff), fc.nat({ max: 70000 })),
    mtime: fc.oneof(fc.constantFrom(0, 1_600_000_000, 2 ** 40, -1), fc.nat()),
    flag: dirty
      ? fc.constantFrom(...FLAGS)
      : fc.oneof({ weight: 6, arbitrary: fc.constantFrom('0', '0', '5', '2', '1', '\0', '6', '3') }, { weight: 1, arbitrary: fc.constantFrom(...FLAGS) }),
    linkname: targetArb(aim),
    magic: fc.constantFrom('ustar', 'ustar', 'gnu', 'v7', 'star'),
    devmajor: fc.oneof(fc.constantFrom(0, 1, 0xfff, 0x1000), fc.nat({ max: 300 })),
    devminor: fc.oneof(fc.constantFrom(0, 3, 0xfffff, 0x100000), fc.nat({ max: 300 })),
    prefix: fc.oneof(fc.constant(Buffer.alloc(0)), nameArb(aim)),
    checksum: dirty
      ? fc.oneof(
          { weight: 20, arbitrary: fc.constant('ok' as const) },
          { weight: 1, arbitrary: fc.constantFrom('signed' as const, 'bad' as const, 'garbage' as const) },
        )
      : fc.constantFrom('ok' as const, 'ok' as const, 'signed' as const),
    base256: fc.boolean(),
    poke: dirty ? fc.option(fc.tuple(fc.nat({ max: 511 }), fc.integer({ min: 0, max: 255 })), { freq: 10, nil: undefined }) : fc.constant(undefined),
  });
  const data = fc.oneof(
    { weight: 4, arbitrary: fc.uint8Array({ maxLength: 1200 }).map((a) => Buffer.from(a)) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  );
  // How the size field relates to the data: true, off by a little, or wild.
  const sizeMode = dirty
    ? fc.oneof(
        { weight: 10, arbitrary: fc.constant(0) },
        { weight: 2, arbitrary: fc.integer({ min: -600, max: 600 }) },
        { weight: 1, arbitrary: fc.constantFrom(-1, 2 ** 41, 2 ** 53) },
      )
    : fc.constant(0);
  const meta = fc.oneof(
    { weight: dirty ? 4 : 8, arbitrary: fc.constant(null) },
    { weight: 3, arbitrary: paxDataArb(aim, dirty).map((d) => ({ flag: 'x', data: d })) },
    { weight: 1, arbitrary: paxDataArb(aim, dirty).map((d) => ({ flag: 'g', data: d })) },
    { weight: 1, arbitrary: nameArb(aim).map((d) => ({ flag: 'L', data: Buffer.concat([d, Buffer.from([0])]) })) },
    { weight: 1, arbitrary: targetArb(aim).map((d) => ({ flag: 'K', data: d })) },
    { weight: 1, arbitrary: fc.constant({ flag: 'x', data: Buffer.alloc(0) }) },
  );
  return fc.tuple(header, data, sizeMode, meta, fc.boolean()).map(([h, body, delta, m, metaSizeLies]) => {
    const parts: Buffer[] = [];
    if (m !== null) {
      const metaHeader: RawHeader = {
        ...h,
        name: Buffer.from('././@PaxHeader'),
        flag: m.flag,
        size: m.data.length + (metaSizeLies && dirty ? delta : 0),
        checksum: 'ok',
        poke: undefined,
      };
      parts.push(headerBlock(metaHeader), pad(m.data));
    }
    const size = delta === 2 ** 41 || delta === 2 ** 53 ? delta : Math.max(-1, body.length + delta);
    parts.push(headerBlock({ ...h, size }), pad(body));
    return Buffer.concat(parts);
  });
}

/** Whole tar streams: entries, an end marker or not, then sometimes a few bytes mutated. */
export function tarArb(aim: Aim): fc.Arbitrary<Buffer> {
  const ending = fc.constantFrom('two', 'two', 'one', 'none', 'one-then-data', 'trailing');
  const stream = (dirty: boolean) =>
    fc.tuple(fc.array(entryArb(aim, dirty), { maxLength: 6 }), ending).map(([entries, end]) => {
      const z = Buffer.alloc(BLOCK);
      const tail =
        end === 'two'
          ? [z, z]
          : end === 'one'
            ? [z]
            : end === 'none'
              ? []
              : end === 'one-then-data'
                ? [z, Buffer.alloc(BLOCK, 0x41)]
                : [z, z, Buffer.from('trailing junk')];
      return Buffer.concat([...entries, ...tail]);
    });
  return fc.oneof(
    { weight: 5, arbitrary: stream(false) },
    { weight: 3, arbitrary: stream(true) },
    { weight: 2, arbitrary: mutateBytes(stream(true)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)) },
  );
}

/** Chunk sizes a stream is fed in: single bytes, around the block size, or whole. */
export const chunkingArb = fc.oneof(fc.constantFrom(1, 7, 511, 512, 513, 700, 1024, 4096, 1 << 20), fc.integer({ min: 1, max: 3000 }));

/** `buf` in chunks of `size`. */
export async function* chunked(buf: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}
