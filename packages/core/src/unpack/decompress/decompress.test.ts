// Tests of compression detection and the decompressors.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MediaTypes } from '../../oci/mediatypes.js';
import { createDecompressor, detectCompression, resolveCompression } from './decompress.js';
import { findInflater, INFLATER_PATHS } from './inflater.js';
import { isalAvailable } from './isal.js';
import { lacks } from '../../testing/needs.js';

const hasZstd = existsSync('/usr/bin/zstd');
if (!hasZstd) console.log('skipping zstd tests: /usr/bin/zstd (Debian package zstd) makes their input');

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

  it.skipIf(lacks('igzip', hasIgzip ? undefined : 'igzip (Debian isal) is not installed'))('inflates gzip with igzip when asked for it', async () => {
    const gunzip = createDecompressor('gzip', { inflater: 'igzip' });
    expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
    expect(await text(Readable.from([zlib.gzipSync('a, '), zlib.gzipSync('b')]).pipe(gunzip))).toBe('a, b');
  });

  it(`inflates gzip by default in this process, ${isalAvailable() ? 'with ISA-L (its addon is built here)' : 'with node:zlib (the ISA-L addon is not built here)'}, igzip installed or not`, async () => {
    for (const gunzip of [createDecompressor('gzip'), createDecompressor('gzip', { inflater: 'auto' })]) {
      if (isalAvailable()) expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
      else expect(gunzip).toBeInstanceOf(zlib.Gunzip);
      expect(await text(Readable.from([zlib.gzipSync('a, '), zlib.gzipSync('b')]).pipe(gunzip))).toBe('a, b');
    }
  });

  it.skipIf(lacks('pigz', hasPigz ? undefined : 'pigz is not installed'))('inflates gzip with pigz when asked for it', async () => {
    const gunzip = createDecompressor('gzip', { inflater: 'pigz' });
    expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
    expect(await text(Readable.from([zlib.gzipSync('a, '), zlib.gzipSync('b')]).pipe(gunzip))).toBe('a, b');
  });

  it('passes uncompressed bytes through', async () => {
    expect(await text(Readable.from([Buffer.from('plain')]).pipe(createDecompressor('none')))).toBe('plain');
  });

  describe.skipIf(lacks('zstd', hasZstd ? undefined : 'zstd is not installed'))('zstd', () => {
    // Two frames, as a stream compressed in pieces produces: they decode as one.
    const plain = Buffer.concat([Buffer.from('layer '.repeat(50_000)), randomBytes(300_000)]);
    const frames = Buffer.concat([zstdCompress(plain.subarray(0, 100_000)), zstdCompress(plain.subarray(100_000))]);
    const decode = async (bytes: Buffer, inflater: 'auto' | 'zlib'): Promise<Buffer> => {
      const parts: Buffer[] = [];
      const d = createDecompressor('zstd', { inflater });
      d.on('data', (c: Buffer) => parts.push(c));
      const done = new Promise<void>((resolve, reject) => {
        d.on('end', resolve);
        d.on('error', reject);
      });
      for (let i = 0; i < bytes.length; i += 65_536) d.write(bytes.subarray(i, i + 65_536));
      d.end();
      await done;
      return Buffer.concat(parts);
    };

    it('decodes multi-frame zstd with the zstd program and with the built-in decoder alike', async () => {
      expect((await decode(frames, 'auto')).equals(plain)).toBe(true);
      expect((await decode(frames, 'zlib')).equals(plain)).toBe(true);
    });

    it('fails corrupt or truncated zstd with INVALID_LAYER on both paths', async () => {
      const corrupt = Buffer.from(frames);
      corrupt.fill(0x41, 40, 400);
      for (const inflater of ['auto', 'zlib'] as const) {
        await expect(decode(corrupt, inflater)).rejects.toMatchObject({ code: 'INVALID_LAYER' });
        await expect(decode(frames.subarray(0, frames.length - 100), inflater)).rejects.toMatchObject({ code: 'INVALID_LAYER' });
      }
    });
  });
});

function zstdCompress(data: Buffer): Buffer {
  const r = spawnSync('/usr/bin/zstd', ['-q', '-c', '-3'], { input: data, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`zstd failed: ${r.stderr.toString()}`);
  return r.stdout;
}
