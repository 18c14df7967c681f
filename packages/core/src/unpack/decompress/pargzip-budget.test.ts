// The inflate budget: its counters, shared across threads, and pools that decode within it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { Prng } from '../../testing/prng.js';
import { DEFAULT_INFLATE_SLOT_BYTES, inflateBudgetWorkerData, InflateBudget, processInflateBudget } from './pargzip-budget.js';
import { JobSlot, nativeInflate, St, Status, type JobInput, type JobResult } from './pargzip-job.js';
import { createParallelGunzip, InflatePool } from './pargzip.js';
import { compiledWorker } from '../pool/pool.js';
import { lacks } from '../../testing/needs.js';

const available = InflatePool.available();
const MIB = 1024 * 1024;

describe('inflate budget', () => {
  it('refuses limits that are not positive integers', () => {
    for (const limits of [{ running: 0 }, { running: 1.5 }, { slotBytes: 0 }, { slotBytes: -1 }, { running: Number.NaN }]) {
      let caught: unknown;
      try {
        InflateBudget.create(limits);
      } catch (e) {
        caught = e;
      }
      expect(isFastpullError(caught) && caught.code, JSON.stringify(limits)).toBe('INVALID_ARGUMENT');
    }
    expect(() => new InflateBudget(new SharedArrayBuffer(4))).toThrow(/not a budget buffer/);
  });

  it('holds by default a slot of memory per job that may run at once, up to 64 MiB', () => {
    // Two cores: the job the output waits for and one ahead, as a third only takes CPU from the unpack thread.
    expect(InflateBudget.create({ running: 1 }).slotBytes).toBe(24 * MIB);
    expect(InflateBudget.create({ running: 2 }).slotBytes).toBe(48 * MIB);
    expect(InflateBudget.create({ running: 3 }).slotBytes).toBe(DEFAULT_INFLATE_SLOT_BYTES);
    expect(InflateBudget.create({ running: 64 }).slotBytes).toBe(DEFAULT_INFLATE_SLOT_BYTES);
    expect(InflateBudget.create({ running: 2, slotBytes: 100 * MIB }).slotBytes).toBe(100 * MIB);
    // Slots of a stream of the largest chunks (1 MiB and the overrun): three fit in 48 MiB, so on two
    // cores a stream runs two jobs ahead; four in 64 MiB, however many cores.
    const slot = JobSlot.bytes(4 * MIB, 1.5 * MIB);
    expect(Math.floor((48 * MIB) / slot)).toBe(3);
    expect(Math.floor(DEFAULT_INFLATE_SLOT_BYTES / slot)).toBe(4);
    // With 4 MiB chunks, two and three.
    expect(Math.floor((48 * MIB) / JobSlot.bytes(4 * MIB, 4.5 * MIB))).toBe(2);
  });

  it('bounds running jobs: one more for a job the output waits for, none for guesses while others wait', async () => {
    const b = InflateBudget.create({ running: 2, slotBytes: 8 * MIB });
    expect([b.tryRun(false), b.tryRun(false), b.tryRun(false)]).toEqual([true, true, false]);
    expect(b.tryRun(true)).toBe(true);
    expect(b.tryRun(true)).toBe(false);
    expect([b.running, b.peakRunning]).toEqual([3, 3]);
    b.endRun();
    b.endRun();
    expect(b.running).toBe(1);
    // Another pool waits for a place: a guess leaves the free one to it; an urgent job does not,
    // and neither does a guess of the pool that waits itself (self).
    const generation = b.generation;
    const waiting = b.changed(generation, true);
    expect(b.waiters).toBe(1);
    expect(b.tryRun(false)).toBe(false);
    expect(b.tryRun(false, 1)).toBe(true);
    b.endRun();
    expect(b.tryRun(true)).toBe(true);
    b.endRun(); // a change: the waiter wakes
    await waiting;
    expect(b.waiters).toBe(0);
    expect(b.generation).toBeGreaterThan(generation);
    // A change already past: no wait at all.
    await b.changed(generation, true);
    expect(b.waiters).toBe(0);
  });

  it('bounds slot bytes unless forced, and keeps the high-water mark', () => {
    const b = InflateBudget.create({ running: 1, slotBytes: 10 * MIB });
    expect(b.reserve(6 * MIB, false)).toBe(true);
    expect(b.reserve(6 * MIB, false)).toBe(false);
    expect(b.slotBytesHeld).toBe(6 * MIB);
    expect(b.reserve(6 * MIB, true)).toBe(true);
    expect(b.slotBytesHeld).toBe(12 * MIB);
    b.unreserve(6 * MIB);
    b.unreserve(6 * MIB);
    expect([b.slotBytesHeld, b.peakSlotBytes]).toEqual([0, 12 * MIB]);
    // Counted in 64 KiB units, rounded up.
    expect(b.reserve(1, false)).toBe(true);
    expect(b.slotBytesHeld).toBe(64 * 1024);
  });

  it("takes a new bound on its slot memory (a pass's Tuning.inflateSlotBytes), and refuses one that is not a positive integer", () => {
    const b = InflateBudget.create({ running: 2, slotBytes: 16 * MIB });
    const g = b.generation;
    b.setSlotBytes(256 * MIB);
    expect(b.slotBytes).toBe(256 * MIB);
    expect(b.generation).toBeGreaterThan(g); // waiters look again
    b.setSlotBytes(MIB / 2);
    expect(b.slotBytes).toBe(MIB / 2);
    for (const v of [0, -3, 1.5, Number.NaN]) expect(() => b.setSlotBytes(v), String(v)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(b.slotBytes).toBe(MIB / 2);
  });

  it.skipIf(lacks('build', compiledWorker('decompress/pargzip-budget.js') ? undefined : 'the worker is not compiled: pnpm run build'))(
    "sizes the process's budget by the cores, whatever the environment says",
    () => {
      const url = new URL(`file://${compiledWorker('decompress/pargzip-budget.js')!}`).href;
      const r = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', `const m = await import(${JSON.stringify(url)}); console.log(m.processInflateBudget().slotBytes);`],
        {
          encoding: 'utf8',
          env: { ...process.env, FASTPULL_INFLATE_SLOT_MIB: '200' },
        },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(Number(r.stdout.trim())).toBe(InflateBudget.create().slotBytes);
    },
  );

  it.skipIf(lacks('build', compiledWorker('decompress/pargzip-budget.js') ? undefined : 'the worker is not compiled: pnpm run build'))(
    'is one budget for the threads the process hands it to',
    async () => {
      const mine = processInflateBudget();
      const held = mine.slotBytesHeld;
      const url = new URL(`file://${compiledWorker('decompress/pargzip-budget.js')!}`).href;
      // A worker thread, as the unpack pool starts them: it reserves 3 MiB, reports what it sees, waits
      // for this thread's change, and gives them back.
      const worker = new Worker(
        `const { parentPort } = require('node:worker_threads');
       import(${JSON.stringify(url)}).then(async (m) => {
         const b = m.processInflateBudget();
         b.reserve(3 * 1024 * 1024, false);
         parentPort.postMessage({ max: b.slotBytes, running: b.maxRunning });
         const g = b.generation;
         parentPort.once('message', async () => {
           await b.changed(g, true);
           b.unreserve(3 * 1024 * 1024);
           parentPort.postMessage('done');
         });
       }, (e) => parentPort.postMessage({ error: String(e) }));`,
        { eval: true, workerData: inflateBudgetWorkerData() },
      );
      const failed = new Promise<never>((_, reject) => {
        worker.once('error', reject);
        worker.once('exit', (code) => reject(new Error(`worker exited (${code})`)));
      });
      try {
        const first = await Promise.race([new Promise<{ max: number; running: number }>((resolve) => worker.once('message', resolve)), failed]);
        expect(first).toEqual({ max: mine.slotBytes, running: mine.maxRunning });
        expect(mine.slotBytesHeld).toBe(held + 3 * MIB);
        const done = new Promise((resolve) => worker.once('message', resolve));
        worker.postMessage('go');
        // The worker's wait shows here; a change made here wakes it.
        for (let i = 0; i < 200 && mine.waiters === 0; i++) await new Promise((r) => setTimeout(r, 5));
        expect(mine.waiters).toBe(1);
        mine.reserve(64 * 1024, true);
        mine.unreserve(64 * 1024);
        expect(await Promise.race([done, failed])).toBe('done');
        expect(mine.slotBytesHeld).toBe(held);
      } finally {
        await worker.terminate();
      }
    },
  );
});

describe.skipIf(lacks('addon', available ? undefined : 'the native addon (parallel gunzip) is not built'))('parallel gunzip within a budget', () => {
  const rng = new Prng(77);
  const words = Array.from({ length: 400 }, () => rng.bytes(rng.int(2, 8)).toString('hex'));
  const parts: string[] = [];
  for (let n = 0; n < 3 * MIB;) {
    const w = rng.pick(words) + (rng.chance(0.05) ? '\n' : ' ');
    parts.push(w);
    n += w.length;
  }
  const data = Buffer.concat([Buffer.from(parts.join('')), rng.bytes(2 * MIB)]);
  const gz = zlib.gzipSync(data, { level: 6 });
  const pools: InflatePool[] = [];
  afterAll(() => Promise.all(pools.map((p) => p.close())));

  async function gunzip(pool: InflatePool): Promise<Buffer> {
    const g = createParallelGunzip({ pool, chunkSize: 128 * 1024, size: gz.length });
    const out: Buffer[] = [];
    const done = new Promise<Buffer>((resolve, reject) => {
      g.on('data', (c: Buffer) => out.push(c));
      g.on('end', () => resolve(Buffer.concat(out)));
      g.on('error', reject);
    });
    for (let at = 0; at < gz.length; at += 256 * 1024) {
      // A stream that fails never drains: its error ends the wait.
      if (!g.write(gz.subarray(at, at + 256 * 1024))) await Promise.race([new Promise((r) => g.once('drain', r)), done]);
    }
    g.end();
    return done;
  }

  function slotBytes(): number {
    // The slot a stream of these chunks asks for (pargzip.ts: 4 Mi symbols, the chunk plus its overrun).
    return JobSlot.bytes(4 * MIB, 512 * 1024);
  }

  it('holds the slots the budget allows (one over it for the output) and gives them back when done', async () => {
    const loose = InflateBudget.create({ running: 2, slotBytes: 1024 * MIB });
    const tight = InflateBudget.create({ running: 2, slotBytes: 2 * slotBytes() });
    for (const budget of [loose, tight]) {
      const pool = new InflatePool({ threads: 2, budget });
      pools.push(pool);
      const out = await gunzip(pool);
      expect(out.equals(data)).toBe(true);
      expect(budget.peakRunning).toBeLessThanOrEqual(3);
      expect(budget.peakRunning).toBeGreaterThanOrEqual(1);
      // Done: nothing lent, nothing kept resident, nothing counted.
      for (let i = 0; i < 200 && pool.slotsLent > 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect([pool.slotsLent, pool.slotCount, budget.slotBytesHeld]).toEqual([0, 0, 0]);
    }
    expect(tight.peakSlotBytes).toBeLessThanOrEqual(tight.slotBytes + slotBytes() + 64 * 1024);
    // Without the bound the same stream holds more: the bound is what kept it down.
    expect(loose.peakSlotBytes).toBeGreaterThan(tight.peakSlotBytes);
  });

  it('decodes a stream whose budget is smaller than one slot: the guess the output waits for goes past it', async () => {
    // Before, the output waited for its next guess while the guess waited for room that could never
    // be there: the stream hung (a pull with a 16 MiB budget did).
    for (const slotBytesLimit of [1, slotBytes() - 64 * 1024]) {
      const budget = InflateBudget.create({ running: 2, slotBytes: slotBytesLimit });
      const pool = new InflatePool({ threads: 2, budget });
      pools.push(pool);
      const out = await gunzip(pool);
      expect(out.equals(data)).toBe(true);
      // Only jobs the output waited for ran: one slot at a time past the bound (and the guess it used).
      expect(budget.peakSlotBytes).toBeGreaterThan(0);
      expect(budget.peakSlotBytes).toBeLessThanOrEqual(2 * slotBytes() + 128 * 1024);
      for (let i = 0; i < 200 && pool.slotsLent > 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(budget.slotBytesHeld).toBe(0);
    }
  });

  it('shares one budget between pools decoding at once', async () => {
    const budget = InflateBudget.create({ running: 1, slotBytes: 2 * slotBytes() });
    const a = new InflatePool({ threads: 2, budget });
    const b = new InflatePool({ threads: 2, budget });
    pools.push(a, b);
    const [x, y] = await Promise.all([gunzip(a), gunzip(b)]);
    expect(x.equals(data) && y.equals(data)).toBe(true);
    // One place, and one more for a job an output waits for; two streams may each take one slot past the bound.
    expect(budget.peakRunning).toBeLessThanOrEqual(2);
    expect(budget.peakSlotBytes).toBeLessThanOrEqual(budget.slotBytes + 2 * slotBytes() + 128 * 1024);
    for (let i = 0; i < 200 && (a.slotsLent > 0 || b.slotsLent > 0); i++) await new Promise((r) => setTimeout(r, 5));
    expect(budget.slotBytesHeld).toBe(0);
  });

  /** A speculative job decoding all of a small gzip member, queued on `pool`. */
  function speculative(pool: InflatePool): { done: Promise<JobResult>; lease: ReturnType<InflatePool['takeSlot']> } {
    const member = zlib.gzipSync(Buffer.from('fastpull '.repeat(4096)));
    const owner = {};
    const lease = pool.takeSlot(owner, 4 * MIB, member.length);
    const data = lease.slot.input.subarray(0, member.length);
    data.set(member);
    const job: JobInput = {
      kind: St.Member,
      bit: 0,
      btype: 0,
      bfinal: 0,
      left: 0,
      hdr: null,
      hdrBit: 0,
      data,
      dataOffset: 0,
      final: true,
      stopKey: Infinity,
      cap: 4 * MIB,
      window: null,
    };
    return { done: pool.run(job, lease, false, owner), lease };
  }

  /** `p`, or a rejection once it has not settled in `ms` (a hang shows as a failure, not a stuck run). */
  function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done in ${ms} ms`)), ms)));
    return Promise.race([p, late]).finally(() => clearTimeout(timer));
  }

  it('runs the speculative jobs of pools that waited for the same running place: no pool yields to another for good', async () => {
    // Each pool waiting with a guess first used to count as a waiter that the other pools' guesses
    // leave the place to: two of them yielded to each other forever, nothing running (two streams on
    // a budget of one running job hung that way).
    const budget = InflateBudget.create({ running: 1, slotBytes: 4 * slotBytes() });
    const a = new InflatePool({ threads: 2, budget });
    const b = new InflatePool({ threads: 2, budget });
    pools.push(a, b);
    // A guess of pool a takes the one place; a guess of each pool queues behind it.
    const jobs = [speculative(a), speculative(a), speculative(b)];
    expect([a.jobsRunning, b.jobsRunning, budget.running]).toEqual([1, 0, 1]);
    // Waits for guesses ask nobody to yield.
    expect(budget.waiters).toBe(0);
    const results = await within(Promise.all(jobs.map((j) => j.done)), 5000, 'the three speculative jobs');
    expect(results.map((r) => r.status)).toEqual([Status.End, Status.End, Status.End]);
    for (const r of results) expect(Buffer.from(r.out8).toString('latin1')).toBe('fastpull '.repeat(4096));
    expect(budget.running).toBe(0);
    expect(budget.peakRunning).toBe(1);
    jobs.forEach((j, i) => (i < 2 ? a : b).release(j.lease));
  });

  it("runs a queued guess that the output comes to wait for like the output's own jobs: past the bound, first in line", async () => {
    const budget = InflateBudget.create({ running: 1, slotBytes: 4 * slotBytes() });
    const pool = new InflatePool({ threads: 2, budget });
    pools.push(pool);
    expect(budget.tryRun(false)).toBe(true); // the one place is taken, and stays taken
    try {
      const first = speculative(pool);
      const second = speculative(pool);
      await new Promise((r) => setTimeout(r, 20));
      expect(pool.jobsRunning).toBe(0);
      pool.hurry(second.lease);
      // The hurried job runs on the place past the bound that the output's jobs may take; the other
      // guess still waits.
      const r = await within(second.done, 5000, 'the hurried guess');
      expect(r.status).toBe(Status.End);
      expect(budget.peakRunning).toBe(2);
      let firstDone = false;
      void first.done.then(() => (firstDone = true));
      await new Promise((r) => setTimeout(r, 20));
      expect(firstDone).toBe(false);
      pool.hurry(second.lease); // done already: nothing to do
      pool.release(second.lease);
      budget.endRun();
      expect((await within(first.done, 5000, 'the other guess')).status).toBe(Status.End);
      pool.release(first.lease);
    } finally {
      if (budget.running > 0) budget.endRun();
    }
  });

  it('finishes every stream, whatever the budget, pools, chunks and reader pauses (seeded scenarios)', async () => {
    // Streams of several pools on one tight budget, each read with pauses and, half the time, with
    // its output reused: each must end with node:zlib's bytes, none may wait for another for good,
    // and the budget must be whole again after. Two streams on a budget of one running job once
    // stalled forever (their pools' guesses yielding to each other); this is the net for that kind.
    const small = zlib.gzipSync(data.subarray(0, MIB + 12345), { level: 1 });
    const inputs = [
      { gz, raw: data },
      { gz: small, raw: data.subarray(0, MIB + 12345) },
    ];
    const rng = new Prng(4242);
    for (let scenario = 0; scenario < 30; scenario++) {
      const budget = InflateBudget.create({ running: rng.int(1, 2), slotBytes: Math.max(1, Math.floor(rng.pick([0.5, 1, 1.5, 2, 3]) * slotBytes())) });
      const scenarioPools = Array.from({ length: rng.int(1, 3) }, () => new InflatePool({ threads: rng.int(1, 2), budget }));
      pools.push(...scenarioPools);
      const chunkSize = rng.pick([64, 128, 256]) * 1024;
      const streams = Array.from({ length: rng.int(2, 4) }, (_, i) => ({
        pool: scenarioPools[i % scenarioPools.length]!,
        input: rng.pick(inputs),
        reuse: rng.chance(0.5),
        pauses: rng.chance(0.5),
        seed: rng.int(1, 1e9),
      }));
      const what = `scenario ${scenario}: running ${budget.maxRunning}, ${budget.slotBytes} slot bytes, ${scenarioPools.length} pools, ${streams.length} streams, chunks of ${chunkSize}`;
      const outs = await within(
        Promise.all(
          streams.map(async ({ pool, input, reuse, pauses, seed }) => {
            const r = new Prng(seed);
            const g = createParallelGunzip({ pool, chunkSize, size: input.gz.length, reuseOutput: reuse });
            const out: Buffer[] = [];
            let pushed = 0;
            const done = new Promise<Buffer>((resolve, reject) => {
              g.on('data', (c: Buffer) => {
                out.push(Buffer.from(c));
                pushed += c.length;
                g.releaseOutput(pushed);
                if (pauses && r.chance(0.5)) {
                  g.pause();
                  setTimeout(() => g.resume(), r.int(0, 3));
                }
              });
              g.on('end', () => resolve(Buffer.concat(out)));
              g.on('error', reject);
            });
            for (let at = 0; at < input.gz.length;) {
              const n = r.int(1, 512 * 1024);
              const ok = g.write(input.gz.subarray(at, at + n));
              at += n;
              if (!ok) await Promise.race([new Promise((resolve) => g.once('drain', resolve)), done]);
            }
            g.end();
            return { out: await done, raw: input.raw };
          }),
        ),
        30_000,
        what,
      );
      for (const { out, raw } of outs) expect(out.equals(raw), what).toBe(true);
      for (let i = 0; i < 200 && (budget.running > 0 || budget.slotBytesHeld > 0); i++) await new Promise((r) => setTimeout(r, 5));
      expect([budget.running, budget.slotBytesHeld, budget.waiters], what).toEqual([0, 0, 0]);
    }
  });

  it('runs the jobs of every pool on the same decode threads of the process', async () => {
    const budget = InflateBudget.create({ running: 4, slotBytes: 8 * slotBytes() });
    const three = [1, 2, 3].map(() => new InflatePool({ threads: 2, budget }));
    pools.push(...three);
    const outs = await Promise.all(three.map((p) => gunzip(p)));
    for (const out of outs) expect(out.equals(data)).toBe(true);
    expect(budget.peakRunning).toBeGreaterThan(1);
    // As many threads as the most any pool of the process asked for (the machine's cores for the
    // shared pool), not a set per pool: three pools of two would be six.
    expect(three[0]!.threadsAlive).toBeGreaterThanOrEqual(2);
    expect(three[0]!.threadsAlive).toBeLessThanOrEqual(Math.max(2, availableParallelism()));
    expect(three.map((p) => p.jobsRunning)).toEqual([0, 0, 0]);
    for (const p of three) expect(p.cpuMs(p)).toBeDefined();
    expect(() => new InflatePool({ threads: 1, idleMs: -1 })).toThrow(/idleMs/);
  });

  it.skipIf(lacks('build', compiledWorker('decompress/pargzip.js') ? undefined : 'the worker is not compiled: pnpm run build'))(
    'outlives threads that end while their jobs decode, and lets the process exit',
    () => {
      // Worker threads decode through their own pools and are terminated mid-stream, their jobs still on
      // the decode threads: each thread's end waits for its jobs that are decoding (they write into its
      // slots), and the decode threads go on serving the others. The child then decodes on its main
      // thread and must exit by itself (an idle runner holds no event loop).
      const url = new URL(`file://${compiledWorker('decompress/pargzip.js')!}`).href;
      const dir = mkdtempSync(join(tmpdir(), 'fastpull-pargzip-'));
      try {
        const script = `
        const { Worker } = await import('node:worker_threads');
        const zlib = await import('node:zlib');
        const { createParallelGunzip, InflatePool } = await import(${JSON.stringify(url)});
        const data = Buffer.alloc(24 << 20);
        for (let i = 0; i < data.length; i += 4096) data.write(String(i * 2654435761 % 1000003), i);
        const gz = zlib.gzipSync(data, { level: 1 });
        const body = \`
          const { parentPort, workerData } = require('node:worker_threads');
          import(\${JSON.stringify(${JSON.stringify(url)})}).then((m) => {
            const g = m.createParallelGunzip({ pool: new m.InflatePool({ threads: 2 }), chunkSize: 256 * 1024, size: workerData.length });
            let n = 0;
            g.on('data', (c) => { if ((n += c.length) >= 1 << 20) parentPort.postMessage('decoding'); });
            g.end(Buffer.from(workerData));
          });\`;
        for (let round = 0; round < 6; round++) {
          const w = new Worker(body, { eval: true, workerData: gz });
          await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
          await w.terminate();
        }
        const pool = new InflatePool({ threads: 2 });
        const g = createParallelGunzip({ pool, chunkSize: 256 * 1024, size: gz.length });
        const out = [];
        g.on('data', (c) => out.push(c));
        await new Promise((resolve, reject) => { g.on('end', resolve); g.on('error', reject); g.end(gz); });
        console.log(Buffer.concat(out).equals(data) ? 'equal' : 'different', pool.threadsAlive);`;
        const file = join(dir, 'ends.mjs');
        writeFileSync(file, script);
        const r = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 120_000 });
        expect(r.stderr).toBe('');
        expect([r.status, r.signal]).toEqual([0, null]);
        expect(r.stdout.trim()).toBe(`equal ${Math.max(2, availableParallelism())}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it.skipIf(lacks('addon', nativeInflate()?.discard ? undefined : 'the native addon (slot discard) is not built'))(
    'discards a slot let go: its pages read as zeros and are reused',
    () => {
      const slot = new JobSlot(1, 1024 * 1024, 1024 * 1024);
      const all = new Uint8Array(slot.buffer);
      all.fill(0xa5);
      const n = nativeInflate()!.discard!(all);
      expect(n).toBeGreaterThan(all.length - 2 * 4096);
      expect(all[all.length >> 1]).toBe(0);
      all[all.length >> 1] = 7;
      expect(all[all.length >> 1]).toBe(7);
    },
  );
});
