// Tests of compression detection and the decompressors.
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MediaTypes } from '../oci/mediatypes.js';
import { createDecompressor, detectCompression, resolveCompression } from './decompress.js';
import { findInflater, INFLATER_PATHS } from './inflater.js';

/** Whether `kind` is installed; prints why its tests skip when it is not. */
function installed(kind: 'igzip' | 'pigz'): boolean {
  try {
    return findInflater(kind) !== undefined;
  } catch {
    console.log(`skipping ${kind} tests: no executable at ${INFLATER_PATHS[kind].join(', ')}`);
    return false;
  }
}
const hasIgzip = installed('igzip');
const hasPigz = installed('pigz');

const gzipHead = zlib.gzipSync(Buffer.from('x')).subarray(0, 4);
const zstdHead = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
const tarHead = Buffer.from('etc/');

describe('detectCompression', () => {
  it('reads the magic bytes', () => {
    expect(detectCompression(gzipHead)).toBe('gzip');
    expect(detectCompression(zstdHead)).toBe('zstd');
    expect(detectCompression(tarHead)).toBe('none');
    expect(detectCompression(Buffer.from([0x1f]))).toBe('none');
    expect(detectCompression(Buffer.alloc(0))).toBe('none');
  });
});

describe('resolveCompression', () => {
  it('trusts the magic bytes over a layer media type', () => {
    expect(resolveCompression(MediaTypes.DOCKER_LAYER_GZIP, tarHead)).toBe('none');
    expect(resolveCompression(MediaTypes.OCI_LAYER, gzipHead)).toBe('gzip');
    expect(resolveCompression(MediaTypes.OCI_LAYER_GZIP, gzipHead)).toBe('gzip');
    expect(resolveCompression(MediaTypes.OCI_LAYER_GZIP, zstdHead)).toBe('zstd');
  });

  it('refuses a media type that is not a layer', () => {
    for (const t of [MediaTypes.OCI_CONFIG, 'application/vnd.cncf.helm.chart.content.v1.tar+gzip', '']) {
      expect(() => resolveCompression(t, gzipHead)).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_MEDIA_TYPE' }));
    }
  });
});

describe('createDecompressor', () => {
  it('inflates multi-member gzip into one stream', async () => {
    const blob = Buffer.concat([zlib.gzipSync('first member, '), zlib.gzipSync('second member, '), zlib.gzipSync('third')]);
    expect(await text(Readable.from([blob]).pipe(createDecompressor('gzip')))).toBe('first member, second member, third');
  });

  it('inflates gzip with node:zlib when asked for zlib', async () => {
    const gunzip = createDecompressor('gzip', { inflater: 'zlib' });
    expect(gunzip).toBeInstanceOf(zlib.Gunzip);
    expect(await text(Readable.from([zlib.gzipSync('via zlib')]).pipe(gunzip))).toBe('via zlib');
  });

  it.skipIf(!hasIgzip)('inflates gzip with igzip by default when it is installed', async () => {
    for (const gunzip of [createDecompressor('gzip'), createDecompressor('gzip', { inflater: 'auto' }), createDecompressor('gzip', { inflater: 'igzip' })]) {
      expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
      expect(await text(Readable.from([zlib.gzipSync('a, '), zlib.gzipSync('b')]).pipe(gunzip))).toBe('a, b');
    }
  });

  it.skipIf(!hasPigz)('inflates gzip with pigz when asked for it', async () => {
    const gunzip = createDecompressor('gzip', { inflater: 'pigz' });
    expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
    expect(await text(Readable.from([zlib.gzipSync('a, '), zlib.gzipSync('b')]).pipe(gunzip))).toBe('a, b');
  });

  it.skipIf(hasIgzip)('falls back to node:zlib by default without igzip', () => {
    expect(createDecompressor('gzip')).toBeInstanceOf(zlib.Gunzip);
  });

  it('passes uncompressed bytes through', async () => {
    expect(await text(Readable.from([Buffer.from('plain')]).pipe(createDecompressor('none')))).toBe('plain');
  });

  it('says zstd is not supported yet', () => {
    expect(() => createDecompressor('zstd')).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_MEDIA_TYPE', message: 'zstd layers are not supported yet' }));
  });
});
