import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { collectHeap } from '@fastpull/core';
import { compactIdleMemory, footprint, IdleMemory, SETTLE_STEPS, YOUNG_GENERATION_SETTLED_BYTES, type SettleOutcome } from './idle.js';

const MiB = 1024 * 1024;

/** An IdleMemory whose workers and young generation are the test's; resolves each settling it reports. */
function harness(young: () => number) {
  const outcomes: SettleOutcome[] = [];
  const waiters: Array<() => void> = [];
  let retired = 0;
  const idle = new IdleMemory({
    retireWorkers: async () => ++retired,
    settled: (o) => {
      outcomes.push(o);
      for (const w of waiters.splice(0)) w();
    },
    delayMs: 1,
    stepMs: 1,
    youngGeneration: young,
  });
  const next = () => new Promise<void>((resolve) => waiters.push(resolve));
  return { idle, outcomes, next, retired: () => retired };
}

describe('IdleMemory', () => {
  it('settles once idle: ends the idle workers, then collects until the young generation is back to its smallest', async () => {
    // Read before each collection: large three times, small after the third.
    let calls = 0;
    const sizes = [32 * MiB, 32 * MiB, 32 * MiB, 1 * MiB];
    const h = harness(() => sizes[Math.min(calls++, sizes.length - 1)]!);
    const settled = h.next();
    h.idle.idle();
    await settled;
    expect(h.retired()).toBe(1);
    expect(h.outcomes).toEqual([{ workers: 1, steps: 3, youngGeneration: 1 * MiB }]);
  });

  it('gives up after SETTLE_STEPS collections when the young generation stays large', async () => {
    const h = harness(() => 16 * MiB);
    const settled = h.next();
    h.idle.schedule();
    await settled;
    expect(h.outcomes).toEqual([{ workers: 1, steps: SETTLE_STEPS, youngGeneration: 16 * MiB }]);
  });

  it('a pull that starts meanwhile stops the settling: only the next idle settles, once', async () => {
    let size = 32 * MiB;
    let looked!: () => void;
    const firstLook = new Promise<void>((resolve) => (looked = resolve));
    let first = true;
    // At its first look at the young generation, still large, a pull starts.
    const h = harness(() => {
      if (first) {
        first = false;
        queueMicrotask(() => {
          h.idle.busy();
          looked();
        });
      }
      return size;
    });
    h.idle.idle();
    await firstLook;
    // The next idle: the young generation is small at once, no collections.
    size = YOUNG_GENERATION_SETTLED_BYTES;
    const settled = h.next();
    h.idle.idle();
    await settled;
    expect(h.outcomes).toEqual([{ workers: 2, steps: 0, youngGeneration: YOUNG_GENERATION_SETTLED_BYTES }]);
  });

  it('settles nothing once stopped: no timer is left', () => {
    const h = harness(() => 1 * MiB);
    h.idle.schedule();
    expect(h.idle['timer']).toBeDefined();
    h.idle.stop();
    expect(h.idle['timer']).toBeUndefined();
    h.idle.idle();
    h.idle.schedule();
    expect(h.idle['timer']).toBeUndefined();
    expect(h.retired()).toBe(0);
  });

  it("reads this process's memory from the kernel and from V8", () => {
    const f = footprint();
    expect(f.rss).toBeGreaterThan(0);
    expect(f.rssAnon + f.rssFile).toBeLessThanOrEqual(f.rss + 1024 * 1024);
    expect(f.heapUsed).toBeGreaterThan(0);
    expect(f.heapTotal).toBeGreaterThanOrEqual(f.heapUsed);
  });

  const oldSpace = () => getHeapSpaceStatistics().find((sp) => sp.space_name === 'old_space')!.space_size;
  /** Objects that reach the old generation, then nine in ten of them dropped, spread over its pages. */
  const fragment = (): unknown[] => {
    let objects = Array.from({ length: 300_000 }, (_, i) => ({ i, s: `object ${i}` }));
    collectHeap('major');
    collectHeap('major');
    objects = objects.filter((_, i) => i % 10 === 0);
    collectHeap('major');
    return objects;
  };

  it('compacting: a fragmented old generation gives back the pages a plain full collection keeps, and the next plain one compacts as V8 decides again', () => {
    const kept = fragment();
    const fragmented = oldSpace();
    compactIdleMemory([]);
    const compacted = oldSpace();
    expect(compacted).toBeLessThan(fragmented - 4 * MiB);
    // The flag was set back: the same fragmenting leaves a plain full collection the pages.
    const again = fragment();
    expect(oldSpace()).toBeGreaterThan(compacted + 4 * MiB);
    expect(kept.length + again.length).toBe(60_000);
  });

  it("compacting leaves a compaction flag on node's command line as it is", () => {
    setFlagsFromString('--compact-on-every-full-gc'); // as node would have from its command line
    try {
      compactIdleMemory(['--compact-on-every-full-gc']);
      const compacted = oldSpace();
      // Still on: the plain full collections of the fragmenting compact (with it off, the first
      // test's fragmenting leaves more than this).
      const kept = fragment();
      expect(oldSpace()).toBeLessThan(compacted + 4 * MiB);
      expect(kept.length).toBe(30_000);
    } finally {
      setFlagsFromString('--no-compact-on-every-full-gc');
    }
  });
});
