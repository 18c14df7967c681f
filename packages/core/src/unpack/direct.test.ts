// Tests of direct.ts: large files written with O_DIRECT, byte for byte as a buffered write would,
// whatever the pieces the stream gives, with the fallback where the kernel refuses.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer } from './apply.js';
import { isRoot, makeSandbox, removeSandbox } from './apply.testkit.js';
import { Worker } from 'node:worker_threads';
import { DIRECT_BUDGET, DIRECT_CHUNK, DIRECT_DEPTH, DIRECT_MIN, DIRECT_MIN_FLOOR, directBudgetWorkerData, directBuffersHeld, directIo, type DirectIo, DirectWriter, directSize, type WriteAt } from './direct.js';
import { compiledWorker } from './pool.js';
import { chunksOf, code, makeTar } from './tar.testkit.js';
import { lacks, lacksRoot } from '../testing/needs.js';

const O_DIRECT = fs.constants.O_DIRECT;
// Direct writes are opt-in; the worker thread below inherits this environment.
process.env.FASTPULL_DIRECT_WRITES = '1';
const calls = directIo();
// The addon is built by the test command; without it there is nothing of this file to test.
const withAddon = describe.skipIf(lacks('addon', calls === undefined ? 'the native addon (direct I/O) is not built' : undefined));

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

/** The fd's open flags as the kernel has them now (/proc/self/fdinfo, octal). */
function fdFlags(fd: number): number {
  const m = /^flags:\s+([0-7]+)$/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
  return parseInt(m![1]!, 8);
}

/** Deterministic bytes that differ at every offset a bug could shift. */
function pattern(size: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

/** Writes `data` in pieces of the given sizes (cycled) through a DirectWriter; the file's content. */
async function writeThrough(
  io: DirectIo,
  file: string,
  data: Buffer,
  pieces: readonly number[],
  write?: WriteAt,
): Promise<{ content: Buffer; direct: boolean; flagsWhile: number; flagsAfter: number }> {
  const fd = fs.openSync(file, 'wx', 0o600);
  let flagsWhile = 0;
  let flagsAfter = 0;
  let w: DirectWriter | undefined;
  try {
    w = new DirectWriter(io, fd, write);
    flagsWhile = fdFlags(fd);
    let at = 0;
    for (let i = 0; at < data.length; i++) {
      const n = Math.min(pieces[i % pieces.length]!, data.length - at);
      // A fresh copy each time, overwritten once add is done: the writer may not keep a view of it.
      const piece = Buffer.from(data.subarray(at, at + n));
      const wait = w.add(piece);
      if (wait !== undefined) await wait;
      piece.fill(0xee);
      at += n;
    }
    await w.end(data.length);
    flagsAfter = fdFlags(fd);
  } finally {
    await w?.settle();
    fs.closeSync(fd);
  }
  return { content: fs.readFileSync(file), direct: w.isDirect, flagsWhile, flagsAfter };
}

withAddon('DirectWriter', () => {
  it('writes the exact bytes past the page cache, with a tail that is not a whole block', async () => {
    const size = 3 * DIRECT_CHUNK + 12_345;
    const data = pattern(size, 7);
    const r = await writeThrough(calls!, path.join(sandbox, 'f'), data, [100_000, 1, 4096, 777_777]);
    expect(r.flagsWhile & O_DIRECT).toBe(O_DIRECT);
    expect(r.direct).toBe(true);
    expect(r.content.length).toBe(size);
    expect(r.content.equals(data)).toBe(true);
  });

  it('writes sizes around the chunk and block boundaries, in any pieces (property)', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(1, 4095, 4096, 4097, DIRECT_CHUNK - 1, DIRECT_CHUNK, DIRECT_CHUNK + 1, DIRECT_DEPTH * DIRECT_CHUNK + 5000),
        fc.array(fc.integer({ min: 1, max: 3 * DIRECT_CHUNK }), { minLength: 1, maxLength: 5 }),
        async (size, pieces) => {
          const data = pattern(size, size + pieces.length);
          const r = await writeThrough(calls!, path.join(sandbox, `p${n++}`), data, pieces);
          expect(r.direct).toBe(true);
          expect(r.content.equals(data)).toBe(true);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('keeps at most DIRECT_DEPTH writes in flight and the buffers for the next file', async () => {
    // More than the depth in one add: it has to wait for the first buffers' writes, and still lands every byte.
    const data = pattern((2 * DIRECT_DEPTH + 1) * DIRECT_CHUNK + 1, 3);
    const r = await writeThrough(calls!, path.join(sandbox, 'big'), data, [data.length]);
    expect(r.content.equals(data)).toBe(true);
    const again = await writeThrough(calls!, path.join(sandbox, 'again'), data, [DIRECT_CHUNK / 2]);
    expect(again.content.equals(data)).toBe(true);
  });

  it('goes on buffered when the filesystem refuses a direct write with EINVAL', async () => {
    // The second direct write is refused as a filesystem would refuse an alignment it cannot take.
    let direct = 0;
    const refusing: WriteAt = (fd, buf, length, position) => {
      if ((fdFlags(fd) & O_DIRECT) !== 0 && ++direct === 2) return Promise.reject(Object.assign(new Error('EINVAL: invalid argument, write'), { code: 'EINVAL', syscall: 'write' }));
      return new Promise((resolve, reject) => fs.write(fd, buf, 0, length, position, (err, n) => (err ? reject(err) : resolve(n))));
    };
    const data = pattern(DIRECT_DEPTH * DIRECT_CHUNK + 999, 11);
    const r = await writeThrough(calls!, path.join(sandbox, 'refused'), data, [65_536], refusing);
    expect(direct).toBeGreaterThanOrEqual(2);
    expect(r.flagsWhile & O_DIRECT).toBe(O_DIRECT);
    expect(r.flagsAfter & O_DIRECT).toBe(0);
    expect(r.direct).toBe(false);
    expect(r.content.equals(data)).toBe(true);
  });

  it('writes buffered from the start where the filesystem has no direct I/O', async () => {
    const none: DirectIo = { alignSkip: (b, a) => calls!.alignSkip(b, a), setDirectIo: () => false };
    const data = pattern(DIRECT_CHUNK + 1, 5);
    const r = await writeThrough(none, path.join(sandbox, 'none'), data, [300_000]);
    expect(r.flagsWhile & O_DIRECT).toBe(0);
    expect(r.direct).toBe(false);
    expect(r.content.equals(data)).toBe(true);
  });

  it('fails on a write error, and settle() still waits for every write before the fd may close', async () => {
    // A read-only fd: the kernel answers every write with EBADF.
    const file = path.join(sandbox, 'ro');
    fs.writeFileSync(file, '');
    const fd = fs.openSync(file, 'r');
    const w = new DirectWriter(calls!, fd);
    let failure: unknown;
    try {
      for (let i = 0; i < 3 * DIRECT_DEPTH; i++) {
        const wait = w.add(Buffer.alloc(DIRECT_CHUNK, i));
        if (wait !== undefined) await wait;
      }
      await w.end(3 * DIRECT_DEPTH * DIRECT_CHUNK);
    } catch (err) {
      failure = err;
    } finally {
      await w.settle();
      fs.closeSync(fd);
    }
    expect((failure as NodeJS.ErrnoException).code).toBe('EBADF');
    expect(fs.statSync(file).size).toBe(0);
  });
});

withAddon('the process budget of direct-write buffers', () => {
  it('gives a second writer at once what is left (at least one buffer), and keeps at most the budget', async () => {
    const fds = ['a', 'b'].map((n) => fs.openSync(path.join(sandbox, n), 'wx', 0o600));
    const data = [pattern(3 * DIRECT_CHUNK + 77, 21), pattern(2 * DIRECT_CHUNK + 5, 22)];
    const first = new DirectWriter(calls!, fds[0]!);
    const second = new DirectWriter(calls!, fds[1]!);
    try {
      expect([first.depth, second.depth]).toEqual([DIRECT_DEPTH, 1]);
      expect(directBuffersHeld()).toBe(DIRECT_BUDGET + 1);
      // Interleaved, as two unpack threads would write.
      for (let at = 0; at < data[0]!.length; at += 500_000) {
        for (const [i, w] of [first, second].entries()) {
          const piece = data[i]!.subarray(at, at + 500_000);
          if (piece.length > 0) await w.add(Buffer.from(piece));
        }
      }
      await first.end(data[0]!.length);
      await second.end(data[1]!.length);
    } finally {
      await first.settle();
      await second.settle();
      for (const fd of fds) fs.closeSync(fd);
    }
    expect(fs.readFileSync(path.join(sandbox, 'a')).equals(data[0]!)).toBe(true);
    expect(fs.readFileSync(path.join(sandbox, 'b')).equals(data[1]!)).toBe(true);
    expect(directBuffersHeld()).toBe(DIRECT_BUDGET);
    // The kept buffers serve the next writer of this thread, in full.
    const fd = fs.openSync(path.join(sandbox, 'c'), 'wx', 0o600);
    const next = new DirectWriter(calls!, fd);
    expect(next.depth).toBe(DIRECT_DEPTH);
    expect(directBuffersHeld()).toBe(DIRECT_BUDGET);
    await next.settle();
    fs.closeSync(fd);
  });

  it.skipIf(lacks('build', compiledWorker('direct.js') ? undefined : 'the worker is not compiled: pnpm run build'))('is one budget for the unpack threads the process hands it to', async () => {
    // This thread keeps the budget's buffers (the test above, or this writer): a worker gets one.
    const fd = fs.openSync(path.join(sandbox, 'mine'), 'wx', 0o600);
    const mine = new DirectWriter(calls!, fd);
    const url = new URL(`file://${compiledWorker('direct.js')!}`).href;
    const file = path.join(sandbox, 'theirs');
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const fs = require('node:fs');
       import(${JSON.stringify(url)}).then(async (m) => {
         const fd = fs.openSync(${JSON.stringify(file)}, 'wx', 0o600);
         const w = new m.DirectWriter(m.directIo(), fd);
         const seen = { depth: w.depth, held: m.directBuffersHeld() };
         await w.settle();
         fs.closeSync(fd);
         parentPort.postMessage(seen);
       }, (e) => parentPort.postMessage({ error: String(e) }));`,
      { eval: true, workerData: directBudgetWorkerData() },
    );
    try {
      const seen = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      expect(mine.depth).toBe(DIRECT_DEPTH);
      expect(seen).toEqual({ depth: 1, held: DIRECT_BUDGET + 1 });
      expect(directBuffersHeld()).toBe(DIRECT_BUDGET);
    } finally {
      await worker.terminate();
      await mine.settle();
      fs.closeSync(fd);
    }
  });
});

withAddon('applyLayer: large files go direct', () => {
  // 128 MiB files by default: the threshold as FASTPULL_DIRECT_MIN_MIB sets it, to its floor.
  beforeAll(() => void (process.env.FASTPULL_DIRECT_MIN_MIB = '1'));
  afterAll(() => void delete process.env.FASTPULL_DIRECT_MIN_MIB);

  it('decides by size: 128 MiB by default, FASTPULL_DIRECT_MIN_MIB down to 8 MiB', () => {
    delete process.env.FASTPULL_DIRECT_MIN_MIB;
    expect([directSize(DIRECT_MIN - 1), directSize(DIRECT_MIN)]).toEqual([false, true]);
    process.env.FASTPULL_DIRECT_MIN_MIB = '16';
    expect([directSize(16 * 1024 * 1024 - 1), directSize(16 * 1024 * 1024)]).toEqual([false, true]);
    process.env.FASTPULL_DIRECT_MIN_MIB = '1';
    expect([directSize(DIRECT_MIN_FLOOR - 1), directSize(DIRECT_MIN_FLOOR)]).toEqual([false, true]);
  });

  it('writes files from the threshold up direct, smaller ones through the page cache, all byte for byte', async () => {
    const big = pattern(DIRECT_MIN_FLOOR + 4321, 1);
    const exact = pattern(DIRECT_MIN_FLOOR, 2);
    const small = pattern(DIRECT_MIN_FLOOR - 1, 3);
    const tar = await makeTar([
      { name: 'opt/big.bin', body: big },
      { name: 'opt/exact.bin', body: exact },
      { name: 'opt/small.bin', body: small },
    ]);
    const stats = await applyLayer(chunksOf(tar, 200_003), dest);
    expect(stats.directBytes).toBe(big.length + exact.length);
    expect(stats.bytes).toBe(big.length + exact.length + small.length);
    const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
    expect(sha(fs.readFileSync(path.join(dest, 'opt/big.bin')))).toBe(sha(big));
    expect(sha(fs.readFileSync(path.join(dest, 'opt/exact.bin')))).toBe(sha(exact));
    expect(sha(fs.readFileSync(path.join(dest, 'opt/small.bin')))).toBe(sha(small));
    expect(fs.statSync(path.join(dest, 'opt/big.bin')).mode & 0o7777).toBe(0o644);
  });

  it.skipIf(lacksRoot())('reports a filesystem that fills during direct writes as NO_SPACE, with no write left on the file', async (ctx) => {
    const small = path.join(sandbox, 'small');
    fs.mkdirSync(small);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', small], { stdio: 'pipe' });
    } catch (e) {
      console.warn(`skipping the direct NO_SPACE test: cannot mount tmpfs: ${(e as Error).message}`);
      lacks('tmpfs', `cannot mount tmpfs: ${(e as Error).message}`);
      ctx.skip();
    }
    try {
      const tar = await makeTar([{ name: 'big', body: pattern(DIRECT_MIN_FLOOR + 1, 9) }]);
      expect(await code(applyLayer(chunksOf(tar, 256 * 1024), small))).toBe('NO_SPACE');
    } finally {
      // umount fails with EBUSY while any fd of the file is open: a close under a write in flight would show.
      execFileSync('umount', [small]);
    }
  });
});
