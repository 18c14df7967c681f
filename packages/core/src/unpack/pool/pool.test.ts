import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, uptime } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { Watermark } from '../../content/watermark.js';
import { MediaTypes } from '../../oci/mediatypes.js';
import { buildLayer } from '../../testing/builder.js';
import { CONSUMED_POLL_MS, idleCores, machineIdleMs } from './lending.js';
import { poolSizeFor, UnpackPool, WORKER_YOUNG_GENERATION_MB, type PassThread } from './pool.js';
import { allowedCpus } from '../../util/cpu.js';
import { PullCpuBudget } from '../../util/pull-cpu.js';
import { startWorkerAhead, workerAhead } from './spawn.js';
import type { Worker } from 'node:worker_threads';
import { processInflateBudget } from '../decompress/pargzip-budget.js';
import { InflatePool } from '../decompress/pargzip.js';
import { lacks, notHere } from '../../testing/needs.js';

/** A machine with 64 idle cores, whatever else runs (the tests run side by side). */
const idleMachine = () => performance.now() * 64;
/** A machine whose every core is busy. */
const busyMachine = () => 0;

const work = mkdtempSync(join(tmpdir(), 'fastpull-pool-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function blob(name: string, files: number): Promise<{ path: string; size: number; diffID: string; digest: string }> {
  const layer = await buildLayer(
    Array.from({ length: files }, (_, i) => ({ type: 'file' as const, path: `${name}/f${i}`, content: `${name} ${i}\n` })),
    { compression: 'gzip' },
  );
  const path = join(work, `${name}.tgz`);
  writeFileSync(path, layer.blob);
  return { path, size: layer.size, diffID: layer.diffID, digest: layer.digest };
}

const dest = (name: string) => mkdtempSync(join(work, `${name}-`));

/**
 * Readies `pool`'s worker with a first task, then starts a pass of `name` that follows a download
 * of which nothing has landed yet: its start is pushed to `order` ('held', or 'held on a lent slot').
 */
async function heldPass(pool: UnpackPool, name: string, order: string[]) {
  const warm = await blob(`${name}-warm`, 1);
  await pool.run({ blobPath: warm.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`${name}-warm`) });
  const b = await blob(`${name}-held`, 5);
  const held = new Watermark(b.size);
  const pass = pool.run(
    { blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`${name}-held`), follow: { watermark: held.buffer, size: b.size } },
    { onStart: (_t, lent) => order.push(lent ? 'held on a lent slot' : 'held') },
  );
  return { pass, held, blob: b };
}

/**
 * Runs two passes at once on `pool`, the first following a landed blob of 20,000 small files
 * (many of the pool's looks long, none of them waiting), and says whether the second started
 * before the first ended or the pool said the first lent its slot.
 */
async function overlapped(pool: UnpackPool, name: string): Promise<boolean> {
  const layer = await blob(name, 20_000);
  const path = layer.path;
  const landed = new Watermark(layer.size);
  landed.add(0, layer.size);
  const other = await blob(`${name}-other`, 1);
  // The pool reports the first pass's last count before its slot is free.
  let consumed = 0;
  let secondStartedFirst = false;
  const first = pool.run(
    { blobPath: path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(name), follow: { watermark: landed.buffer, size: layer.size } },
    { priority: 9, onBytes: (n) => void (consumed = n) },
  );
  const second = pool.run(
    { blobPath: other.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`${name}-other`) },
    { priority: 1, onStart: () => void (secondStartedFirst = consumed < layer.size) },
  );
  let lent = 0;
  const look = setInterval(() => void (lent = Math.max(lent, pool.lending)), 5);
  const t = performance.now();
  const [r] = await Promise.all([first, second]).finally(() => clearInterval(look));
  expect(r.diffID).toBe(layer.diffID);
  // Long enough for the pool to look at the pass several times.
  expect(performance.now() - t).toBeGreaterThan(3 * CONSUMED_POLL_MS);
  return secondStartedFirst || lent > 0;
}

describe('UnpackPool', () => {
  it('runs one layer per two cores by default, at least one and at most MAX_POOL_SIZE', () => {
    expect([1, 2, 3, 4, 7, 8, 16, 17, 192].map((cores) => poolSizeFor(cores))).toEqual([1, 1, 2, 2, 4, 4, 4, 4, 4]);
    expect(new UnpackPool().size).toBe(poolSizeFor());
  });

  it('refuses a size that is not a positive integer', () => {
    for (const size of [0, -1, 1.5, Number.NaN])
      expect(() => new UnpackPool({ size }), String(size)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('unpacks on worker threads and returns both digests', async () => {
    const pool = new UnpackPool({ size: 2 });
    try {
      expect(pool.threaded).toBe(true);
      const b = await blob('one', 20);
      const d = dest('one');
      const r = await pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: d });
      expect(r.diffID).toBe(b.diffID);
      expect(r.blobDigest).toBe(b.digest);
      expect(readFileSync(join(d, 'one', 'f7'), 'utf8')).toBe('one 7\n');
    } finally {
      await pool.close();
    }
  });

  it('says which thread runs a task: a reused worker, or 0 for the calling thread', async () => {
    const b = await blob('where', 30);
    const threaded = new UnpackPool({ size: 1 });
    const inline = new UnpackPool({ size: 1, threads: false });
    try {
      const threads: number[] = [];
      for (const pool of [threaded, threaded, inline])
        await pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('where') }, { onStart: (t) => threads.push(t) });
      expect(threads[0]).toBeGreaterThan(0);
      expect(threads).toEqual([threads[0], threads[0], 0]);
    } finally {
      await threaded.close();
    }
  });

  it('takes the worker a command started ahead as its first, whether it is still loading or ready', async () => {
    const b = await blob('ahead', 3);
    const runOn = async (pool: UnpackPool): Promise<number> => {
      let thread = -1;
      const r = await pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('ahead') }, { onStart: (t) => void (thread = t) });
      expect(r.diffID).toBe(b.diffID);
      return thread;
    };
    // Still loading: the pool's first task waits for it and runs on it.
    expect(startWorkerAhead()).toBe(true);
    const loading = workerAhead()!;
    expect(loading.ready).toBe(false);
    // One at a time: a second call keeps the first.
    expect(startWorkerAhead()).toBe(true);
    expect(workerAhead()!.worker).toBe(loading.worker);
    const first = new UnpackPool({ size: 1 });
    try {
      expect(await runOn(first)).toBe(loading.worker.threadId);
      expect(workerAhead()).toBeUndefined();
      expect(first.workers).toBe(1);
    } finally {
      await first.close();
    }
    // Ready before the pool asks: no message will say so, and the task must still start on it.
    expect(startWorkerAhead()).toBe(true);
    for (let i = 0; i < 800 && workerAhead()?.ready !== true; i++) await new Promise((r) => setTimeout(r, 25));
    const ready = workerAhead()!;
    expect(ready.ready).toBe(true);
    const second = new UnpackPool({ size: 1 });
    try {
      expect(await runOn(second)).toBe(ready.worker.threadId);
      expect(second.workers).toBe(1);
    } finally {
      await second.close();
    }
  });

  it('starts workers ahead of need, never more than its size, and the next task runs on a warm one', async () => {
    const b = await blob('warm', 10);
    const pool = new UnpackPool({ size: 2 });
    const inline = new UnpackPool({ size: 2, threads: false });
    try {
      pool.warm();
      expect(pool.workers).toBe(1);
      pool.warm(5);
      expect(pool.workers).toBe(2);
      // A task is granted only a ready worker: with one thread still loading, both tasks may run on
      // the other one after another. Wait (bounded) until both have loaded.
      const slots = [...pool['all']];
      for (let i = 0; i < 400 && !slots.every((s) => s.ready); i++) await new Promise((r) => setTimeout(r, 25));
      expect(slots.every((s) => s.ready)).toBe(true);
      const threads: number[] = [];
      await Promise.all(
        [0, 1].map(() => pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('warm') }, { onStart: (t) => threads.push(t) })),
      );
      // Both tasks ran on the two warm threads: none was started for them.
      expect(pool.workers).toBe(2);
      expect(new Set(threads).size).toBe(2);
      inline.warm(2);
      expect(inline.workers).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('ends its idle workers when asked, their threads gone, and starts a new one for the next task', async () => {
    const b = await blob('retire', 10);
    const pool = new UnpackPool({ size: 2 });
    try {
      // Two warm workers; only ready ones are ended, so wait for each to say it is ready.
      pool.warm(2);
      const slots = [...(pool['all'] as Iterable<{ ready: boolean; worker: Worker }>)];
      await Promise.all(
        slots
          .filter((s) => !s.ready)
          .map((s) => new Promise<void>((resolve) => s.worker.on('message', (m: { type?: string }) => m.type === 'ready' && resolve()))),
      );
      expect(pool.workers).toBe(2);
      const workers = slots.map((slot) => slot.worker);
      const retired = workers.map((w) => w.threadId);
      expect(await pool.retireIdle()).toBe(2);
      expect(pool.workers).toBe(0);
      // Their threads have ended by the time it resolves.
      expect(workers.map((w) => w.threadId)).toEqual([-1, -1]);
      expect(await pool.retireIdle()).toBe(0);
      const threads: number[] = [];
      const r = await pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('retire') }, { onStart: (t) => threads.push(t) });
      expect(r.diffID).toBe(b.diffID);
      expect(pool.workers).toBe(1);
      expect(threads).toHaveLength(1);
      expect(threads[0]).toBeGreaterThan(0);
      expect(retired).not.toContain(threads[0]);
    } finally {
      await pool.close();
    }
  });

  it('gives its workers the small young generation, so dead buffers are collected within a few MiB', async () => {
    const pool = new UnpackPool({ size: 1 });
    try {
      pool.warm();
      const workers = [...pool['all']].map((slot) => slot.worker);
      expect(workers).toHaveLength(1);
      await new Promise<void>((resolve) => workers[0]!.once('online', () => resolve()));
      expect(workers[0]!.resourceLimits?.maxYoungGenerationSizeMb).toBe(WORKER_YOUNG_GENERATION_MB);
    } finally {
      await pool.close();
    }
  });

  it('lets the process exit while warm workers are idle', () => {
    const url = new URL('./pool.ts', import.meta.url).href.replace(/\/src\/unpack\/pool\/pool\.ts$/, '/dist/unpack/pool/pool.js');
    // A process that warms a pool and does nothing else ends on its own, at once.
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { UnpackPool } = await import(${JSON.stringify(url)}); const p = new UnpackPool({ size: 2 }); p.warm(2); console.log(p.workers);`,
      ],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe('2');
  });

  it('carries error codes back from the worker', async () => {
    const pool = new UnpackPool({ size: 1 });
    try {
      const path = join(work, 'bad.tgz');
      writeFileSync(path, Buffer.concat([gzipSync(Buffer.alloc(1024)).subarray(0, 20), Buffer.from('garbage')]));
      await expect(pool.run({ blobPath: path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('bad') })).rejects.toMatchObject({
        name: 'FastpullError',
        code: 'INVALID_LAYER',
      });
    } finally {
      await pool.close();
    }
  });

  it('follows a watermark; a pass waiting for its download lends its slot to landed tasks, highest priority first', async () => {
    const pool = new UnpackPool({ size: 1, machineIdle: idleMachine });
    try {
      // The worker ready first, so that the held pass takes it at once.
      const order: string[] = [];
      const { pass: first, held, blob: b } = await heldPass(pool, 'lend', order);
      const small = await blob('small', 1);
      const big = await blob('big', 3);
      const c = await blob('coming', 2);
      const coming = new Watermark(c.size);
      // The highest priority, but still downloading: a lent slot is not for it.
      const third = pool.run(
        { blobPath: c.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('coming'), follow: { watermark: coming.buffer, size: c.size } },
        { priority: 20, onStart: (_t, lent) => order.push(lent ? 'coming on a lent slot' : 'coming') },
      );
      const low = pool.run(
        { blobPath: small.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('low') },
        { priority: 1, onStart: (_t, lent) => order.push(lent ? 'low on a lent slot' : 'low') },
      );
      const high = pool.run(
        { blobPath: big.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('high') },
        { priority: 9, onStart: (_t, lent) => order.push(lent ? 'high on a lent slot' : 'high') },
      );
      // Nothing of the first has landed: its pass waits, lends its only slot after a look or two,
      // and the landed ones run meanwhile, one at a time, the higher priority first.
      await Promise.all([low, high]);
      expect(order).toEqual(['held', 'high on a lent slot', 'low on a lent slot']);
      held.add(0, b.size);
      const r = await first;
      expect(r.diffID).toBe(b.diffID);
      // The slot is free again: the one still downloading takes it, and follows its blob.
      coming.add(0, c.size);
      expect((await third).diffID).toBe(c.diffID);
      expect(order).toEqual(['held', 'high on a lent slot', 'low on a lent slot', 'coming']);
      // The slot came back: two passes that do not wait run one after the other again, and the
      // worker started for the lent slot is gone.
      expect(await overlapped(pool, 'after-lend')).toBe(false);
      expect(pool.workers).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it.skipIf(notHere(allowedCpus().length < 2 ? 'one CPU only: a budget of 1 is all of it' : undefined))(
    'confines a pass of a pull with a CPU budget to its CPUs, one pass of that pull at a time, until the budget is lifted',
    async () => {
      const all = allowedCpus();
      const last = all.slice(-1);
      const pool = new UnpackPool({ size: 2, machineIdle: busyMachine });
      const budget = new PullCpuBudget(1);
      try {
        const order: string[] = [];
        const where = new Map<string, PassThread | undefined>();
        let aRuns!: () => void;
        const aStarted = new Promise<void>((r) => (aRuns = r));
        // Placed: the pass runs on its worker, on its CPUs (onStart comes earlier, as it is handed out).
        const started = (name: string) => (w: PassThread) => {
          order.push(name);
          where.set(name, w);
          if (name === 'a') aRuns();
        };
        const a = await blob('budget-a', 5);
        const held = new Watermark(a.size);
        const first = pool.run(
          { blobPath: a.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('budget-a'), follow: { watermark: held.buffer, size: a.size } },
          { cpuBudget: budget, onPlaced: started('a') },
        );
        await aStarted;
        const b = await blob('budget-b', 2);
        const c = await blob('budget-c', 2);
        // The budget's second pass waits, though a slot is free; a pass without a budget takes it.
        const second = pool.run(
          { blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('budget-b') },
          { cpuBudget: budget, onPlaced: started('b') },
        );
        const other = await pool.run({ blobPath: c.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('budget-c') }, { onPlaced: started('c') });
        expect(other.diffID).toBe(c.diffID);
        expect(order).toEqual(['a', 'c']);
        // Read from /proc, not only from what the worker says.
        const tidA = where.get('a')!.tid;
        expect(where.get('a')!.cpus).toEqual(last);
        expect(allowedCpus(tidA)).toEqual(last);
        expect(where.get('c')!.cpus).toEqual(all);
        budget.lift();
        expect((await second).diffID).toBe(b.diffID);
        expect(order).toEqual(['a', 'c', 'b']);
        expect(where.get('b')!.cpus).toEqual(all);
        held.add(0, a.size);
        expect((await first).diffID).toBe(a.diffID);
        // Its worker is back on every CPU once the pass is done.
        expect(allowedCpus(tidA)).toEqual(all);
      } finally {
        await pool.close();
      }
    },
  );

  it('keeps the slot of a pass that waits for its download while the machine has no idle core', async () => {
    const pool = new UnpackPool({ size: 1, machineIdle: busyMachine });
    try {
      const order: string[] = [];
      const { pass: first, held, blob: b } = await heldPass(pool, 'busy', order);
      const small = await blob('busy-small', 1);
      const landed = pool.run(
        { blobPath: small.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('busy-small') },
        { priority: 9, onStart: (_t, lent) => order.push(lent ? 'landed on a lent slot' : 'landed') },
      );
      // The first pass waits for its download through many looks; this process is idle, but the machine is not.
      let lent = 0;
      const look = setInterval(() => void (lent = Math.max(lent, pool.lending)), 5);
      await new Promise((r) => setTimeout(r, 6 * CONSUMED_POLL_MS));
      clearInterval(look);
      expect(order).toEqual(['held']);
      expect(lent).toBe(0);
      expect(pool.workers).toBe(1);
      held.add(0, b.size);
      expect((await first).diffID).toBe(b.diffID);
      expect((await landed).diffID).toBe(small.diffID);
      expect(order).toEqual(['held', 'landed']);
    } finally {
      await pool.close();
    }
  });

  it('counts idle cores as the fewer of those the process left and those the machine left', () => {
    // 100 ms on 2 cores: the process used 50 ms of CPU, the machine was idle 10 ms (another program ran).
    expect(idleCores(2, 100, 50, 10)).toBeCloseTo(0.1);
    // The machine idle for 150 ms of core time: 1.5 cores, as the process left.
    expect(idleCores(2, 100, 50, 150)).toBeCloseTo(1.5);
    // More idle cores on the machine than this process may use: capped by its own.
    expect(idleCores(2, 100, 50, 1500)).toBeCloseTo(1.5);
    // The machine's count unknown: the process's own.
    expect(idleCores(2, 100, 150, Number.NaN)).toBeCloseTo(0.5);
  });

  it("reads the machine's idle time from the kernel: at least what the CPUs count as idle, at most all their time since boot", () => {
    const idleOfCpus = () => cpus().reduce((s, c) => s + c.times.idle, 0);
    const before = idleOfCpus();
    const idle = machineIdleMs();
    const after = idleOfCpus();
    expect(Number.isFinite(idle)).toBe(true);
    // Idle and iowait, where libuv counts idle alone (a tick per CPU of slack between the reads).
    expect(idle).toBeGreaterThanOrEqual(before - 10 * cpus().length);
    expect(after).toBeLessThanOrEqual(idle + 10 * cpus().length);
    expect(idle).toBeLessThanOrEqual((uptime() + 1) * 1000 * cpus().length);
  });

  it('keeps the slot of a pass that does not wait for its download', async () => {
    const pool = new UnpackPool({ size: 1 });
    try {
      expect(await overlapped(pool, 'busy')).toBe(false);
    } finally {
      await pool.close();
    }
  });

  it('gives a starting worker the largest of the layers that came while it started, not the first', async () => {
    for (const threads of [true, false]) {
      const pool = new UnpackPool({ size: 1, threads });
      try {
        const small = await blob(`first-small-${threads}`, 1);
        const big = await blob(`then-big-${threads}`, 3);
        const order: string[] = [];
        // Both come before the pool's only worker is ready: the larger one goes first.
        const low = pool.run(
          { blobPath: small.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`low-${threads}`) },
          { priority: 1, onStart: () => order.push('low') },
        );
        const high = pool.run(
          { blobPath: big.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`high-${threads}`) },
          { priority: 9, onStart: () => order.push('high') },
        );
        await Promise.all([low, high]);
        // On the calling thread there is nothing to wait for: the first comes first.
        expect(order).toEqual(threads ? ['high', 'low'] : ['low', 'high']);
      } finally {
        await pool.close();
      }
    }
  });

  it('says how many compressed bytes the pass consumed, on a worker thread and on the calling one', async () => {
    // Incompressible content: the blob is about as large as the tar, several read chunks long.
    const content = new Uint8Array(3 * 1024 * 1024 + 12345).map((_, i) => (i * 2654435761) >>> 24);
    const layer = await buildLayer([{ type: 'file', path: 'weights.bin', content }], { compression: 'gzip' });
    const path = join(work, 'counted.tgz');
    writeFileSync(path, layer.blob);
    for (const threads of [true, false]) {
      const pool = new UnpackPool({ size: 1, threads });
      try {
        expect(pool.threaded).toBe(threads);
        const mark = new Watermark(layer.size);
        const seen: { consumed: number; mark: number }[] = [];
        let progressed: { past: number; go: () => void } | undefined;
        const run = pool.run(
          { blobPath: path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest(`counted-${threads}`), follow: { watermark: mark.buffer, size: layer.size } },
          {
            onBytes: (consumed) => {
              seen.push({ consumed, mark: mark.value });
              if (progressed && consumed > progressed.past) progressed.go();
            },
          },
        );
        // Land the blob in four steps; each next step only once the pass has reported reading into
        // the bytes of this one (so the count is seen between steps, however slow the machine).
        for (let i = 1; i <= 4; i++) {
          const before = mark.value;
          const read = new Promise<void>((go) => (progressed = { past: before, go }));
          mark.add(0, Math.floor((layer.size * i) / 4));
          if (i < 4) await read;
        }
        const r = await run;
        expect(r.blobDigest).toBe(layer.digest);
        const counts = seen.map((s) => s.consumed);
        // Growing, never past what had landed, several values before the end, and the end itself.
        expect(counts, `threads ${threads}`).toEqual([...counts].sort((a, b) => a - b));
        expect(new Set(counts).size, `threads ${threads}`).toBe(counts.length);
        for (const s of seen) expect(s.consumed, `threads ${threads}`).toBeLessThanOrEqual(s.mark);
        expect(counts.filter((c) => c < layer.size).length, `threads ${threads}`).toBeGreaterThanOrEqual(2);
        expect(counts.at(-1), `threads ${threads}`).toBe(layer.size);
      } finally {
        await pool.close();
      }
    }
  });

  it('stops a follower when the download fails, and a waiting task on abort', async () => {
    const pool = new UnpackPool({ size: 1 });
    try {
      const b = await blob('failing', 2);
      const w = new Watermark(b.size);
      const run = pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('failing'), follow: { watermark: w.buffer, size: b.size } });
      const ac = new AbortController();
      const waiting = pool.run({ blobPath: b.path, mediaType: MediaTypes.OCI_LAYER_GZIP, dest: dest('waiting') }, { signal: ac.signal });
      ac.abort();
      await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
      w.fail();
      await expect(run).rejects.toMatchObject({ code: 'ABORTED' });
    } finally {
      await pool.close();
    }
  });

  it.skipIf(lacks('addon', InflatePool.available() ? undefined : 'the parallel decoder is not built'))(
    "hands a task's tuning to its pass on the worker: the slot memory it asks for bounds the process's budget",
    async () => {
      const budget = processInflateBudget();
      const before = budget.slotBytes;
      const asked = before + 1024 * 1024;
      const b = await blob('tuned', 20);
      const pool = new UnpackPool({ size: 1 });
      try {
        const r = await pool.run({
          blobPath: b.path,
          mediaType: MediaTypes.OCI_LAYER_GZIP,
          dest: dest('tuned'),
          inflater: 'parallel',
          tuning: { inflateSlotBytes: asked },
        });
        expect(r.diffID).toBe(b.diffID);
        // Set by the pass on the worker thread, read here: the budget's counters are shared.
        expect(budget.slotBytes).toBe(asked);
      } finally {
        budget.setSlotBytes(before);
        await pool.close();
      }
    },
  );
});
