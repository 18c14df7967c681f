// Tests of unpackLayer: one pass computing both digests, and overlay-ready snapshots mounted for real.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MediaTypes } from '../oci/mediatypes.js';
import { FileSink, SINK_MAX_FILE } from './filesink.js';
import { ISAL_CHUNK_SIZE, isalAvailable, isalUnavailableReason } from './decompress/isal.js';
import { unpackLayer } from './layer.js';
import { hashedBytes, type HashMode } from './hash-tap.js';
import { nativeFs, nativeHash } from '../native/addon.js';
import { InflatePool, sharedInflatePool } from './decompress/pargzip.js';
import { Prng } from '../testing/prng.js';
import { paxRecord, rawHeader } from './apply/apply.testkit.js';
import { code, makeTar, padded } from './tar/tar.testkit.js';
import { lacks, lacksRoot } from '../testing/needs.js';

const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const isRoot = process.getuid?.() === 0;
if (nativeHash() === undefined) console.warn('layer.test: no native addon here: the pool-hashing test is skipped (pnpm --filter @fastpull/core build:native)');

let work: string;
beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-layer-'));
});
afterEach(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

function snapshotDir(name: string): string {
  const d = path.join(work, name);
  fs.mkdirSync(d);
  return d;
}

function writeBlob(name: string, data: Buffer): string {
  const p = path.join(work, name);
  fs.writeFileSync(p, data);
  return p;
}

/** The inflaters with a CPU clock that can run here, and how many decode threads each has. */
const clockedInflaters: ['isal' | 'parallel', number][] = [
  ...(isalAvailable() ? [['isal', 1] as ['isal', number]] : []),
  ...(InflatePool.available() ? [['parallel', sharedInflatePool().threads] as ['parallel', number]] : []),
];
if (!isalAvailable()) console.log(`unpackLayer: the isal inflater's CPU is not checked: ${isalUnavailableReason()}`);
if (!InflatePool.available()) console.log("unpackLayer: the parallel inflater's CPU is not checked: its native decoder is not built");
if (!FileSink.clocked()) console.log("unpackLayer: the writer threads' CPU is not checked: the addon has no counting writer threads here");

/** Where a pass can hash here: on the pool only with the addon's SHA-256. */
const hashModes: HashMode[] = lacks(
  'addon',
  nativeHash() === undefined ? 'the native addon (SHA-256) is not built: hashing on the pool is not counted' : undefined,
)
  ? ['inline']
  : ['pool', 'inline'];

describe('unpackLayer', () => {
  it('returns the blob digest, the diffID and both sizes, reading the blob once', async () => {
    const tar = await makeTar([
      { name: 'hello', body: 'world' },
      { name: 'dir/', type: 'directory' },
    ]);
    const blob = zlib.gzipSync(tar);
    const seen: number[] = [];
    const r = await unpackLayer({
      blobPath: writeBlob('blob', blob),
      mediaType: MediaTypes.OCI_LAYER_GZIP,
      dest: snapshotDir('snap'),
      onBytes: (n) => seen.push(n),
    });
    expect(r.blobDigest).toBe(sha256(blob));
    expect(r.diffID).toBe(sha256(tar));
    expect(r.compressedSize).toBe(blob.length);
    expect(r.uncompressedSize).toBe(tar.length);
    expect(r.stats).toMatchObject({ entries: 2, files: 1, bytes: 5 });
    expect(seen.at(-1)).toBe(blob.length);
    expect(fs.readFileSync(path.join(work, 'snap/hello'), 'utf8')).toBe('world');
  });

  it.skipIf(lacks('addon', nativeHash() === undefined ? 'the native addon (SHA-256) is not built' : undefined))(
    'gives the same digests hashing on the pool and inline, and says where each stage spent CPU',
    async () => {
      const prng = new Prng(11);
      const tar = await makeTar(Array.from({ length: 40 }, (_, i) => ({ name: `f${i}`, body: prng.bytes(1 + i * 9973) })));
      const blob = zlib.gzipSync(tar);
      const blobPath = writeBlob('blob', blob);
      for (const hashMode of ['pool', 'inline'] as const) {
        const r = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir(hashMode), hashMode, inflater: 'zlib' });
        expect(r.blobDigest).toBe(sha256(blob));
        expect(r.diffID).toBe(sha256(tar));
        expect(r.stats.files).toBe(40);
        expect(r.timings.hashMode).toBe(hashMode);
        expect(r.timings.blobHashCpuMs).toBeGreaterThan(0);
        expect(r.timings.tarHashCpuMs).toBeGreaterThan(0);
        expect(r.timings.threadCpuMs).toBeGreaterThan(0);
        // node:zlib decodes on libuv's pool, shared with other work: no clock of its own.
        expect(r.timings).not.toHaveProperty('inflateCpuMs');
      }
    },
  );

  it.each(clockedInflaters)('says what decompressing took in CPU with the %s inflater', async (inflater, threads) => {
    const prng = new Prng(12);
    // Layer-like: half random, half runs, so that the decoder has work on both kinds of block.
    const tar = await makeTar(Array.from({ length: 24 }, (_, i) => ({ name: `f${i}`, body: i % 2 ? prng.bytes(1 << 20) : Buffer.alloc(1 << 20, i) })));
    const blob = zlib.gzipSync(tar);
    const r = await unpackLayer({ blobPath: writeBlob('blob', blob), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir(inflater), inflater });
    expect(r.diffID).toBe(sha256(tar));
    const cpu = r.timings.inflateCpuMs!;
    expect(cpu).toBeGreaterThan(0);
    // Its decode threads (ISA-L: one), busy within the pass: never more than the pass's wall time each.
    expect(cpu).toBeLessThanOrEqual(r.timings.totalMs * threads);
  });

  it.skipIf(lacks('addon', FileSink.clocked() ? undefined : 'the native addon (thread CPU clocks) is not built'))(
    "counts the writer threads' CPU for a layer of small files, and 0 when none went to them",
    async () => {
      const prng = new Prng(13);
      const small = Array.from({ length: 300 }, (_, i) => ({ name: `d${i % 7}/f${i}`, body: prng.bytes(1 + ((i * 7919) % 16384)) }));
      const tar = await makeTar(small);
      const r = await unpackLayer({ blobPath: writeBlob('small.gz', zlib.gzipSync(tar)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir('small') });
      expect(r.diffID).toBe(sha256(tar));
      expect(r.stats.files).toBe(300);
      expect(fs.readFileSync(path.join(work, 'small/d5/f299'))).toEqual(small[299]!.body);
      const cpu = r.timings.writerCpuMs!;
      expect(cpu).toBeGreaterThan(0);
      expect(r.stats.writerCpuMs).toBe(cpu);
      // At most 16 writer threads, each busy within the pass at most.
      expect(cpu).toBeLessThanOrEqual(r.timings.totalMs * 16);

      // One file over the sink's limit: the unpack thread writes it; the writers made nothing.
      const big = await makeTar([{ name: 'big', body: prng.bytes(SINK_MAX_FILE + 1) }]);
      const b = await unpackLayer({ blobPath: writeBlob('big.gz', zlib.gzipSync(big)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir('big') });
      expect(b.stats.files).toBe(1);
      expect(fs.statSync(path.join(work, 'big/big')).size).toBe(SINK_MAX_FILE + 1);
      expect(b.timings.writerCpuMs).toBe(0);
    },
  );

  it('inflates a multi-member gzip blob into the whole tar', async () => {
    const tar = await makeTar([
      { name: 'one', body: 'x'.repeat(3000) },
      { name: 'two', body: 'y'.repeat(3000) },
    ]);
    const cut = 1700; // mid-entry: the members split the tar anywhere
    const blob = Buffer.concat([zlib.gzipSync(tar.subarray(0, cut)), zlib.gzipSync(tar.subarray(cut))]);
    const r = await unpackLayer({ blobPath: writeBlob('blob', blob), mediaType: MediaTypes.DOCKER_LAYER_GZIP, dest: snapshotDir('snap') });
    expect(r.diffID).toBe(sha256(tar));
    expect(fs.readFileSync(path.join(work, 'snap/two'), 'utf8')).toBe('y'.repeat(3000));
  });

  it('unpacks a blob labelled gzip that is a plain tar (the magic bytes win)', async () => {
    const tar = await makeTar([{ name: 'f', body: 'plain' }]);
    const r = await unpackLayer({ blobPath: writeBlob('blob', tar), mediaType: MediaTypes.DOCKER_LAYER_GZIP, dest: snapshotDir('snap') });
    expect(r.blobDigest).toBe(sha256(tar));
    expect(r.diffID).toBe(sha256(tar));
    expect(fs.readFileSync(path.join(work, 'snap/f'), 'utf8')).toBe('plain');
  });

  it('hashes bytes after the end of the tar into the diffID', async () => {
    const tar = Buffer.concat([await makeTar([{ name: 'f', body: 'x' }]), Buffer.alloc(8192), Buffer.from('junk')]);
    const blob = zlib.gzipSync(tar);
    const r = await unpackLayer({ blobPath: writeBlob('blob', blob), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir('snap') });
    expect(r.diffID).toBe(sha256(tar));
    expect(r.uncompressedSize).toBe(tar.length);
  });

  it.each(hashModes)('hashes an uncompressed layer once (%s): its diffID is its blob digest, read or followed', async (hashMode) => {
    const body = new Prng(21).bytes(3 * 1024 * 1024 + 77);
    const tar = await makeTar([
      { name: 'weights.bin', body },
      { name: 'config.json', body: '{}' },
    ]);
    const blobPath = writeBlob('weights.tar', tar);
    const { Watermark } = await import('../content/watermark.js');
    for (const follow of [undefined, { watermark: Watermark.complete(tar.length).buffer, size: tar.length }]) {
      const before = hashedBytes();
      const dest = snapshotDir(follow ? `${hashMode}-followed` : hashMode);
      const r = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER, dest, hashMode, ...(follow ? { follow } : {}) });
      // Every byte went through SHA-256 once: a second hash of the same bytes would double this.
      expect(hashedBytes() - before).toBe(tar.length);
      expect(r.blobDigest).toBe(sha256(tar));
      expect(r.diffID).toBe(r.blobDigest);
      expect(r.uncompressedSize).toBe(tar.length);
      expect(r.compressedSize).toBe(tar.length);
      expect(r.timings.blobHashCpuMs).toBeGreaterThan(0);
      expect(r.timings.tarHashCpuMs).toBe(0);
      expect(fs.readFileSync(path.join(dest, 'weights.bin')).equals(body)).toBe(true);
    }
    // A compressed layer is hashed as its blob and as its tar: the count sees both.
    const gz = zlib.gzipSync(tar, { level: 1 });
    const before = hashedBytes();
    const r = await unpackLayer({
      blobPath: writeBlob('weights.tgz', gz),
      mediaType: MediaTypes.OCI_LAYER_GZIP,
      dest: snapshotDir(`${hashMode}-gz`),
      hashMode,
      inflater: 'zlib',
    });
    expect(hashedBytes() - before).toBe(gz.length + tar.length);
    expect(r.diffID).toBe(sha256(tar));
    expect(r.timings.tarHashCpuMs).toBeGreaterThan(0);
  });

  it('maps failures onto codes', async () => {
    const tar = await makeTar([{ name: 'f', body: 'x'.repeat(10_000) }]);
    const gz = zlib.gzipSync(tar);
    const corrupt = Buffer.from(gz);
    corrupt.fill(0x55, 20, 60);
    const mk = (n: string): string => snapshotDir(n);
    expect(await code(unpackLayer({ blobPath: writeBlob('c', corrupt), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: mk('s1') }))).toBe('INVALID_LAYER');
    const truncated = gz.subarray(0, gz.length - 10);
    expect(await code(unpackLayer({ blobPath: writeBlob('t', truncated), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: mk('s2') }))).toBe('INVALID_LAYER');
    expect(await code(unpackLayer({ blobPath: path.join(work, 'absent'), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: mk('s3') }))).toBe('NOT_FOUND');
    const zstd = writeBlob('z', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0]));
    expect(await code(unpackLayer({ blobPath: zstd, mediaType: MediaTypes.OCI_LAYER_ZSTD, dest: mk('s4') }))).toBe('INVALID_LAYER');
    expect(await code(unpackLayer({ blobPath: writeBlob('g', gz), mediaType: MediaTypes.OCI_CONFIG, dest: mk('s5') }))).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(await code(unpackLayer({ blobPath: writeBlob('a', gz), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: mk('s6'), signal: AbortSignal.abort() }))).toBe(
      'ABORTED',
    );
    const hostile = zlib.gzipSync(await makeTar([{ name: '../evil', body: 'x' }]));
    expect(await code(unpackLayer({ blobPath: writeBlob('h', hostile), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: mk('s7') }))).toBe('HOSTILE_LAYER');
    expect(fs.existsSync(path.join(work, 'evil'))).toBe(false);
  });

  it('stops with ABORTED when the signal fires mid-layer', async () => {
    const big = Buffer.alloc(64 * 1024 * 1024);
    const tar = await makeTar([{ name: 'big', body: big }]);
    const blob = zlib.gzipSync(tar, { level: 1 });
    const ac = new AbortController();
    const p = unpackLayer({
      blobPath: writeBlob('blob', blob),
      mediaType: MediaTypes.OCI_LAYER_GZIP,
      dest: snapshotDir('snap'),
      signal: ac.signal,
      onBytes: (n) => {
        if (n > 0) ac.abort();
      },
    });
    expect(await code(p)).toBe('ABORTED');
  });
});

describe('unpackLayer into overlayfs', () => {
  it.skipIf(lacksRoot())('stacks two layers: a whiteout hides a file and an opaque dir hides the lower contents', async (ctx) => {
    const lowerTar = await makeTar([
      { name: 'a', body: 'from lower' },
      { name: 'd/', type: 'directory' },
      { name: 'd/x', body: 'lower x' },
      { name: 'keep', body: 'kept' },
    ]);
    const upperTar = await makeTar([{ name: '.wh.a' }, { name: 'd/', type: 'directory' }, { name: 'd/.wh..wh..opq' }, { name: 'd/y', body: 'upper y' }]);
    const lower = snapshotDir('lower');
    const upper = snapshotDir('upper');
    const merged = snapshotDir('merged');
    await unpackLayer({ blobPath: writeBlob('l.tgz', zlib.gzipSync(lowerTar)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: lower });
    await unpackLayer({ blobPath: writeBlob('u.tgz', zlib.gzipSync(upperTar)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: upper });
    try {
      execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${upper}:${lower}`, merged], { stdio: 'pipe' });
    } catch (e) {
      lacks('overlay', `mount failed: ${(e as Error).message}`);
      ctx.skip();
      return;
    }
    try {
      expect(fs.existsSync(path.join(merged, 'a'))).toBe(false);
      expect(fs.readdirSync(path.join(merged, 'd'))).toEqual(['y']);
      expect(fs.readFileSync(path.join(merged, 'd/y'), 'utf8')).toBe('upper y');
      expect(fs.readFileSync(path.join(merged, 'keep'), 'utf8')).toBe('kept');
      expect(fs.readdirSync(merged).sort()).toEqual(['d', 'keep']);
    } finally {
      execFileSync('umount', [merged]);
    }
  });
});

if (!isRoot) console.warn('unpackLayer overlay test skipped: it mounts overlayfs, which needs root');

// The in-process ISA-L gunzip runs the same checks where its addon is built (libisal-dev).
/** Bytes that compress like text (the parallel decoder's guesses then start with matches into a window they do not know). */
function textish(prng: Prng, n: number): Buffer {
  const words = Array.from({ length: 200 }, (_, i) => `${i.toString(36)}${prng.bytes(3).toString('hex')}`);
  const parts: string[] = [];
  for (let len = 0; len < n;) {
    const w = `${prng.pick(words)}${prng.chance(0.1) ? '\n' : ' '}`;
    parts.push(w);
    len += w.length;
  }
  return Buffer.from(parts.join('')).subarray(0, n);
}

/** The decoders that fill their output buffers again, with the size of those buffers. */
const reusing: ['isal' | 'parallel', number][] = [
  ...(isalAvailable() ? [['isal', ISAL_CHUNK_SIZE] as ['isal', number]] : []),
  ...(InflatePool.available() ? [['parallel', 256 * 1024] as ['parallel', number]] : []),
];

describe.skipIf(lacks('addon', reusing.length === 0 ? 'neither the ISA-L addon nor the parallel gunzip is built' : undefined)).each(reusing)(
  "unpackLayer: the %s decoder's output buffers filled again",
  (inflater, bufferSize) => {
    it('fills them once the hash and the extraction are past them, and every file, xattr and name lands intact', async () => {
      const prng = new Prng(31);
      const small = (i: number): { name: string; body: Buffer } => ({
        name: `s/${i % 9}/f${i}`,
        body: i % 2 ? prng.bytes(1 + ((i * 7919) % 40_000)) : textish(prng, 1 + ((i * 7919) % 40_000)),
      });
      const before = Array.from({ length: 150 }, (_, i) => small(i));
      const after = Array.from({ length: 150 }, (_, i) => small(150 + i));
      // A large file written by the unpack thread as it streams, its PAX records read after its data:
      // they must not be views of a buffer the decoder fills again meanwhile.
      const tag = prng.bytes(300);
      const longName = `deep/${'n'.repeat(180)}`;
      const big = Buffer.concat([textish(prng, 12 * 1024 * 1024), prng.bytes(12 * 1024 * 1024 + 777)]);
      const pax = Buffer.concat([paxRecord('SCHILY.xattr.user.tag', tag), paxRecord('path', Buffer.from(longName))]);
      const middle = Buffer.concat([rawHeader('PaxHeaders/big', 'x', pax.length), padded(pax), rawHeader('big-short-name', '0', big.length), padded(big)]);
      const head = await makeTar(before);
      const tail = await makeTar(after);
      // makeTar ends each archive with two zero blocks: joined without the first's.
      const tar = Buffer.concat([head.subarray(0, head.length - 1024), middle, tail]);
      const blob = zlib.gzipSync(tar, { level: 1 });
      const r = await unpackLayer({
        blobPath: writeBlob('reuse.tgz', blob),
        mediaType: MediaTypes.OCI_LAYER_GZIP,
        dest: snapshotDir(`reuse-${inflater}`),
        inflater,
      });
      expect(r.diffID).toBe(sha256(tar));
      expect(r.stats.files).toBe(301);
      const root = path.join(work, `reuse-${inflater}`);
      for (const f of [...before, ...after]) expect(fs.readFileSync(path.join(root, f.name)).equals(f.body)).toBe(true);
      const bigPath = path.join(root, longName);
      expect(fs.readFileSync(bigPath).equals(big)).toBe(true);
      expect(nativeFs().lgetxattr(bigPath, 'user.tag')).toEqual(tag);
      // A buffer per piece of tar, but no more allocated than the stages hold at once (the tar's hash
      // queue of 8 MiB, the decoder's read-ahead and a parallel job's output, the reader's own): the
      // rest were filled again, however the hash lags on a loaded machine.
      const { allocated, recycled } = r.outputBuffers!;
      expect(allocated + recycled).toBeGreaterThanOrEqual(Math.floor(tar.length / bufferSize));
      expect(allocated * bufferSize).toBeLessThanOrEqual(24 * 1024 * 1024);
      expect(recycled).toBeGreaterThan(0);
    });

    it('lands the same tree as node:zlib, which reuses nothing, for layers of every entry kind and size', async () => {
      /** Every path with its kind, mode, content hash or link target, and its user.k xattr. */
      const describeTree = (root: string): string[] => {
        const out: string[] = [];
        const walk = (d: string) => {
          for (const name of fs.readdirSync(d).sort()) {
            const p = path.join(d, name);
            const st = fs.lstatSync(p);
            const what = st.isFile() ? createHash('sha256').update(fs.readFileSync(p)).digest('hex') : st.isSymbolicLink() ? fs.readlinkSync(p) : '';
            const xattr = st.isSymbolicLink() ? null : nativeFs().lgetxattr(p, 'user.k');
            out.push(`${path.relative(root, p)} ${st.mode} ${st.nlink} ${what} ${xattr?.toString('hex') ?? '-'}`);
            if (st.isDirectory()) walk(p);
          }
        };
        walk(root);
        return out;
      };
      for (const seed of [1, 2, 3, 4, 5]) {
        const prng = new Prng(500 + seed);
        const files: string[] = [];
        const entries: Parameters<typeof makeTar>[0] = [];
        for (let i = 0; i < 60; i++) {
          const dir = `d${prng.int(0, 3)}/`;
          const kind = prng.int(0, 9);
          const name = `${dir}e${i}`;
          if (kind <= 3) entries.push({ name, body: prng.chance(0.5) ? textish(prng, prng.int(0, 70_000)) : prng.bytes(prng.int(0, 70_000)) });
          // Large files, written by the unpack thread across several of the decoder's buffers.
          else if (kind === 4) entries.push({ name, body: textish(prng, prng.int(900_000, 3_200_000)) });
          // Records read after the file's data: an xattr on a large file and on a small one.
          else if (kind === 5)
            entries.push({ name, body: prng.bytes(prng.int(1_100_000, 2_000_000)), pax: { 'SCHILY.xattr.user.k': `v${i}-${prng.int(0, 1e9)}` } });
          else if (kind === 6) entries.push({ name, body: prng.bytes(prng.int(1, 5000)), pax: { 'SCHILY.xattr.user.k': `s${i}` } });
          else if (kind === 7) entries.push({ name: `${dir}${'long-name-'.repeat(12)}${i}`, body: prng.bytes(prng.int(0, 1_500_000)) });
          else if (kind === 8) entries.push({ name, type: 'symlink', linkname: `../target-${i}` });
          else if (files.length > 0) entries.push({ name, type: 'link', linkname: files[prng.int(0, files.length - 1)]! });
          if (kind <= 7) files.push(entries.at(-1)!.name);
        }
        const tar = await makeTar(entries);
        const blobPath = writeBlob(`mixed-${seed}.tgz`, zlib.gzipSync(tar, { level: 1 }));
        const viaReuse = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir(`${inflater}-${seed}`), inflater });
        const viaZlib = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir(`zlib-${seed}`), inflater: 'zlib' });
        expect(viaReuse.diffID).toBe(sha256(tar));
        expect(viaReuse.outputBuffers!.recycled).toBeGreaterThan(0);
        expect(viaZlib).not.toHaveProperty('outputBuffers');
        expect(describeTree(path.join(work, `${inflater}-${seed}`))).toEqual(describeTree(path.join(work, `zlib-${seed}`)));
      }
    });

    it('says nothing of output buffers for a decoder that allocates each one', async () => {
      const tar = await makeTar([{ name: 'f', body: 'x' }]);
      const r = await unpackLayer({
        blobPath: writeBlob('z.tgz', zlib.gzipSync(tar)),
        mediaType: MediaTypes.OCI_LAYER_GZIP,
        dest: snapshotDir('z'),
        inflater: 'zlib',
      });
      expect(r.diffID).toBe(sha256(tar));
      expect(r).not.toHaveProperty('outputBuffers');
    });
  },
);

const inflaters: ('parallel' | 'isal')[] = ['parallel', ...(isalAvailable() ? (['isal'] as const) : [])];
if (!isalAvailable()) console.log(`unpackLayer isal cases skipped: ${isalUnavailableReason()}`);

describe('unpackLayer with the parallel and the in-process ISA-L gunzip', () => {
  // Enough files and bytes that the parallel decoder cuts the blob into many chunks.
  async function bigLayer(): Promise<Buffer> {
    const entries: { name: string; body: string | Buffer }[] = [];
    const rng = new Prng(4242);
    for (let i = 0; i < 400; i++) {
      const body =
        i % 3 === 0
          ? createHash('sha256')
              .update(String(i))
              .digest()
              .toString('hex')
              .repeat(200 + i)
          : i % 3 === 1
            ? rng.bytes(8000 + i * 40)
            : Buffer.alloc(5000 + i * 37, i & 0xff);
      entries.push({ name: `d${i % 17}/f${i}`, body });
    }
    return zlib.gzipSync(await makeTar(entries));
  }

  function listTree(root: string): string[] {
    const out: string[] = [];
    const walk = (d: string) => {
      for (const name of fs.readdirSync(d).sort()) {
        const p = path.join(d, name);
        const st = fs.lstatSync(p);
        out.push(`${path.relative(root, p)} ${st.mode} ${st.isFile() ? createHash('sha256').update(fs.readFileSync(p)).digest('hex') : ''}`);
        if (st.isDirectory()) walk(p);
      }
    };
    walk(root);
    return out;
  }

  it.each(inflaters)('%s gives the same digests and tree as node:zlib, also while the blob is still arriving', async (inflater) => {
    const gz = await bigLayer();
    const blobPath = writeBlob('big.tgz', gz);
    expect(gz.length).toBeGreaterThan(1_000_000); // many chunks and many watermark steps
    const viaZlib = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir('zlib'), inflater: 'zlib' });
    const via = await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: snapshotDir('parallel'), inflater });
    expect(via.diffID).toBe(viaZlib.diffID);
    expect(via.blobDigest).toBe(sha256(gz));
    expect(via.uncompressedSize).toBe(viaZlib.uncompressedSize);
    expect(listTree(path.join(work, 'parallel'))).toEqual(listTree(path.join(work, 'zlib')));

    // The blob lands in steps behind a watermark, as a download writes it.
    const { Watermark } = await import('../content/watermark.js');
    const mark = new Watermark(gz.length);
    const following = unpackLayer({
      blobPath,
      mediaType: MediaTypes.OCI_LAYER_GZIP,
      dest: snapshotDir('follow'),
      inflater,
      follow: { watermark: mark.buffer, size: gz.length },
    });
    for (let at = 0; at < gz.length;) {
      const n = Math.min(gz.length - at, 150_000);
      mark.add(at, at + n);
      at += n;
      await new Promise((r) => setTimeout(r, 5));
    }
    const r = await following;
    expect(r.diffID).toBe(viaZlib.diffID);
    expect(listTree(path.join(work, 'follow'))).toEqual(listTree(path.join(work, 'zlib')));
  });

  it.each([...inflaters, 'zlib'] as const)(
    '%s: a followed blob is read into buffers that come back once hashed and decoded (when the decoder tells)',
    async (inflater) => {
      const body = new Prng(77).bytes(12 * 1024 * 1024 + 5000);
      const gz = zlib.gzipSync(await makeTar([{ name: 'weights.bin', body }]), { level: 1 });
      const blobPath = writeBlob('weights.tgz', gz);
      const { Watermark } = await import('../content/watermark.js');
      const mark = new Watermark(gz.length);
      mark.add(0, gz.length);
      const r = await unpackLayer({
        blobPath,
        mediaType: MediaTypes.OCI_LAYER_GZIP,
        dest: snapshotDir('recycled'),
        inflater,
        follow: { watermark: mark.buffer, size: gz.length },
      });
      expect(r.blobDigest).toBe(sha256(gz));
      expect(fs.readFileSync(path.join(work, 'recycled', 'weights.bin')).equals(body)).toBe(true);
      if (inflater === 'zlib') {
        expect(r.readBuffers).toBeUndefined();
        return;
      }
      // One read per MiB of blob, each into a buffer allocated or one that came back.
      const { allocated, recycled } = r.readBuffers!;
      expect(allocated + recycled).toBe(Math.ceil(gz.length / (1024 * 1024)));
      expect(recycled).toBeGreaterThan(0);
    },
  );

  it.each(inflaters)('%s fails a corrupt layer with INVALID_LAYER naming the layer', async (inflater) => {
    const gz = await bigLayer();
    gz[gz.length >> 1]! ^= 0x10;
    gz[(gz.length >> 1) + 1]! ^= 0x01;
    const blobPath = writeBlob('bad.tgz', gz);
    const dest = snapshotDir('bad');
    await expect(unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER_GZIP, dest, inflater })).rejects.toMatchObject({
      code: 'INVALID_LAYER',
      message: expect.stringContaining(`unpacking layer ${blobPath}`),
    });
    // Settled when it rejects: what it wrote is gone, and nothing writes there any more.
    expect(fs.readdirSync(dest)).toEqual([]);
    await new Promise((r) => setTimeout(r, 20));
    expect(fs.readdirSync(dest)).toEqual([]);
  });
});
