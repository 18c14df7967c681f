// Tests of HashTap: the pool SHA-256 gives node:crypto's digests over any chunking, holds the stream back at its bound, and leaves no work behind when a stream is cut.
import { createHash } from 'node:crypto';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Prng } from '../testing/prng.js';
import { defaultHashMode, HashTap, type HashMode } from './hash-tap.js';
import { nativeHash } from '../native/addon.js';
import { ReadBuffers } from './read-buffers.js';
import { pipeRecycled } from './read-buffers.testkit.js';
import { lacks } from '../testing/needs.js';

const hasPool = nativeHash() !== undefined;
if (!hasPool) console.warn('hash-tap.test: the native addon has no pool SHA-256 here: pool tests skipped (pnpm --filter @fastpull/core build:native)');

const sha256 = (chunks: readonly Uint8Array[]): string => {
  const h = createHash('sha256');
  for (const c of chunks) h.update(c);
  return `sha256:${h.digest('hex')}`;
};

/** Runs the chunks through a tap into a sink that keeps them; the tap's result and what came out. */
async function through(chunks: readonly Buffer[], mode: HashMode, queueBytes?: number) {
  const tap = new HashTap({ mode, ...(queueBytes !== undefined ? { queueBytes } : {}) });
  const out: Buffer[] = [];
  let maxPending = 0;
  await pipeline(
    Readable.from(chunks, { objectMode: false }),
    tap,
    new Writable({
      write(chunk: Buffer, _e, cb) {
        maxPending = Math.max(maxPending, tap.pendingBytes);
        out.push(chunk);
        cb();
      },
    }),
  );
  return { tap, result: await tap.result(), out: Buffer.concat(out), maxPending };
}

/** `data` cut at the given sizes (the rest as one last chunk), zero-length pieces included. */
function cut(data: Buffer, sizes: readonly number[]): Buffer[] {
  const chunks: Buffer[] = [];
  let at = 0;
  for (const n of sizes) {
    chunks.push(data.subarray(at, Math.min(data.length, at + n)));
    at = Math.min(data.length, at + n);
  }
  if (at < data.length) chunks.push(data.subarray(at));
  return chunks;
}

describe('HashTap', () => {
  it('defaults to the pool where the addon has it', () => {
    expect(new HashTap().mode).toBe(hasPool ? 'pool' : 'inline');
    expect(new HashTap({ mode: 'inline' }).mode).toBe('inline');
    expect(defaultHashMode()).toBe(hasPool ? 'pool' : 'inline');
  });

  it.skipIf(lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built'))(
    'gives node:crypto digests and passes every byte on, pool and inline, over random chunkings',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.uint8Array({ minLength: 0, maxLength: 200_000 }),
          fc.array(fc.integer({ min: 0, max: 70_000 }), { maxLength: 40 }),
          fc.integer({ min: 1, max: 300_000 }),
          async (bytes, sizes, queueBytes) => {
            const data = Buffer.from(bytes);
            const chunks = cut(data, sizes);
            const want = sha256([data]);
            for (const mode of ['pool', 'inline'] as const) {
              const { tap, result, out } = await through(chunks, mode, queueBytes);
              expect(tap.mode).toBe(mode);
              expect(result.digest).toBe(want);
              expect(result.bytes).toBe(data.length);
              expect(out.equals(data)).toBe(true);
              expect(tap.pendingBytes).toBe(0);
            }
          },
        ),
        { numRuns: 60 },
      );
    },
  );

  it.skipIf(lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built'))(
    'hashes empty input and thousands of odd-sized chunks as node:crypto does',
    async () => {
      expect((await through([], 'pool')).result.digest).toBe(sha256([]));
      expect((await through([Buffer.alloc(0), Buffer.alloc(0)], 'pool')).result.digest).toBe(sha256([]));
      const prng = new Prng(7);
      const chunks = Array.from({ length: 3000 }, (_, i) => prng.bytes(1 + ((i * 7919) % 4099)));
      const r = await through(chunks, 'pool');
      expect(r.result.digest).toBe(sha256(chunks));
      expect(r.result.cpuMs).toBeGreaterThan(0);
    },
  );

  it.for(['pool', 'inline'] as const)(
    '%s: tells when it has hashed each chunk; chunks refilled from then on change neither digest nor output',
    async (mode, ctx) => {
      if (mode === 'pool' && lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built')) ctx.skip();
      const data = new Prng(11).bytes(3 * 1024 * 1024 + 12_345);
      const buffers = new ReadBuffers(64 * 1024, 2);
      const hashed = buffers.reader(0);
      const told: number[] = [];
      const tap = new HashTap({
        mode,
        queueBytes: 512 * 1024,
        onHashed: (chunk) => {
          told.push(chunk.length);
          hashed(chunk);
        },
      });
      const out = await pipeRecycled(tap, data, buffers, buffers.reader(1));
      expect(out.equals(data)).toBe(true);
      expect((await tap.result()).digest).toBe(sha256([data]));
      expect(told).toEqual(Array.from({ length: Math.ceil(data.length / (64 * 1024)) }, (_, i) => Math.min(64 * 1024, data.length - i * 64 * 1024)));
      expect(buffers.counts.recycled).toBeGreaterThan(0);
    },
  );

  it.skipIf(lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built'))(
    'holds the stream back once more than its bound waits to be hashed',
    async () => {
      const chunk = 256 * 1024;
      const chunks = Array.from({ length: 256 }, (_, i) => Buffer.alloc(chunk, i)); // 64 MiB
      const { result, maxPending } = await through(chunks, 'pool', 1024 * 1024);
      expect(result.digest).toBe(sha256(chunks));
      // One write may land past the bound before the tap holds the next one back.
      expect(maxPending).toBeLessThanOrEqual(1024 * 1024 + chunk);
    },
  );

  it.skipIf(lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built'))(
    'leaves no batch on the pool and no digest when the stream fails or is aborted midway',
    async () => {
      for (const how of ['error', 'abort'] as const) {
        const tap = new HashTap({ mode: 'pool' });
        const controller = new AbortController();
        async function* source() {
          for (let i = 0; i < 64; i++) {
            yield Buffer.alloc(1024 * 1024, i);
            if (i === 20) {
              if (how === 'error') throw new Error('the source broke');
              controller.abort(new Error('stopped'));
            }
          }
        }
        await expect(pipeline(Readable.from(source()), tap, new PassThrough().resume(), { signal: controller.signal })).rejects.toThrow(
          how === 'error' ? 'the source broke' : /abort/i,
        );
        await tap.settled();
        expect(tap.busy).toBe(false);
        expect(tap.pendingBytes).toBe(0);
        await expect(tap.result()).rejects.toMatchObject({ code: 'INTERNAL' });
      }
    },
  );
});

describe.skipIf(lacks('addon', hasPool ? undefined : 'the native addon (SHA-256) is not built'))('the addon SHA-256', () => {
  it('refuses a second batch while one runs and updates after the digest', async () => {
    const lib = nativeHash()!;
    const h = lib.sha256Create()!;
    const done = new Promise<number>((resolve, reject) => lib.sha256Update(h, [Buffer.alloc(1 << 20, 1)], (e, ns) => (e ? reject(e) : resolve(ns))));
    expect(() => lib.sha256Update(h, [Buffer.alloc(1)], () => undefined)).toThrow(TypeError);
    expect(() => lib.sha256Digest(h)).toThrow(TypeError);
    expect(await done).toBeGreaterThanOrEqual(0);
    expect(`sha256:${lib.sha256Digest(h).toString('hex')}`).toBe(sha256([Buffer.alloc(1 << 20, 1)]));
    expect(() => lib.sha256Update(h, [Buffer.alloc(1)], () => undefined)).toThrow(TypeError);
    expect(() => lib.sha256Update(lib.sha256Create()!, ['text' as unknown as Uint8Array], () => undefined)).toThrow(TypeError);
  });

  it("reads a thread CPU clock that counts work on this thread and not the pool's", async () => {
    const lib = nativeHash()!;
    const t0 = lib.threadCpuNs();
    createHash('sha256')
      .update(Buffer.alloc(32 << 20))
      .digest();
    const t1 = lib.threadCpuNs();
    expect(t1 - t0).toBeGreaterThan(1e6);
    const poolNs = await new Promise<number>((resolve, reject) =>
      lib.sha256Update(lib.sha256Create()!, [Buffer.alloc(64 << 20)], (e, ns) => (e ? reject(e) : resolve(ns))),
    );
    expect(poolNs).toBeGreaterThan(1e6);
    expect(lib.threadCpuNs() - t1).toBeLessThan(poolNs / 2);
  });
});
