// Tests of the parallel gunzip's parts on their own: the chunk plan, the kept input, the member output, and guesses with the cursor driven without the stream.
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { Prng } from '../../testing/prng.js';
import { DecodeCursor } from './pargzip-cursor.js';
import { Guesses } from './pargzip-guesses.js';
import { CompressedInput } from './pargzip-input.js';
import { WINDOW, type JobResult } from './pargzip-job.js';
import { MemberOutput } from './pargzip-output.js';
import { ChunkPlan, type DecodeContext, type ParallelGunzipStats } from './pargzip-plan.js';
import { InflatePool } from './pargzip-pool.js';
import type { GzipCheckpoint } from './ztoc.js';
import { lacks } from '../../testing/needs.js';

const available = InflatePool.available();
if (!available) console.log('skipping the parallel gunzip parts: the inflate addon is not built (pnpm --filter @fastpull/core build:native)');

const zeroStats = (): ParallelGunzipStats => ({
  guessesUsed: 0,
  guessesDropped: 0,
  exactJobs: 0,
  exactBytes: 0,
  markedBytes: 0,
  eagerJobs: 0,
  eagerKnownWindow: 0,
  checkpointsUsed: 0,
  checkpointsDropped: 0,
});

describe('ChunkPlan', () => {
  it('starts chunks every `chunk` bytes, or at the checkpoints and every `chunk` bytes after the last', () => {
    expect([1, 2, 3].map((k) => new ChunkPlan([], 1000).bit(k))).toEqual([8000, 16000, 24000]);
    const cps = [
      { bit: 8 * 300 + 3, out: 5000, window: new Uint8Array(5000) },
      { bit: 8 * 900 + 1, out: 9000, window: new Uint8Array(WINDOW) },
    ];
    const plan = new ChunkPlan(cps, 1000);
    expect([1, 2, 3, 4].map((k) => plan.bit(k))).toEqual([2403, 7201, 8 * 1900, 8 * 2900]);
    expect([plan.checkpoint(2), plan.checkpoint(3)]).toEqual([cps[1], undefined]);
  });
});

describe('CompressedInput', () => {
  it('lets a reader wait for bytes, and says so, until they come, the input ends or it is closed', async () => {
    let waits = 0;
    const input = new CompressedInput(() => waits++);
    const order: string[] = [];
    void input.ready(10).then(() => order.push('10'));
    void input.ready(4).then(() => order.push('4'));
    void input.ready(100).then(() => order.push('100'));
    expect([waits, input.waiting]).toEqual([3, true]);
    input.append(Buffer.from('abcde'));
    await Promise.resolve();
    expect(order).toEqual(['4']);
    input.append(Buffer.from('fghij'));
    input.end();
    await Promise.resolve();
    expect(order.sort()).toEqual(['10', '100', '4']);
    const closed = new CompressedInput(() => undefined);
    const pending = closed.ready(1);
    closed.close();
    await pending;
    await closed.ready(50); // closed: nothing is waited for any more
  });

  it.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))(
    'copies spans across pieces, forgets whole pieces only, and says when bytes are gone',
    () => {
      const input = new CompressedInput(() => undefined);
      for (const p of ['abc', 'defg', 'hi']) input.append(Buffer.from(p));
      const out = new Uint8Array(5);
      expect(input.copy(out, 2, 7)).toBe(5);
      expect(Buffer.from(out).toString()).toBe('cdefg');
      input.forget(5); // 'abc' goes, 'defg' stays: it holds byte 5
      expect([input.kept, input.buffered]).toEqual([3, 6]);
      expect(input.copy(new Uint8Array(5), 1, 6)).toBeLessThan(5);
    },
  );
});

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))('MemberOutput', () => {
  /** A job result of the given output and member ends (the parts MemberOutput reads). */
  const job = (out16: number[], out8: string, members: number[], crcs: number[]): JobResult =>
    ({ out16: Uint16Array.from(out16), out8: Buffer.from(out8), members, crcs, startKey: 0, end: { bit: 800 } }) as unknown as JobResult;
  const crc = (s: string): number => zlib.crc32(Buffer.from(s));

  it('resolves markers against the window, checks each member, and starts the next one with no window', () => {
    const stats = zeroStats();
    const output = new MemberOutput(stats);
    expect(Buffer.concat(output.take(job([], 'hello world', [], [crc('hello world')]))).toString()).toBe('hello world');
    expect(Buffer.from(output.knownWindow()).toString()).toBe('hello world');
    expect(output.fits({ bit: 1, out: 11, window: Buffer.from('hello world') })).toBe(true);
    expect(output.fits({ bit: 1, out: 11, window: Buffer.from('hello WORLD') })).toBe(false);
    // "hello" copied from the window, then '!', and the member ends there.
    const marks = [0, 1, 2, 3, 4].map((i) => 0x8000 | (WINDOW - 11 + i));
    const parts = output.take(job([...marks, 0x21], '', [6, crc('hello worldhello!'), 17], [0, 0]));
    expect(Buffer.concat(parts).toString()).toBe('hello!');
    expect(stats.markedBytes).toBe(6);
    expect(output.knownWindow().length).toBe(0);
    // A new member cannot reach back into the last one.
    expect(() => output.take(job([0x8000 | (WINDOW - 1)], '', [], [0]))).toThrow(
      expect.objectContaining({ code: 'INVALID_LAYER', message: expect.stringContaining('invalid distance too far back') }),
    );
  });

  it("refuses a member whose CRC-32 or length is not the trailer's", () => {
    expect(() => new MemberOutput(zeroStats()).take(job([], 'data', [4, crc('data') ^ 1, 4], [crc('data'), 0]))).toThrow('incorrect data check');
    expect(() => new MemberOutput(zeroStats()).take(job([], 'data', [4, crc('data'), 5], [crc('data'), 0]))).toThrow('incorrect length check');
  });
});

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))(
  'Guesses and DecodeCursor, without the stream',
  () => {
    const pool = new InflatePool({ threads: 0 });

    /** Decodes `gz` (all written) with the parts alone, as the stream's decode loop drives them. */
    async function decode(gz: Buffer, chunk: number, checkpoints: GzipCheckpoint[] = []): Promise<{ data: Buffer; stats: ParallelGunzipStats }> {
      const owner = {};
      const stats = zeroStats();
      const input = new CompressedInput(() => undefined);
      input.append(gz);
      input.end();
      let stopped = false;
      const cap = 4 * 1024 * 1024;
      const overrun = Math.max(16 * 1024, chunk);
      const ctx: DecodeContext = {
        pool,
        owner,
        input,
        stats,
        cap,
        overrun,
        ahead: Math.max(1, pool.threads),
        plan: new ChunkPlan(checkpoints, chunk),
        stopped: () => stopped,
        copyInput: (from, to) => copy(from, to, true)!,
        tryCopyInput: (from, to) => copy(from, to, false),
      };
      function copy(from: number, to: number, force: boolean) {
        const want = Math.max(to - from, chunk + overrun);
        const lease = force ? pool.takeSlot(owner, cap, want) : pool.tryTakeSlot(owner, cap, want);
        if (lease === undefined) return undefined;
        const data = lease.slot.input.subarray(0, to - from);
        expect(input.copy(data, from, to)).toBe(to - from);
        return { data, lease };
      }
      const guesses = new Guesses(ctx);
      const output = new MemberOutput(stats);
      const cursor = new DecodeCursor(ctx, guesses, output);
      let failure: Error | undefined;
      const launching = guesses.run((e) => (failure = e));
      const out: Buffer[] = [];
      try {
        for (;;) {
          const job = await cursor.next();
          if (job === undefined) break;
          cursor.check(job.r);
          out.push(...output.take(job.r));
          pool.release(job.r);
          if (!cursor.advance(job)) break;
        }
      } finally {
        stopped = true;
        pool.drop(owner);
        guesses.wakeLauncher();
        input.close();
        await launching;
      }
      expect(failure).toBeUndefined();
      for (let i = 0; i < 400 && pool.slotsLent > 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(pool.slotsLent, 'slots left lent').toBe(0);
      return { data: Buffer.concat(out), stats };
    }

    const rng = new Prng(21);
    const text = Buffer.from(Array.from({ length: 40_000 }, () => ['alpha', 'beta', 'gamma', 'delta', '\n'][rng.int(0, 4)]).join(' '));
    const gz = Buffer.concat([zlib.gzipSync(text), zlib.gzipSync(rng.bytes(50_000)), zlib.gzipSync(text.subarray(0, 90_000))]);
    const want = zlib.gunzipSync(gz);

    it('uses guesses where the exact decode meets them and decodes exactly elsewhere, equal to zlib', async () => {
      const { data, stats } = await decode(gz, 8_000);
      expect(data.equals(want)).toBe(true);
      expect(stats.guessesUsed).toBeGreaterThan(0);
      expect(stats.exactJobs).toBeGreaterThan(0);
    });

    it('drops a checkpoint whose window does not fit, and still decodes right', async () => {
      const bogus: GzipCheckpoint = { bit: 8 * 20_000 + 5, out: 1000, window: new Uint8Array(1000) };
      const { data, stats } = await decode(gz, 8_000, [bogus]);
      expect(data.equals(want)).toBe(true);
      expect(stats.checkpointsDropped).toBe(1);
      expect(stats.checkpointsUsed).toBe(0);
    });
  },
);
