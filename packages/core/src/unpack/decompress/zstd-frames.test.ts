import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { MediaTypes } from '../../oci/mediatypes.js';
import { unpackLayer } from '../layer.js';
import { makeTar } from '../tar/tar.testkit.js';
import { Prng } from '../../testing/prng.js';
import { lacks } from '../../testing/needs.js';
import { createDecompressor } from './decompress.js';
import { ZSTD_MAX_WINDOW_BYTES, ZstdFrameGuard } from './zstd-frames.js';

const hasZstd = existsSync('/usr/bin/zstd');

function zstd(input: Buffer, args: string[]): Buffer {
  const r = spawnSync('/usr/bin/zstd', ['-q', '-c', ...args], { input, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`zstd ${args.join(' ')}: ${r.stderr.toString()}`);
  return r.stdout;
}

/** Feeds `data` to a guard in chunks of random sizes (1 byte to 4 KiB). */
function guardChunks(data: Buffer, seed: number, guard = new ZstdFrameGuard()): void {
  const prng = new Prng(seed);
  for (let at = 0; at < data.length;) {
    const n = Math.min(data.length - at, prng.int(1, 4096));
    guard.check(data.subarray(at, at + n));
    at += n;
  }
}

async function decode(data: Buffer, inflater: 'auto' | 'zlib'): Promise<Buffer> {
  const stream = createDecompressor('zstd', { inflater });
  const out: Buffer[] = [];
  stream.on('data', (c: Buffer) => out.push(Buffer.from(c)));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  stream.end(data);
  await done;
  return Buffer.concat(out);
}

describe.skipIf(lacks('zstd', hasZstd ? undefined : 'zstd is not installed'))('zstd frame windows', () => {
  const prng = new Prng(7);
  const text = Buffer.from(Array.from({ length: 40_000 }, (_, i) => `line ${i} ${prng.int(0, 99)}\n`).join(''));
  const noise = Buffer.from(prng.bytes(300_000));
  const zeros = Buffer.alloc(5 * 1024 * 1024);

  it('passes what the zstd program makes: levels, checksums, several frames, skippable frames, raw and RLE blocks, any chunking', () => {
    const skippable = Buffer.concat([Buffer.from([0x50, 0x2a, 0x4d, 0x18]), Buffer.from([5, 0, 0, 0]), Buffer.from('hello')]);
    const streams = [
      zstd(text, ['-1']),
      zstd(text, ['-19', '--check']),
      zstd(noise, ['--no-check']), // incompressible: raw blocks
      zstd(zeros, ['-3']), // RLE blocks
      zstd(Buffer.alloc(0), []),
      Buffer.concat([zstd(text, ['-3']), skippable, zstd(noise, ['-1']), zstd(zeros, ['--check'])]),
    ];
    for (const [i, s] of streams.entries()) expect(() => guardChunks(s, i), `stream ${i}`).not.toThrow();
  });

  it.each(['auto', 'zlib'] as const)(
    'refuses a frame asking for a window over the limit before decoding it (%s decoder), and decodes one within it',
    async (inflater) => {
      const long = zstd(zeros, ['--long=31', '-1']);
      await expect(decode(long, inflater)).rejects.toMatchObject({
        code: 'INVALID_LAYER',
        details: { windowBytes: 2 ** 31, maxWindowBytes: ZSTD_MAX_WINDOW_BYTES },
      });
      // A second frame over the limit after a good one is caught too.
      const both = Buffer.concat([zstd(text, ['-3']), long]);
      await expect(decode(both, inflater)).rejects.toMatchObject({
        code: 'INVALID_LAYER',
        message: expect.stringMatching(/zstd frame 2 asks for a window of 2147483648 bytes/),
      });
      const within = zstd(text, ['--long=27', '-3']);
      expect((await decode(within, inflater)).equals(text)).toBe(true);
    },
  );

  it('reads the window of a single-segment frame from its content size', () => {
    // Single segment, 8-byte content size of 2^40: the window is the content.
    const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0]);
    expect(() => new ZstdFrameGuard().check(header)).toThrow(/window of 1099511627776 bytes/);
  });

  it.each(['auto', 'zlib'] as const)('passes a small single-segment frame, which the decoders read (%s decoder)', async (inflater) => {
    // Single segment with a 1-byte content size of 5, one raw last block of 5 bytes.
    const frame = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 5, 0x29, 0, 0]), Buffer.from('hello')]);
    expect(() => guardChunks(frame, 1)).not.toThrow();
    expect((await decode(frame, inflater)).toString()).toBe('hello');
  });

  it('refuses what is not zstd frames, and a reserved block type', () => {
    expect(() => new ZstdFrameGuard().check(Buffer.from('not zstd at all'))).toThrow(/no zstd frame/);
    const good = zstd(text, ['-3']);
    expect(() => guardChunks(Buffer.concat([good, Buffer.from('trailing')]), 3)).toThrow(/no zstd frame at frame 2/);
    // Frame header of 6 bytes (magic, descriptor 0, window descriptor), then a block header of type 3.
    const reserved = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x07, 0x00, 0x00]);
    expect(() => new ZstdFrameGuard().check(reserved)).toThrow(/reserved type/);
  });
});

describe.skipIf(lacks('zstd', hasZstd ? undefined : 'zstd is not installed'))(
  'decompression bombs: a layer inflates to at most maxInflateRatio times its blob',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastpull-bomb-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    let n = 0;
    const unpack = async (blob: Buffer, mediaType: string, options: { maxInflateRatio?: number; inflater?: 'auto' | 'zlib' } = {}) => {
      const blobPath = join(dir, `blob${n}`);
      const dest = join(dir, `snap${n++}`);
      writeFileSync(blobPath, blob);
      mkdirSync(dest);
      const outcome = await unpackLayer({ blobPath, mediaType, dest, ...options }).then(
        () => 'ok',
        (e: unknown) => e as { code: string; message: string; details: Record<string, unknown> },
      );
      return { outcome, dest };
    };

    it.each(['auto', 'zlib'] as const)(
      'refuses 200 MiB of zeros from a zstd blob of a few KiB (%s decoder), and unpacks it when the ratio is raised',
      async (inflater) => {
        const tar = await makeTar([{ name: 'zeros', body: Buffer.alloc(200 * 1024 * 1024) }]);
        const blob = zstd(tar, ['-19']);
        expect(blob.length * 1100).toBeLessThan(64 * 1024 * 1024); // so the bound is its 64 MiB floor
        const refused = await unpack(blob, MediaTypes.OCI_LAYER_ZSTD, { inflater });
        expect(refused.outcome).toMatchObject({ code: 'INVALID_LAYER', details: { limit: 'maxInflateRatio', max: 64 * 1024 * 1024 } });
        expect((refused.outcome as { message: string }).message).toMatch(/over the limit maxInflateRatio/);
        const allowed = await unpack(blob, MediaTypes.OCI_LAYER_ZSTD, { inflater, maxInflateRatio: 100_000 });
        expect(allowed.outcome).toBe('ok');
        expect(statSync(join(allowed.dest, 'zeros')).size).toBe(200 * 1024 * 1024);
      },
    );

    it('never stops a gzip layer, whose deflate cannot pass 1032:1', async () => {
      const tar = await makeTar([{ name: 'zeros', body: Buffer.alloc(100 * 1024 * 1024) }]);
      const blob = zlib.gzipSync(tar, { level: 9 });
      expect(tar.length / blob.length).toBeGreaterThan(1000);
      const r = await unpack(blob, MediaTypes.OCI_LAYER_GZIP);
      expect(r.outcome).toBe('ok');
      expect(readdirSync(r.dest)).toEqual(['zeros']);
    });

    it('refuses a ratio that is not a positive number', async () => {
      const blob = zstd(await makeTar([{ name: 'f', body: 'x' }]), []);
      for (const bad of [0, -1, Number.NaN])
        expect((await unpack(blob, MediaTypes.OCI_LAYER_ZSTD, { maxInflateRatio: bad })).outcome).toMatchObject({ code: 'INVALID_ARGUMENT' });
    });
  },
);
