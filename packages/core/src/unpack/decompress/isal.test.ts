// Tests of the in-process ISA-L gunzip stage, checked against node:zlib byte for byte and error for error.
import { randomBytes } from 'node:crypto';
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createDecompressor, outputReleaser, tellsInputDone } from './decompress.js';
import { chunks, layerLike } from './gzip.testkit.js';
import { findInflater } from './inflater.js';
import { createIsalGunzip, ISAL_CHUNK_SIZE, isalAvailable, isalUnavailableReason } from './isal.js';
import { nativeHash } from '../../native/addon.js';
import { InflatePool } from './pargzip.js';
import { ReadBuffers } from '../read-buffers.js';
import { pipeRecycled } from '../read-buffers.testkit.js';
import { lacks, notHere } from '../../testing/needs.js';

/** What the stage may hold for a stalled reader: its read-ahead (two output buffers) and the buffer being filled. */
const HELD_AT_MOST = 3 * ISAL_CHUNK_SIZE;

const available = isalAvailable();
if (!available) console.log(`skipping in-process ISA-L tests: ${isalUnavailableReason()}`);

const gz = (data: string | Buffer, level = 6): Buffer => zlib.gzipSync(data, { level });

async function inflateWith(stage: Transform, input: Buffer | Buffer[]): Promise<Buffer> {
  const out: Buffer[] = [];
  await pipeline(Readable.from(Array.isArray(input) ? input : [input]), stage, async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) out.push(chunk);
  });
  return Buffer.concat(out);
}

async function outcome(stage: Transform, input: Buffer | Buffer[]): Promise<{ ok: Buffer } | { error: unknown }> {
  try {
    return { ok: await inflateWith(stage, input) };
  } catch (error) {
    return { error };
  }
}

const zlibGunzip = (): Transform => zlib.createGunzip({ chunkSize: 256 * 1024 });

describe.skipIf(lacks('isal', available ? undefined : 'the in-process ISA-L addon is not built (Debian libisal-dev)')).each([
  ['decode thread', false],
  ['this thread', true],
] as const)('createIsalGunzip (%s)', (_name, sync) => {
  const isal = (chunkSize?: number): Transform => createIsalGunzip({ sync, ...(chunkSize !== undefined ? { chunkSize } : {}) });

  /**
   * Inflates `input` with isal and with node:zlib: the same bytes, or both fail, isal with INVALID_LAYER
   * and `reason` (zlib's words; any reason when not given: damaged deflate data fails at another
   * point in each decoder, so with another reason).
   */
  async function expectParity(input: Buffer | Buffer[], reason?: string): Promise<Buffer | undefined> {
    const [got, ref] = await Promise.all([outcome(isal(), input), outcome(zlibGunzip(), input)]);
    if ('ok' in ref) {
      expect('ok' in got ? got.ok.equals(ref.ok) : got.error).toBe(true);
      return ref.ok;
    }
    expect('error' in got ? got.error : 'inflated without error').toMatchObject({
      code: 'INVALID_LAYER',
      message: reason === undefined ? expect.stringMatching(/^corrupt gzip stream: isal: \S/) : `corrupt gzip stream: isal: ${reason}`,
      details: { inflater: 'isal' },
    });
    return undefined;
  }

  it('inflates concatenated members, empty ones included, into one stream', async () => {
    const blob = Buffer.concat([gz('first, '), gz(''), gz('second, '), gz('third', 1)]);
    expect((await inflateWith(isal(), blob)).toString()).toBe('first, second, third');
    expect((await inflateWith(isal(), chunks(blob, 1))).toString()).toBe('first, second, third');
    expect((await inflateWith(isal(), gz(''))).length).toBe(0);
    await expectParity(blob);
  });

  it('gives the bytes node:zlib gives, for random, text and layer-like data, any level and chunking', async () => {
    const inputs = [
      gz('hello\n'),
      gz(randomBytes(300_000), 6),
      chunks(gz(layerLike(300_000, 1), 1), 1),
      chunks(gz(layerLike(1 << 20, 2), 9), 7919),
      chunks(gz(Buffer.alloc(3 << 20, 'text of a manifest file\n'), 9), 3),
      chunks(Buffer.concat([gz(layerLike(5_000_000, 3)), gz(layerLike(3_000_000, 4), 1)]), 1 << 20),
    ];
    for (const input of inputs) expect(await expectParity(input)).toBeDefined();
  });

  it('gives the bytes node:zlib gives for a 20 MB layer-like stream in one huge chunk and in small ones', async () => {
    const data = layerLike(20_000_000, 5);
    const blob = gz(data);
    expect((await expectParity(blob))?.equals(data)).toBe(true);
    expect((await inflateWith(isal(), chunks(blob, 4096))).equals(data)).toBe(true);
  });

  it('inflates with small output buffers, one chunk expanding a thousandfold', async () => {
    const zeros = Buffer.alloc(64 << 20);
    const blob = gz(zeros, 9);
    expect(blob.length).toBeLessThan(128 << 10);
    const out = await inflateWith(isal(40_000), blob);
    expect(out.length).toBe(zeros.length);
    expect(out.equals(zeros)).toBe(true);
  });

  it('reads every gzip header field node:zlib reads, split anywhere', async () => {
    // FTEXT | FHCRC | FEXTRA | FNAME | FCOMMENT, with a correct header CRC.
    const body = zlib.deflateRawSync('with every header field');
    const head = Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0x1f, 0, 0, 0, 0, 0, 3, 4, 0]), Buffer.from('xtra'), Buffer.from('name\0comment\0')]);
    const hcrc = Buffer.alloc(2);
    hcrc.writeUInt16LE(zlib.crc32(head) & 0xffff);
    const trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(zlib.crc32('with every header field'), 0);
    trailer.writeUInt32LE(23, 4);
    const member = Buffer.concat([head, hcrc, body, trailer]);
    const blob = Buffer.concat([member, gz(' and a plain one'), member]);
    for (const size of [1, 2, 5, 13, blob.length]) {
      expect((await expectParity(chunks(blob, size)))?.toString()).toBe('with every header field and a plain onewith every header field');
    }
    const badHcrc = Buffer.from(member);
    badHcrc[head.length]! ^= 1;
    expect(await expectParity(badHcrc, 'incorrect data check (CRC-32 or length of a member)')).toBeUndefined();
  });

  it('fails on corrupt data as node:zlib does, with INVALID_LAYER', async () => {
    const good = gz(layerLike(200_000, 6));
    const corrupt = Buffer.from(good);
    corrupt.fill(0xff, 100, 110);
    const reserved = Buffer.from(good);
    reserved[3] = 0x20;
    const method = Buffer.from(good);
    method[2] = 7;
    await expectParity(corrupt);
    await expectParity(Buffer.from('not gzip at all'), 'incorrect header check');
    await expectParity(Buffer.from('x'), 'incorrect header check');
    await expectParity(reserved, 'unknown header flags set');
    await expectParity(method, 'unknown compression method');
    // The second member's magic is checked as soon as its first byte comes, before its header is whole.
    await expectParity([gz('first'), Buffer.from([0x1f, 0x8c])], 'incorrect header check');
  });

  it('checks CRC-32 and ISIZE of every member', async () => {
    const first = gz(layerLike(100_000, 11));
    const second = gz(layerLike(100_000, 12));
    for (const at of [8, 4, 1]) {
      for (const [member, prefix] of [
        [first, []],
        [second, [first]],
      ] as const) {
        const bad = Buffer.from(member);
        bad[bad.length - at]! ^= 1;
        const error = await outcome(isal(), Buffer.concat([...prefix, bad]));
        expect(error).toMatchObject({
          error: { code: 'INVALID_LAYER', message: 'corrupt gzip stream: isal: incorrect data check (CRC-32 or length of a member)' },
        });
        expect('error' in (await outcome(zlibGunzip(), Buffer.concat([...prefix, bad])))).toBe(true);
      }
    }
  });

  it('fails on a truncated stream, at any cut, as node:zlib does', async () => {
    const blob = gz(layerLike(200_000, 7));
    for (const cut of [0, 1, 2, 9, 10, 11, 100, blob.length >> 1, blob.length - 8, blob.length - 4, blob.length - 1]) {
      expect(await expectParity(blob.subarray(0, cut), 'unexpected end of file')).toBeUndefined();
      expect(await expectParity(chunks(blob.subarray(0, cut), 1000), 'unexpected end of file')).toBeUndefined();
    }
    for (const cut of [1, 5, 20, 1000, blob.length - 1]) {
      expect(await expectParity(Buffer.concat([gz('first'), blob.subarray(0, cut)]), 'unexpected end of file')).toBeUndefined();
    }
  });

  it('ignores what follows a zero byte after a member, and fails on other trailing bytes, as node:zlib does', async () => {
    const data = layerLike(100_000, 8);
    const blob = gz(data);
    for (const tail of [Buffer.alloc(1), Buffer.alloc(4096), Buffer.from('\0garbage'), Buffer.concat([Buffer.alloc(1), gz('hidden')])]) {
      expect((await expectParity(Buffer.concat([blob, tail])))?.equals(data)).toBe(true);
    }
    expect((await inflateWith(isal(), [blob, Buffer.alloc(3 << 20)])).equals(data)).toBe(true);
    await expectParity(Buffer.concat([blob, Buffer.from('garbage')]), 'incorrect header check');
  });

  it('tells when it is done with each input chunk; chunks refilled from then on change nothing', async () => {
    const raw = layerLike(4 * 1024 * 1024, 5);
    const input = gz(raw);
    const buffers = new ReadBuffers(32 * 1024, 1);
    const done = buffers.reader(0);
    let told = 0;
    const stage = createIsalGunzip({
      sync,
      onInputDone: (chunk) => {
        told += chunk.length;
        done(chunk);
      },
    });
    expect((await pipeRecycled(stage, input, buffers)).equals(raw)).toBe(true);
    expect(told).toBe(input.length);
    expect(buffers.counts.recycled).toBeGreaterThan(0);
  });

  it('keeps memory bounded when the reader stalls', async () => {
    const blob = gz(randomBytes(24 << 20), 1);
    let pulled = 0;
    const source = Readable.from(
      (function* () {
        for (const chunk of chunks(blob, 256 * 1024)) {
          pulled += chunk.length;
          yield chunk;
        }
      })(),
    );
    const stage = isal();
    const done = pipeline(source, stage, new Writable({ highWaterMark: 1, write: () => {} })); // takes one chunk, never more
    await sleep(500);
    expect(pulled).toBeLessThan(4 << 20);
    expect(stage.readableLength).toBeLessThanOrEqual(HELD_AT_MOST);
    stage.destroy();
    await expect(done).rejects.toThrow();
  });

  it('keeps memory bounded on a chunk that expands a thousandfold', async () => {
    const blob = gz(Buffer.alloc(128 << 20), 9); // about 128 KiB
    const stage = isal();
    const done = pipeline(Readable.from([blob]), stage, new Writable({ highWaterMark: 1, write: () => {} }));
    await sleep(300);
    expect(stage.readableLength).toBeLessThanOrEqual(HELD_AT_MOST);
    stage.destroy();
    await expect(done).rejects.toThrow();
  });

  it('can be destroyed while a decode call runs, and then emits nothing more', async () => {
    const blob = gz(layerLike(8 << 20, 13));
    for (let i = 0; i < 20; i++) {
      const stage = isal();
      let after = 0;
      stage.write(blob);
      stage.on('error', () => {});
      stage.on('data', () => {
        if (stage.destroyed) after++;
      });
      await sleep(i % 3);
      stage.destroy(new Error('stop'));
      await new Promise((resolve) => stage.once('close', resolve));
      expect(after).toBe(0);
    }
  });

  it('counts the CPU its decoding took, on the clock of the thread that ran it', async () => {
    const blob = gz(layerLike(24 << 20, 17));
    const stage = createIsalGunzip({ sync });
    expect(stage.cpuMs).toBe(0);
    const clock = nativeHash();
    const own0 = clock?.threadCpuNs();
    const t0 = performance.now();
    const out = await inflateWith(stage, chunks(blob, 1 << 20));
    const wall = performance.now() - t0;
    expect(out.length).toBe(24 << 20);
    const cpu = stage.cpuMs!;
    expect(cpu).toBeGreaterThan(0);
    // One thread's clock: never more than the time it existed.
    expect(cpu).toBeLessThanOrEqual(wall + 1);
    // Final once the stream has ended.
    expect(stage.cpuMs).toBe(cpu);
    // On this thread the calls are part of its own CPU.
    if (sync && clock && own0 !== undefined) expect(cpu).toBeLessThan((clock.threadCpuNs() - own0) / 1e6);
  });

  it('is a decoder createDecompressor says tells when it is done with its input, given whom to tell', () => {
    expect(tellsInputDone(createDecompressor('gzip', { inflater: 'isal', onInputDone: () => undefined }))).toBe(true);
    expect(tellsInputDone(createDecompressor('gzip', { inflater: 'isal' }))).toBe(false);
    expect(tellsInputDone(createDecompressor('gzip', { inflater: 'zlib', onInputDone: () => undefined }))).toBe(false);
  });

  it('is what createDecompressor gives for the isal choice', async () => {
    const gunzip = createDecompressor('gzip', { inflater: 'isal' });
    expect(gunzip).not.toBeInstanceOf(zlib.Gunzip);
    expect((await inflateWith(gunzip, [gz('a, '), gz('b')])).toString()).toBe('a, b');
    expect(findInflater('isal')).toBeUndefined();
  });
});

describe.skipIf(lacks('isal', available ? undefined : 'the in-process ISA-L addon is not built (Debian libisal-dev)'))(
  'createIsalGunzip with reuseOutput',
  () => {
    /**
     * Inflates `raw`'s gzip with reuseOutput, keeping every chunk the stage gives as it is (a view);
     * after each chunk, releases what `release(total so far)` says. Returns the views and the counts.
     */
    async function inflateHolding(
      raw: Buffer,
      release: (total: number) => number | undefined,
    ): Promise<{ views: Buffer[]; counts: { allocated: number; recycled: number } }> {
      const stage = createIsalGunzip({ reuseOutput: true });
      const views: Buffer[] = [];
      let total = 0;
      await pipeline(Readable.from(chunks(gz(raw, 1), 256 * 1024)), stage, async (source: AsyncIterable<Buffer>) => {
        for await (const chunk of source) {
          views.push(chunk);
          total += chunk.length;
          const upTo = release(total);
          if (upTo !== undefined) stage.releaseOutput(upTo);
          await sleep(0); // let the decode thread fill what was released meanwhile
        }
      });
      return { views, counts: stage.outputBuffers };
    }

    it('fills an output buffer again only once the reader released all of it', async () => {
      const raw = randomBytes(12 * ISAL_CHUNK_SIZE + 12345);
      // Released up to what was read a megabyte ago: the views of the last megabyte read must stay intact.
      const lag = ISAL_CHUNK_SIZE;
      const { views, counts } = await inflateHolding(raw, (total) => Math.max(0, total - lag));
      expect(counts.recycled).toBeGreaterThan(0);
      expect(counts.allocated + counts.recycled).toBeGreaterThanOrEqual(13);
      // Every byte not released is still what was decoded; the released ones were reused.
      const whole = Buffer.concat(views);
      expect(whole.length).toBe(raw.length);
      expect(whole.subarray(raw.length - lag).equals(raw.subarray(raw.length - lag))).toBe(true);
      expect(whole.equals(raw)).toBe(false);
    });

    it('reuses nothing while the reader releases nothing, and nothing behind what it released', async () => {
      const raw = randomBytes(10 * ISAL_CHUNK_SIZE);
      const kept = await inflateHolding(raw, () => undefined);
      expect(kept.counts.recycled).toBe(0);
      expect(Buffer.concat(kept.views).equals(raw)).toBe(true);
      // Released only up to the first 3 MiB: everything after stays as decoded.
      const upTo = 3 * ISAL_CHUNK_SIZE;
      const partly = await inflateHolding(raw, (total) => Math.min(total, upTo));
      expect(Buffer.concat(partly.views).subarray(upTo).equals(raw.subarray(upTo))).toBe(true);
      expect(partly.counts.recycled).toBeGreaterThan(0);
      expect(partly.counts.recycled).toBeLessThanOrEqual(3);
    });

    it('gives the bytes node:zlib gives when the reader copies and releases each chunk', async () => {
      const raw = layerLike(20 << 20, 9);
      const stage = createIsalGunzip({ reuseOutput: true });
      const out: Buffer[] = [];
      let total = 0;
      await pipeline(Readable.from(chunks(gz(raw), 1 << 20)), stage, async (source: AsyncIterable<Buffer>) => {
        for await (const chunk of source) {
          out.push(Buffer.from(chunk));
          total += chunk.length;
          stage.releaseOutput(total);
        }
      });
      expect(Buffer.concat(out).equals(raw)).toBe(true);
      // Twenty buffers' worth of output through a few buffers.
      expect(stage.outputBuffers.allocated).toBeLessThanOrEqual(6);
      expect(stage.outputBuffers.recycled).toBeGreaterThanOrEqual(14);
    });

    it('is what createDecompressor gives a release call for (as for the parallel decoder), and only with reuseOutput', () => {
      expect(outputReleaser(createDecompressor('gzip', { inflater: 'isal', reuseOutput: true }))).toBeTypeOf('function');
      expect(outputReleaser(createDecompressor('gzip', { inflater: 'isal' }))).toBeUndefined();
      expect(outputReleaser(createDecompressor('gzip', { inflater: 'zlib', reuseOutput: true }))).toBeUndefined();
      if (InflatePool.available()) {
        expect(outputReleaser(createDecompressor('gzip', { inflater: 'parallel', reuseOutput: true }))).toBeTypeOf('function');
        expect(outputReleaser(createDecompressor('gzip', { inflater: 'parallel' }))).toBeUndefined();
      }
    });
  },
);

describe.skipIf(lacks('isal', available ? undefined : 'the in-process ISA-L addon is not built (Debian libisal-dev)'))('createIsalGunzip CPU', () => {
  it('counts about the same CPU for the same stream on the decode thread as on this thread', async () => {
    const blob = gz(layerLike(24 << 20, 19));
    const run = async (sync: boolean): Promise<number> => {
      const stage = createIsalGunzip({ sync });
      await inflateWith(stage, chunks(blob, 1 << 20));
      return stage.cpuMs!;
    };
    await run(false); // warm the allocator and the page cache of the decoder's tables
    // Each mode's least CPU over alternating runs: the work itself, without what other test files running
    // beside this one add to a single run (cache misses, faults), which put one CI run at 0.29.
    let [thread, here] = [Infinity, Infinity];
    for (let i = 0; i < 3; i++) {
      thread = Math.min(thread, await run(false));
      here = Math.min(here, await run(true));
    }
    // The same work: a clock that missed the decode thread, or counted another thread, falls far out.
    expect(thread / here).toBeGreaterThan(0.33);
    expect(thread / here).toBeLessThan(3);
  });
});

describe.skipIf(notHere(available ? 'the ISA-L addon is built: this is the test of a build without it' : undefined))(
  'without the in-process ISA-L addon',
  () => {
    it('refuses the isal choice with INVALID_ARGUMENT saying why', () => {
      expect(() => createIsalGunzip()).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('libisal') }));
      expect(() => findInflater('isal')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    });
  },
);
