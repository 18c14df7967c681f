// Tests of unpackLayer: one pass computing both digests, and overlay-ready snapshots mounted for real.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MediaTypes } from '../oci/mediatypes.js';
import { unpackLayer } from './layer.js';
import { code, makeTar } from './tar.testkit.js';


const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const isRoot = process.getuid?.() === 0;


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

describe('unpackLayer', () => {
  it('returns the blob digest, the diffID and both sizes, reading the blob once', async () => {
    const tar = await makeTar([{ name: 'hello', body: 'world' }, { name: 'dir/', type: 'directory' }]);
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
  it.skipIf(!isRoot)('stacks two layers: a whiteout hides a file and an opaque dir hides the lower contents', async (ctx) => {
    const lowerTar = await makeTar([
      { name: 'a', body: 'from lower' },
      { name: 'd/', type: 'directory' },
      { name: 'd/x', body: 'lower x' },
      { name: 'keep', body: 'kept' },
    ]);
    const upperTar = await makeTar([
      { name: '.wh.a' },
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh..wh..opq' },
      { name: 'd/y', body: 'upper y' },
    ]);
    const lower = snapshotDir('lower');
    const upper = snapshotDir('upper');
    const merged = snapshotDir('merged');
    await unpackLayer({ blobPath: writeBlob('l.tgz', zlib.gzipSync(lowerTar)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: lower });
    await unpackLayer({ blobPath: writeBlob('u.tgz', zlib.gzipSync(upperTar)), mediaType: MediaTypes.OCI_LAYER_GZIP, dest: upper });
    try {
      execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${upper}:${lower}`, merged], { stdio: 'pipe' });
    } catch (e) {
      console.warn(`skipping the overlay test: mount failed: ${(e as Error).message}`);
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
