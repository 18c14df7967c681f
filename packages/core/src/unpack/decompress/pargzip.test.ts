// Parallel gunzip: byte-for-byte equality with node:zlib over a corpus, every chunking, and corrupt input.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { Prng } from '../../testing/prng.js';
import { nativeInflate, St, WINDOW } from './pargzip-job.js';
import { createDecompressor } from './decompress.js';
import { createParallelGunzip, InflatePool, knownTail, type ParallelGunzipOptions, type ParallelGunzipStats, type ParallelGunzipStream } from './pargzip.js';
import { ReadBuffers } from '../read-buffers.js';
import { pipeRecycled } from '../read-buffers.testkit.js';
import { lacks } from '../../testing/needs.js';

const available = InflatePool.available();
if (!available) console.log('skipping parallel gunzip tests: the inflate addon is not built (pnpm --filter @fastpull/core build:native)');
const hasPigz = existsSync('/usr/bin/pigz');
if (!hasPigz) console.log('skipping the pigz corpus entries: /usr/bin/pigz (Debian package pigz) is not installed');

// Jobs on the calling thread: deterministic and independent of the build; one test uses real threads.
const inline = new InflatePool({ threads: 0 });
const threaded = new InflatePool({ threads: 2 });
afterAll(() => threaded.close());

type Outcome = { ok: true; data: Buffer } | { ok: false; code: string; message: string };

function zlibGunzip(input: Buffer): Outcome {
  try {
    // The stream API, as the unpacker uses it: it accepts what gunzipSync does, member after member.
    return { ok: true, data: zlib.gunzipSync(input) };
  } catch (e) {
    return { ok: false, code: String((e as { code?: unknown }).code), message: (e as Error).message };
  }
}

/** Writes `input` in pieces of random size and collects the output. */
async function parallelGunzip(
  input: Buffer,
  rng: Prng,
  options: ParallelGunzipOptions & { maxWrite?: number } = {},
): Promise<{ outcome: Outcome; stats: ParallelGunzipStats }> {
  const g = createParallelGunzip({ pool: inline, ...options });
  const out: Buffer[] = [];
  const done = new Promise<Outcome>((resolve) => {
    g.on('data', (c: Buffer) => out.push(c));
    g.on('end', () => resolve({ ok: true, data: Buffer.concat(out) }));
    g.on('error', (e) => resolve({ ok: false, code: isFastpullError(e) ? e.code : 'OTHER', message: e.message }));
  });
  const maxWrite = options.maxWrite ?? 256 * 1024;
  let at = 0;
  while (at < input.length) {
    const n = Math.min(input.length - at, rng.int(1, maxWrite));
    const ok = g.write(input.subarray(at, at + n));
    at += n;
    if (!ok) await Promise.race([new Promise((r) => g.once('drain', r)), done]);
    if (g.destroyed) break;
  }
  g.end();
  const outcome = await done;
  await slotsBack(options.pool ?? inline);
  return { outcome, stats: g.stats };
}

/** Waits (boundedly) until every slot lent for a finished stream is back: none may leak, even on errors. */
async function slotsBack(pool: InflatePool): Promise<void> {
  for (let i = 0; i < 400 && pool.slotsLent > 0; i++) await new Promise((r) => setTimeout(r, 5));
  expect(pool.slotsLent, 'slots still lent after the stream finished').toBe(0);
}

async function expectSame(input: Buffer, rng: Prng, options: ParallelGunzipOptions & { maxWrite?: number } = {}): Promise<ParallelGunzipStats> {
  const want = zlibGunzip(input);
  const { outcome: got, stats } = await parallelGunzip(input, rng, options);
  if (want.ok) {
    expect(got.ok, got.ok ? '' : `parallel failed where zlib did not: ${got.message}`).toBe(true);
    if (got.ok) {
      expect(got.data.length).toBe(want.data.length);
      expect(got.data.equals(want.data)).toBe(true);
    }
  } else {
    expect(got.ok, `zlib failed (${want.message}) but the parallel decoder did not`).toBe(false);
    if (!got.ok) expect(got.code).toBe('INVALID_LAYER');
  }
  return stats;
}

function gzipWith(tool: string, args: string[], data: Buffer): Buffer {
  const r = spawnSync(tool, args, { input: data, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr.toString()}`);
  return r.stdout;
}

/** Words from a small vocabulary: compresses like text, with long matches. */
function textData(rng: Prng, n: number): Buffer {
  const words = Array.from(
    { length: 300 },
    () =>
      rng
        .bytes(rng.int(2, 9))
        .toString('base64')
        .replace(/[^a-z]/gi, '')
        .toLowerCase() || 'x',
  );
  const parts: string[] = [];
  let len = 0;
  while (len < n) {
    const w = rng.pick(words) + (rng.chance(0.1) ? '.\n' : ' ');
    parts.push(w);
    len += w.length;
  }
  return Buffer.from(parts.join('')).subarray(0, n);
}

/** Binary-like: records with counters, small integers, zero runs and some noise. */
function binaryData(rng: Prng, n: number): Buffer {
  const b = Buffer.alloc(n);
  let i = 0;
  while (i < n) {
    const kind = rng.int(0, 3);
    const len = Math.min(n - i, rng.int(16, 4096));
    if (kind === 0) b.fill(0, i, i + len);
    else if (kind === 1) for (let k = 0; k < len; k++) b[i + k] = (k * 7 + (k >> 8)) & 0xff;
    else if (kind === 2) rng.bytes(len).copy(b, i);
    else for (let k = 0; k < len; k += 4) b.writeUInt32LE((((i + k) * 2654435761) >>> 0) & 0xffff, i + k > n - 4 ? n - 4 : i + k);
    i += len;
  }
  return b;
}

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))('parallel gunzip', () => {
  it('equals node:zlib over a corpus of contents, levels and encoders, in small chunks', async () => {
    const rng = new Prng(9001);
    const contents: [string, Buffer][] = [
      ['text', textData(rng, 3_000_000)],
      ['binary', binaryData(rng, 3_000_000)],
      ['random', rng.bytes(1_500_000)],
      ['zeros', Buffer.alloc(4_000_000)],
      ['mixed', Buffer.concat([textData(rng, 800_000), rng.bytes(300_000), binaryData(rng, 900_000), Buffer.alloc(200_000)])],
    ];
    let guesses = 0;
    for (const [name, data] of contents) {
      const encodings: [string, Buffer][] = [];
      for (const level of [1, 6, 9]) encodings.push([`gzip -${level}`, gzipWith('gzip', [`-${level}`, '-c', '-n'], data)]);
      encodings.push(['zlib level 3', zlib.gzipSync(data, { level: 3 })]);
      encodings.push(['zlib fixed only', zlib.gzipSync(data, { strategy: zlib.constants.Z_FIXED })]);
      encodings.push(['zlib huffman only', zlib.gzipSync(data, { strategy: zlib.constants.Z_HUFFMAN_ONLY })]);
      encodings.push(['zlib rle', zlib.gzipSync(data, { strategy: zlib.constants.Z_RLE, level: 2 })]);
      if (hasPigz) encodings.push(['pigz', gzipWith('pigz', ['-c', '-n', '-b', '128'], data)]);
      for (const [enc, gz] of encodings) {
        const stats = await expectSame(gz, rng, { chunkSize: rng.int(20_000, 200_000) }).catch((e: unknown) => {
          throw new Error(`${name}, ${enc}: ${(e as Error).message}`);
        });
        guesses += stats.guessesUsed;
      }
    }
    // The corpus must really exercise the parallel path, not only the serial fallback.
    expect(guesses).toBeGreaterThan(100);
  });

  it('decodes gzip -1..-9 of the same content identically at random chunk sizes', async () => {
    const rng = new Prng(77);
    const data = Buffer.concat([textData(rng, 600_000), binaryData(rng, 600_000)]);
    for (let level = 1; level <= 9; level++) {
      const gz = gzipWith('gzip', [`-${level}`, '-c'], data);
      await expectSame(gz, rng, { chunkSize: rng.int(4096, 65_536), maxWrite: rng.int(1, 70_000) });
    }
  });

  it('handles tiny and empty inputs, multi-member streams, header fields and trailing zeros', async () => {
    const rng = new Prng(5);
    const member = (data: Buffer) => zlib.gzipSync(data);
    // A member with FEXTRA, FNAME, FCOMMENT and FHCRC set, built by hand around a raw deflate stream.
    const withFields = (data: Buffer) => {
      const extra = Buffer.from([4, 0, 0x41, 0x42, 1, 2]);
      const head = Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 4 | 8 | 16 | 2, 0, 0, 0, 0, 0, 3]), extra, Buffer.from('name\0comment\0')]);
      const hcrc = Buffer.alloc(2);
      hcrc.writeUInt16LE(zlib.crc32(head) & 0xffff);
      const trailer = Buffer.alloc(8);
      trailer.writeUInt32LE(zlib.crc32(data), 0);
      trailer.writeUInt32LE(data.length, 4);
      return Buffer.concat([head, hcrc, zlib.deflateRawSync(data), trailer]);
    };
    const big = textData(rng, 400_000);
    const cases: Buffer[] = [
      member(Buffer.alloc(0)),
      member(Buffer.from('a')),
      member(Buffer.from('hello world')),
      Buffer.concat([member(Buffer.from('one')), member(Buffer.alloc(0)), member(Buffer.from('three'))]),
      Buffer.concat([member(big), member(rng.bytes(100_000)), member(big.subarray(1000))]),
      Buffer.concat(Array.from({ length: 300 }, (_, i) => member(Buffer.from(`member ${i} `.repeat(i))))),
      withFields(big),
      Buffer.concat([withFields(Buffer.from('x')), member(big)]),
      Buffer.concat([member(big), Buffer.alloc(100)]),
      Buffer.concat([member(Buffer.from('z')), Buffer.alloc(4), member(Buffer.from('ignored, as zlib does'))]),
    ];
    for (const gz of cases) {
      for (const chunkSize of [1024, 5000, 65_536]) await expectSame(gz, rng, { chunkSize, maxWrite: rng.int(1, 5000) });
    }
  });

  it('goes on from mid-block states when a job reaches its output cap', async () => {
    const rng = new Prng(11);
    const data = Buffer.concat([textData(rng, 500_000), Buffer.alloc(3_000_000), binaryData(rng, 500_000)]);
    let eager = 0;
    for (const gz of [zlib.gzipSync(data), zlib.gzipSync(data, { level: 0 }), zlib.gzipSync(data, { strategy: zlib.constants.Z_FIXED })]) {
      for (const pool of [inline, threaded]) {
        const jobCap = pool === inline ? rng.int(1000, 40_000) : rng.int(60_000, 200_000);
        const stats = await expectSame(gz, rng, { pool, chunkSize: 50_000, jobCap, maxWrite: 1 << 20 });
        if (pool === inline) expect(stats.exactJobs).toBeGreaterThan(3);
        eager += stats.eagerJobs;
      }
    }
    // Continuations of guesses ran ahead of the output, on threads.
    expect(eager).toBeGreaterThan(0);
  });

  it('counts the output decoded one exact job after another: less where guesses cover their chunks than where they stop at their cap', async () => {
    const rng = new Prng(77);
    const data = textData(rng, 3_000_000);
    const gz = gzipWith('gzip', ['-6', '-c'], data);
    // Each 60 KB chunk of this text inflates to about 200 KB. Some guesses of text land on false
    // boundaries and are dropped, and their spans too are decoded by exact jobs.
    const covered = await expectSame(gz, rng, { pool: inline, chunkSize: 60_000, jobCap: 4_000_000, maxWrite: 1 << 20 });
    expect(covered.guessesUsed).toBeGreaterThan(5);
    expect(covered.exactBytes).toBeGreaterThan(0); // the first chunk, from the stream's start
    expect(covered.exactBytes).toBeLessThan(data.length / 3);
    const capped = await expectSame(gz, rng, { pool: inline, chunkSize: 60_000, jobCap: 30_000, maxWrite: 1 << 20 });
    expect(capped.exactBytes).toBeGreaterThan(data.length / 2);
    expect(capped.exactBytes).toBeLessThanOrEqual(data.length);
  });

  it("cuts a layer into chunks of the size its pass's tuning asks for (Tuning.pargzipChunk)", async () => {
    const rng = new Prng(78);
    const gz = gzipWith('gzip', ['-6', '-c'], Buffer.concat([binaryData(rng, 1_500_000), textData(rng, 1_500_000)]));
    const want = zlib.gunzipSync(gz);
    const chunks = async (tuning: { pargzipChunk?: number }): Promise<number> => {
      const stream = createDecompressor('gzip', { inflater: 'parallel', size: gz.length, tuning }) as ParallelGunzipStream;
      const out: Buffer[] = [];
      stream.on('data', (c: Buffer) => out.push(c));
      await pipeline(Readable.from([gz]), stream);
      expect(Buffer.concat(out).equals(want)).toBe(true);
      return stream.stats.guessesUsed + stream.stats.guessesDropped;
    };
    // By default a stream of this size is one chunk per 256 KiB at least; 32 KiB makes 8 times as many.
    const byDefault = await chunks({});
    const small = await chunks({ pargzipChunk: 32 * 1024 });
    expect(small).toBeGreaterThan(4 * byDefault);
  });

  it('refuses corrupt and truncated streams with INVALID_LAYER wherever zlib refuses them', async () => {
    const rng = new Prng(31337);
    const data = Buffer.concat([textData(rng, 300_000), binaryData(rng, 300_000)]);
    const gz = gzipWith('gzip', ['-6', '-c'], data);
    const bad: Buffer[] = [
      Buffer.alloc(0),
      Buffer.from('not gzip at all'),
      gz.subarray(0, 5),
      gz.subarray(0, gz.length - 1),
      gz.subarray(0, gz.length - 9),
      gz.subarray(0, gz.length >> 1),
      Buffer.concat([gz, Buffer.from('garbage')]),
      Buffer.concat([gz, Buffer.from([0x1f])]),
    ];
    // Flipped bits: in the header, the middle, the trailer's CRC and length.
    for (const at of [3, 9, 100, gz.length >> 2, gz.length >> 1, gz.length - 6, gz.length - 2]) {
      const b = Buffer.from(gz);
      b[at]! ^= 1 << rng.int(0, 7);
      bad.push(b);
    }
    for (let i = 0; i < 12; i++) {
      const b = Buffer.from(gz);
      for (let k = 0; k < 3; k++) b[rng.int(10, b.length - 1)] = rng.int(0, 255);
      bad.push(b);
    }
    let refused = 0;
    for (const b of bad) {
      await expectSame(b, rng, { chunkSize: rng.int(2000, 40_000) });
      if (!zlibGunzip(b).ok) refused++;
    }
    expect(refused).toBeGreaterThanOrEqual(bad.length - 3);
  });

  it('spreads jobs over worker threads with the same output', async () => {
    const rng = new Prng(2024);
    const data = Buffer.concat([textData(rng, 4_000_000), binaryData(rng, 4_000_000)]);
    const gz = gzipWith('gzip', ['-6', '-c'], data);
    const before = threaded.slotsCreated;
    const stats = await expectSame(gz, rng, { pool: threaded, chunkSize: 200_000, maxWrite: 1 << 20 });
    expect(stats.guessesUsed).toBeGreaterThan(5);
    // Shared slots are reused from job to job, not allocated for each.
    const jobs = stats.guessesUsed + stats.guessesDropped + stats.exactJobs + stats.eagerJobs;
    expect(threaded.slotsCreated - before).toBeLessThan(jobs / 2);
    // Small jobs: guesses stop at their cap, and their continuations start at once, with a known window.
    // (Random runs longer than the window end the markers: text alone keeps them for hundreds of KiB.)
    const runs = Buffer.concat(Array.from({ length: 60 }, () => Buffer.concat([rng.bytes(40_000), textData(rng, 80_000)])));
    const capped = await expectSame(gzipWith('gzip', ['-6', '-c'], runs), rng, { pool: threaded, chunkSize: 200_000, jobCap: 100_000, maxWrite: 1 << 20 });
    expect(capped.eagerKnownWindow).toBeGreaterThan(5);
  });

  it('tells when no job will read an input chunk again; chunks refilled from then on change nothing', async () => {
    // Large enough that the stream holds back writes until jobs are done with the bytes before.
    const raw = Buffer.concat([new Prng(3).bytes(3_000_000), Buffer.from('text of a layer '.repeat(300_000))]);
    const input = zlib.gzipSync(raw);
    for (const pool of [inline, threaded]) {
      const buffers = new ReadBuffers(16 * 1024, 1);
      const done = buffers.reader(0);
      let told = 0;
      const stage = createParallelGunzip({
        pool,
        chunkSize: 64 * 1024,
        onInputDone: (chunk) => {
          told += chunk.length;
          done(chunk);
        },
      });
      expect((await pipeRecycled(stage, input, buffers)).equals(raw)).toBe(true);
      expect(stage.stats.guessesUsed + stage.stats.exactJobs).toBeGreaterThan(4); // many jobs, each copying its span
      expect(told).toBe(input.length);
      expect(buffers.counts.recycled).toBeGreaterThan(0);
      await slotsBack(pool);
    }
  });

  it('hands back every slot when the reader stops early or the stream is destroyed', async () => {
    const rng = new Prng(404);
    const gz = gzipWith('gzip', ['-6', '-c'], Buffer.concat([textData(rng, 2_000_000), binaryData(rng, 2_000_000)]));
    for (const pool of [inline, threaded]) {
      const g = createParallelGunzip({ pool, chunkSize: 100_000 });
      g.on('error', () => undefined);
      let got = 0;
      const enough = new Promise<void>((resolve) => {
        g.on('data', (c: Buffer) => {
          got += c.length;
          if (got > 500_000) resolve();
        });
      });
      g.write(gz.subarray(0, gz.length >> 1));
      await enough;
      expect(pool.slotsLent).toBeGreaterThan(0);
      g.destroy();
      await slotsBack(pool);
    }
  });

  it('takes the window of a continuation from its guess once every byte of it is known', () => {
    const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);
    // A whole window of plain bytes: its last 32 KiB.
    const out8 = bytes(WINDOW + 100, 1);
    expect(knownTail({ out16: new Uint16Array(0), out8, members: [] })).toEqual(out8.subarray(100));
    // A member began inside the job: its bytes only, even when fewer than 32 KiB.
    const m8 = bytes(5000, 2);
    expect(knownTail({ out16: new Uint16Array(WINDOW), out8: m8, members: [WINDOW + 1000, 0, 0] })).toEqual(m8.subarray(1000));
    // Symbols without markers, then bytes: the tail spans both.
    const s16 = Uint16Array.from(bytes(WINDOW, 3));
    const tail = knownTail({ out16: s16, out8: bytes(1000, 4), members: [] })!;
    expect(tail.length).toBe(WINDOW);
    expect(tail.subarray(0, WINDOW - 1000)).toEqual(Uint8Array.from(s16.subarray(1000)));
    expect(tail.subarray(WINDOW - 1000)).toEqual(bytes(1000, 4));
    // A marker in reach, or too few bytes: unknown.
    s16[WINDOW - 10] = 0x8000 | 5;
    expect(knownTail({ out16: s16, out8: bytes(1000, 4), members: [] })).toBeNull();
    expect(knownTail({ out16: new Uint16Array(100), out8: bytes(1000, 4), members: [] })).toBeNull();
    expect(knownTail({ out16: new Uint16Array(100), out8: new Uint8Array(0), members: [] })).toBeNull();
  });

  it('computes member CRCs with the process zlib and with its own slicing-by-8 code alike', async () => {
    // The decoder uses the CRC-32 of the zlib that Node.js exports when it finds one; useZlib(false)
    // switches to its own table code. First a raw job in a fresh process each way, checking the
    // per-member CRCs against zlib.crc32.
    const addon = fileURLToPath(new URL('../../../native/build/Release/fastpull_inflate.node', import.meta.url));
    const script = `
      const zlib = require('node:zlib');
      const m = require(${JSON.stringify(addon)});
      if (process.argv[1] === 'portable') m.useZlib(false);
      const parts = [Buffer.from('alpha '.repeat(5000)), Buffer.alloc(0), Buffer.from('omega').fill(7, 2), Buffer.alloc(70000, 'q')];
      const gz = Buffer.concat(parts.map((p) => zlib.gzipSync(p)));
      const out16 = new Uint16Array(400), out8 = new Uint8Array(${WINDOW} + 200000), members = new Float64Array(4 * 8 + 1), res = new Float64Array(16);
      m.inflateJob(gz, 0, true, ${St.Member}, 0, 0, 0, 0, null, 0, 2e19, out16, out8, 199000, members, res, null);
      const n = res[14];
      const crcs = Array.from(members.subarray(3 * 8, 3 * 8 + n + 1));
      const want = parts.map((p) => zlib.crc32(p));
      const trailers = Array.from({ length: n }, (_, i) => members[3 * i + 1]);
      console.log(JSON.stringify({ zlib: m.useZlib(), status: res[0], n, ok: JSON.stringify(crcs.slice(0, n)) === JSON.stringify(want) && JSON.stringify(trailers) === JSON.stringify(want) }));
    `;
    const seen = new Set<boolean>();
    for (const portable of ['1', '']) {
      const r = spawnSync(process.execPath, ['-e', script, ...(portable ? ['portable'] : [])], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      const got = JSON.parse(r.stdout) as { zlib: boolean; status: number; n: number; ok: boolean };
      expect(got).toMatchObject({ n: 4, ok: true });
      if (portable) expect(got.zlib).toBe(false);
      seen.add(got.zlib);
    }
    const native = nativeInflate()!;
    expect(native.useZlib()).toBe(seen.has(true));
    // Then whole streams through the stream, with the table code switched on in this process: equal
    // output, and a flipped CRC or length refused.
    const was = native.useZlib();
    try {
      expect(native.useZlib(false)).toBe(false);
      const rng = new Prng(8);
      const gz = Buffer.concat([zlib.gzipSync(textData(rng, 300_000)), zlib.gzipSync(rng.bytes(70_000)), zlib.gzipSync(binaryData(rng, 200_000))]);
      await expectSame(gz, rng, { chunkSize: 30_000 });
      for (const at of [gz.length - 7, gz.length - 3]) {
        const bad = Buffer.from(gz);
        bad[at]! ^= 0x10;
        await expectSame(bad, rng, { chunkSize: 30_000 });
        expect(zlibGunzip(bad).ok).toBe(false);
      }
    } finally {
      native.useZlib(was);
    }
  });
});

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))('createParallelGunzip with reuseOutput', () => {
  /**
   * Gunzips `gz` with reuseOutput on real threads, keeping every chunk the stream gives as it is (a
   * view); after each chunk, releases what `release(total so far)` says.
   */
  async function inflateHolding(gz: Buffer, release: (total: number) => number | undefined, pool: InflatePool = threaded) {
    const g = createParallelGunzip({ pool, reuseOutput: true, chunkSize: 256 * 1024, size: gz.length });
    const views: Buffer[] = [];
    let total = 0;
    let released = 0;
    // Views not released yet whose bytes changed, seen after each chunk (none may).
    let changed = 0;
    const done = new Promise<void>((resolve, reject) => {
      g.on('data', (c: Buffer) => {
        views.push(c);
        total += c.length;
        const upTo = release(total);
        if (upTo !== undefined) {
          g.releaseOutput(upTo);
          released = Math.max(released, upTo);
        }
        let end = total;
        for (let i = views.length - 1; i >= 0 && end > released; i--) {
          const v = views[i]!;
          if (!v.equals(raw.subarray(end - v.length, end))) changed++;
          end -= v.length;
        }
      });
      g.on('end', resolve);
      g.on('error', reject);
    });
    for (let at = 0; at < gz.length; at += 300_000) {
      if (!g.write(gz.subarray(at, at + 300_000))) await Promise.race([new Promise((r) => g.once('drain', r)), done]);
    }
    g.end();
    await done;
    await slotsBack(pool);
    return { views, counts: g.outputBuffers, stats: g.stats, changed };
  }

  // Text: guesses start mid-stream with matches reaching into the window they do not know, so part of
  // each chunk's output comes as markers, resolved piece by piece into the same buffers as the bytes.
  const raw = textData(new Prng(61), 12 << 20);
  const gz = zlib.gzipSync(raw, { level: 6 });

  it("fills an output buffer again only once the reader released all of it, the markers' pieces and the bytes' alike", async () => {
    // Released up to what was read a megabyte ago: the views of the last megabyte read must stay intact.
    const lag = 1 << 20;
    const { views, counts, stats, changed } = await inflateHolding(gz, (total) => Math.max(0, total - lag));
    expect(changed).toBe(0);
    expect(stats.guessesUsed).toBeGreaterThan(0);
    expect(stats.markedBytes).toBeGreaterThan(0);
    expect(counts.recycled).toBeGreaterThan(0);
    expect(views.every((v) => v.length <= 256 * 1024)).toBe(true);
    const whole = Buffer.concat(views);
    expect(whole.length).toBe(raw.length);
    // Every byte not released is still what was decoded; the released ones were filled again.
    expect(whole.subarray(raw.length - lag).equals(raw.subarray(raw.length - lag))).toBe(true);
    expect(whole.equals(raw)).toBe(false);
  });

  it('reuses nothing while the reader releases nothing, nor anything behind what it released', async () => {
    const kept = await inflateHolding(gz, () => undefined);
    expect(kept.changed).toBe(0);
    expect(kept.counts.recycled).toBe(0);
    expect(Buffer.concat(kept.views).equals(raw)).toBe(true);
    const upTo = 3 << 20;
    const partly = await inflateHolding(gz, (total) => Math.min(total, upTo));
    expect(partly.changed).toBe(0);
    expect(Buffer.concat(partly.views).subarray(upTo).equals(raw.subarray(upTo))).toBe(true);
    expect(partly.counts.recycled).toBeGreaterThan(0);
    // At most the buffers (a view each) whose bytes all lie in the first 3 MiB.
    let end = 0;
    const behind = partly.views.filter((v) => (end += v.length) <= upTo).length;
    expect(partly.counts.recycled).toBeLessThanOrEqual(behind);
  });

  it('gives the bytes node:zlib gives when the reader copies and releases each chunk, through a few buffers', async () => {
    const rng = new Prng(62);
    const mixed = Buffer.concat([textData(rng, 5 << 20), binaryData(rng, 4 << 20), rng.bytes(2 << 20), textData(rng, 3 << 20)]);
    const gzMixed = Buffer.concat([zlib.gzipSync(mixed.subarray(0, 9 << 20), { level: 1 }), zlib.gzipSync(mixed.subarray(9 << 20), { level: 9 })]);
    for (const pool of [threaded, inline]) {
      const copied: Buffer[] = [];
      const g = createParallelGunzip({ pool, reuseOutput: true, chunkSize: 256 * 1024, size: gzMixed.length });
      let pushed = 0;
      g.on('data', (c: Buffer) => {
        copied.push(Buffer.from(c));
        pushed += c.length;
        g.releaseOutput(pushed);
      });
      const ended = new Promise<void>((resolve, reject) => {
        g.on('end', resolve);
        g.on('error', reject);
      });
      g.end(gzMixed);
      await ended;
      expect(Buffer.concat(copied).equals(mixed)).toBe(true);
      // 14 MiB of output, 56 pieces, through the buffers a job's output takes at once and a few more.
      expect(g.outputBuffers.allocated + g.outputBuffers.recycled).toBeGreaterThanOrEqual(56);
      expect(g.outputBuffers.recycled).toBeGreaterThan(g.outputBuffers.allocated);
    }
  });
});
