// zTOC parsing and checkpoint-driven parallel gunzip: checkpoints made by fastpull's decoder are valid
// places to start, survive encoding as a zTOC, and a parallel gunzip given them uses them, and only
// when they fit the stream.
import { spawnSync } from 'node:child_process';
import zlib from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { Prng } from '../../testing/prng.js';
import { buildGzipCheckpoints, encodeZinfo, encodeZtoc } from '../../testing/ztoc.js';
import { nativeInflate, St, Status, WINDOW } from './pargzip-job.js';
import { createParallelGunzip, InflatePool, type ParallelGunzipOptions, type ParallelGunzipStats } from './pargzip.js';
import { parseZinfo, parseZtoc, type GzipCheckpoint } from './ztoc.js';
import { lacks } from '../../testing/needs.js';

const available = InflatePool.available();
const inline = new InflatePool({ threads: 0 });
const threaded = new InflatePool({ threads: 2 });
afterAll(() => threaded.close());

function layerLike(rng: Prng, n: number): Buffer {
  const parts: Buffer[] = [];
  let len = 0;
  while (len < n) {
    const k = rng.int(0, 2);
    const size = rng.int(10_000, 200_000);
    if (k === 0) parts.push(Buffer.from(Array.from({ length: size / 6 }, () => rng.pick(['alpha', 'beta', 'gamma', 'delta', 'omega', 'pi'])).join(' ')));
    else if (k === 1) parts.push(rng.bytes(size));
    else parts.push(Buffer.from(Uint8Array.from({ length: size }, (_, i) => (i * 7 + (i >> 9)) & 0xff)));
    len += parts.at(-1)!.length;
  }
  return Buffer.concat(parts).subarray(0, n);
}

function gzip(data: Buffer): Buffer {
  const r = spawnSync('gzip', ['-6', '-c', '-n'], { input: data, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`gzip failed: ${r.stderr.toString()}`);
  return r.stdout;
}

async function gunzip(gz: Buffer, options: ParallelGunzipOptions): Promise<{ data: Buffer; stats: ParallelGunzipStats }> {
  const g = createParallelGunzip(options);
  const out: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    g.on('data', (c: Buffer) => out.push(c));
    g.on('end', resolve);
    g.on('error', reject);
  });
  // A stream that fails never drains: its error ends the wait.
  for (let at = 0; at < gz.length; at += 300_000)
    if (!g.write(gz.subarray(at, at + 300_000))) await Promise.race([new Promise((r) => g.once('drain', r)), done]);
  g.end();
  await done;
  return { data: Buffer.concat(out), stats: g.stats };
}

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))('gzip checkpoints (SOCI zTOC)', () => {
  const rng = new Prng(1234);
  const data = layerLike(rng, 6_000_000);
  const gz = gzip(data);
  const checkpoints = buildGzipCheckpoints(gz, 400_000);

  it('are block boundaries from which the rest of the member decodes, with their windows', () => {
    expect(checkpoints.length).toBeGreaterThan(8);
    expect(checkpoints[0]).toMatchObject({ bit: 80, out: 0 });
    const native = nativeInflate()!;
    for (const cp of checkpoints.filter((_, i) => i % 3 === 1)) {
      expect(cp.window).toEqual(new Uint8Array(data.subarray(Math.max(0, cp.out - WINDOW), cp.out)));
      const cap = data.length - cp.out + 1000;
      const out8 = new Uint8Array(WINDOW + cap + 300);
      const res = new Float64Array(16);
      native.inflateJob(gz, 0, true, St.Block, cp.bit, 0, 0, 0, null, 0, 2e19, new Uint16Array(400), out8, cap, new Float64Array(33), res, cp.window);
      expect(res[0]).toBe(Status.End);
      expect(Buffer.from(out8.subarray(WINDOW, WINDOW + res[11]!)).equals(data.subarray(cp.out))).toBe(true);
    }
  });

  it('survive a zTOC round trip, zinfo versions 1 and 2', () => {
    for (const zinfoVersion of [1, 2] as const) {
      const blob = encodeZtoc({ checkpoints, spanSize: 400_000, compressedSize: gz.length, uncompressedSize: data.length, version: '1.0', zinfoVersion });
      const z = parseZtoc(blob);
      expect(z).toMatchObject({
        version: '1.0',
        buildTool: 'fastpull test',
        compressedSize: gz.length,
        uncompressedSize: data.length,
        algorithm: 1,
        spanSize: 400_000,
      });
      expect(z.checkpoints.length).toBe(checkpoints.length);
      // Parsed from a Buffer (whose slice is a view), each window still has a buffer of its own: a
      // view would take the whole zTOC along to the decode thread with every job.
      const fromBuffer = parseZtoc(Buffer.from(blob)).checkpoints;
      for (const c of fromBuffer) expect(c.window.buffer.byteLength).toBe(c.window.length);
      z.checkpoints.forEach((c, i) => {
        expect(c.bit).toBe(checkpoints[i]!.bit);
        expect(c.out).toBe(checkpoints[i]!.out);
        expect(Buffer.from(c.window).equals(Buffer.from(checkpoints[i]!.window))).toBe(true);
      });
    }
  });

  it('refuse malformed zTOCs with INVALID_MANIFEST and nothing else', () => {
    const blob = encodeZtoc({ checkpoints: checkpoints.slice(0, 3) });
    const rng2 = new Prng(77);
    const tries: Uint8Array[] = [new Uint8Array(0), blob.subarray(0, 10), blob.subarray(0, blob.length - 1)];
    for (let i = 0; i < 300; i++) {
      const b = Uint8Array.from(blob);
      // Flip bytes in the FlatBuffers part and in the checkpoints' headers, where structure lives.
      for (let k = 0; k < rng2.int(1, 3); k++) b[rng2.int(0, Math.min(b.length - 1, 200))] = rng2.int(0, 255);
      tries.push(b);
    }
    let refused = 0;
    for (const b of tries) {
      try {
        parseZtoc(b);
      } catch (e) {
        expect(isFastpullError(e) && e.code === 'INVALID_MANIFEST', String(e)).toBe(true);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(3);
    // Out of order, or bits beyond a byte.
    const swapped = [checkpoints[0]!, checkpoints[2]!, checkpoints[1]!];
    expect(() => parseZinfo(encodeZinfo(swapped, 1))).toThrow(/not after/);
    const z = encodeZinfo(checkpoints.slice(0, 2), 1);
    z[12 + 16] = 9;
    expect(() => parseZinfo(z)).toThrow(/9 bits/);
  });

  it('start the parallel decode at the checkpoints, without guessing', async () => {
    for (const pool of [inline, threaded]) {
      const { data: out, stats } = await gunzip(gz, { pool, checkpoints });
      expect(out.equals(data)).toBe(true);
      expect(stats.checkpointsUsed).toBe(checkpoints.length - 1); // all but the one at the start
      expect(stats.checkpointsDropped).toBe(0);
      expect(stats.markedBytes).toBe(0);
    }
    // Through the zTOC encoding too.
    const parsed = parseZtoc(encodeZtoc({ checkpoints, zinfoVersion: 1 })).checkpoints;
    const { data: out, stats } = await gunzip(gz, { pool: threaded, checkpoints: parsed });
    expect(out.equals(data)).toBe(true);
    expect(stats.checkpointsUsed).toBe(checkpoints.length - 1);
  });

  it('decode past checkpoints that do not fit the stream, with the same output', async () => {
    const bent = (i: number, f: (c: GzipCheckpoint) => GzipCheckpoint) => checkpoints.map((c, k) => (k === i ? f(c) : c));
    const wrongWindow = bent(3, (c) => {
      const w = Uint8Array.from(c.window);
      w[100]! ^= 1;
      return { ...c, window: w };
    });
    // (Not a bit or two: inside a stored block's header those name the same block.)
    const wrongBit = bent(4, (c) => ({ ...c, bit: c.bit + 64 }));
    const wrongOut = bent(5, (c) => ({ ...c, out: c.out + 1, window: c.window }));
    for (const cps of [wrongWindow, wrongBit, wrongOut]) {
      const { data: out, stats } = await gunzip(gz, { pool: threaded, checkpoints: cps });
      expect(out.equals(data)).toBe(true);
      expect(stats.checkpointsUsed).toBeLessThan(checkpoints.length - 1);
    }
    // A checkpoint whose window was tampered with is never used, even though its place is right.
    const { stats } = await gunzip(gz, { pool: inline, checkpoints: wrongWindow });
    expect(stats.checkpointsDropped).toBe(1);
    // Another stream's checkpoints: nothing fits, the output is still this stream's.
    const other = gzip(layerLike(new Prng(9), 3_000_000));
    const { data: out2 } = await gunzip(other, { pool: threaded, checkpoints });
    expect(out2.equals(zlib.gunzipSync(other))).toBe(true);
  });

  it('cover the first member; later members are decoded as usual', async () => {
    const second = layerLike(new Prng(5), 1_500_000);
    const both = Buffer.concat([gz, gzip(second)]);
    const { data: out, stats } = await gunzip(both, { pool: threaded, checkpoints });
    expect(out.equals(Buffer.concat([data, second]))).toBe(true);
    expect(stats.checkpointsUsed).toBe(checkpoints.length - 1);
  });
});
