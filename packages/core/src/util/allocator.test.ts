// tuneAllocator: applied once on glibc, skipped on request, refused with bad values; trimAllocator
// gives back what the tuned allocator keeps; while pulls hold it, free memory is trimmed on a timer;
// the download's writes bring a young collection every 16 MiB.
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nativeFs } from '../native/addon.js';
import {
  collectHeap,
  downloadWritten,
  FULL_COLLECTION_BYTES,
  HEAP_GROWING_PERCENT,
  heapGrowingFlag,
  holdPullMemory,
  MMAP_THRESHOLD,
  PULL_TRIM_INTERVAL_MS,
  PULL_TRIM_SLACK_BYTES,
  pullMemoryHolders,
  setPullMemoryHooks,
  TRIM_THRESHOLD,
  trimAllocator,
  tuneAllocator,
  YOUNG_COLLECTION_BYTES,
} from './allocator.js';
import { lacks } from '../testing/needs.js';

const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
const glibc = Boolean(report?.header?.glibcVersionRuntime);

describe('tuneAllocator', () => {
  it('leaves the allocator alone when FASTPULL_TUNE_MALLOC=0', () => {
    expect(tuneAllocator({ FASTPULL_TUNE_MALLOC: '0' })).toBe('disabled');
  });

  it('sets both thresholds on glibc, once', () => {
    const want = glibc ? 'tuned' : 'unsupported';
    expect(tuneAllocator({})).toBe(want);
    expect(tuneAllocator({})).toBe(want);
    // The call itself answers for each value: mallopt accepts them.
    expect(nativeFs().tuneAllocator(MMAP_THRESHOLD, TRIM_THRESHOLD)).toBe(glibc);
  });

  it('refuses values mallopt cannot take', () => {
    const native = nativeFs();
    expect(() => native.tuneAllocator(-1, TRIM_THRESHOLD)).toThrow(TypeError);
    expect(() => native.tuneAllocator(MMAP_THRESHOLD, Number.NaN)).toThrow(TypeError);
    expect(() => native.tuneAllocator(2 ** 31, TRIM_THRESHOLD)).toThrow(TypeError);
    expect(() => native.tuneAllocator(1.5, TRIM_THRESHOLD)).toThrow(TypeError);
  });
});

describe('heapGrowingFlag', () => {
  it("sets V8's heap growing factor unless node was started with one", () => {
    const ours = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
    expect(heapGrowingFlag([], undefined)).toBe(ours);
    expect(heapGrowingFlag(['--enable-source-maps'], '--max-old-space-size=512')).toBe(ours);
    // A flag that only starts the same way is someone else's.
    expect(heapGrowingFlag(['--heap-growing-percentage=5'], '')).toBe(ours);
    expect(heapGrowingFlag(['--heap-growing-percent=50'], undefined)).toBeUndefined();
    expect(heapGrowingFlag([], '--max-old-space-size=512  --heap_growing_percent=20')).toBeUndefined();
    expect(heapGrowingFlag(['--heap-growing-percent', '20'], undefined)).toBeUndefined();
  });

  it('is a flag this V8 knows: setting it prints no warning', async () => {
    const { spawnSync } = await import('node:child_process');
    const child = spawnSync(process.execPath, ['-e', `require('node:v8').setFlagsFromString(${JSON.stringify(heapGrowingFlag([], undefined))})`], {
      encoding: 'utf8',
    });
    expect(child.status).toBe(0);
    expect(child.stderr).toBe('');
    // An unknown flag would have said so on stderr: the check above can fail.
    const unknown = spawnSync(process.execPath, ['-e', `require('node:v8').setFlagsFromString('--heap-growing-percentx=5')`], { encoding: 'utf8' });
    expect(unknown.stderr).toMatch(/unknown|unrecognized/i);
  });
});

describe('trimAllocator', () => {
  it.skipIf(lacks('glibc', glibc ? undefined : 'the C library is not glibc'))(
    'returns to the kernel what the tuned allocator kept of freed buffers (glibc only)',
    () => {
      expect(tuneAllocator({})).toBe('tuned');
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      const MiB = 1024 * 1024;
      // 96 buffers of 1 MiB, written: below the 4 MiB mmap threshold they come from the heap, and
      // once freed they stay there (under the 64 MiB trim threshold per arena).
      let buffers: Buffer[] | undefined = Array.from({ length: 96 }, (_, i) => Buffer.alloc(MiB, i + 1));
      expect(buffers.length).toBe(96);
      buffers = undefined;
      gc();
      gc();
      const kept = process.memoryUsage.rss();
      expect(trimAllocator()).toBe(true);
      const after = process.memoryUsage.rss();
      expect(kept - after, `RSS ${(kept / MiB).toFixed(1)} MiB before the trim, ${(after / MiB).toFixed(1)} MiB after`).toBeGreaterThan(32 * MiB);
      // Told to leave the allocator alone, the process trims nothing either.
      expect(tuneAllocator({ FASTPULL_TUNE_MALLOC: '0' })).toBe('disabled');
      expect(trimAllocator()).toBe(false);
      expect(tuneAllocator({})).toBe('tuned');
    },
  );
  if (!glibc) console.log('trimAllocator test skipped: the C library is not glibc');
});

describe('holdPullMemory and downloadWritten', () => {
  afterEach(() => vi.useRealTimers());

  it('looks on a timer while any pull holds it, and stops when the last lets go', () => {
    vi.useFakeTimers();
    let trims = 0;
    let looks = 0;
    // The RSS grows by the slack between two looks: every look trims.
    const restore = setPullMemoryHooks({ trim: () => void trims++, rss: () => looks++ * PULL_TRIM_SLACK_BYTES });
    try {
      const a = holdPullMemory();
      const b = holdPullMemory();
      expect(pullMemoryHolders()).toBe(2);
      vi.advanceTimersByTime(2 * PULL_TRIM_INTERVAL_MS + 10);
      // One timer for both holders, not one each.
      expect(trims).toBe(2);
      a();
      a(); // a second release of the same hold changes nothing
      expect(pullMemoryHolders()).toBe(1);
      vi.advanceTimersByTime(PULL_TRIM_INTERVAL_MS);
      expect(trims).toBe(3);
      b();
      expect(pullMemoryHolders()).toBe(0);
      vi.advanceTimersByTime(10 * PULL_TRIM_INTERVAL_MS);
      expect(trims).toBe(3);
    } finally {
      restore();
    }
  });

  it('trims only once the RSS grew by the slack since the hold began or the last trim', () => {
    vi.useFakeTimers();
    const MiB = 1024 * 1024;
    let rss = 100 * MiB;
    const trimmed: number[] = [];
    // A trim gives back 30 MiB, as a pull's churned buffers did.
    const restore = setPullMemoryHooks({
      trim: () => {
        trimmed.push(rss / MiB);
        rss -= 30 * MiB;
      },
      rss: () => rss,
    });
    const release = holdPullMemory();
    const tick = (to: number): void => {
      rss = to * MiB;
      vi.advanceTimersByTime(PULL_TRIM_INTERVAL_MS);
    };
    try {
      const slack = PULL_TRIM_SLACK_BYTES / MiB;
      tick(100 + slack - 1); // below the floor the hold began at, plus the slack
      expect(trimmed).toEqual([]);
      tick(100 + slack);
      expect(trimmed).toEqual([100 + slack]);
      // The floor is now what the trim left: growing back by less than the slack trims nothing.
      tick(100 + slack - 30 + slack - 1);
      tick(100);
      expect(trimmed).toHaveLength(1);
      tick(100 + 2 * slack - 30);
      expect(trimmed).toEqual([100 + slack, 100 + 2 * slack - 30]);
    } finally {
      release();
      restore();
    }
  });

  it('collects the whole heap instead of the young generation once per 256 MiB the download writes', () => {
    const kinds: string[] = [];
    const restore = setPullMemoryHooks({ collectYoung: () => void kinds.push('young'), collectFull: () => void kinds.push('full') });
    try {
      const per = FULL_COLLECTION_BYTES / YOUNG_COLLECTION_BYTES;
      for (let n = 0; n < 2 * per; n++) downloadWritten(YOUNG_COLLECTION_BYTES);
      const round = [...Array<string>(per - 1).fill('young'), 'full'];
      expect(kinds).toEqual([...round, ...round]);
    } finally {
      restore();
    }
  });

  it('collects the young generation once per 16 MiB the download writes, whatever the write sizes', () => {
    let collections = 0;
    const restore = setPullMemoryHooks({ collectYoung: () => void collections++, collectFull: () => undefined });
    try {
      const chunk = 64 * 1024;
      for (let n = 0; n < YOUNG_COLLECTION_BYTES / chunk - 1; n++) downloadWritten(chunk);
      expect(collections).toBe(0);
      downloadWritten(chunk);
      expect(collections).toBe(1);
      downloadWritten(YOUNG_COLLECTION_BYTES - 1);
      expect(collections).toBe(1);
      downloadWritten(1);
      expect(collections).toBe(2);
    } finally {
      restore();
    }
  });

  it.skipIf(lacks('glibc', glibc ? undefined : 'the C library is not glibc'))(
    'once tuned, the writes of a download run real young collections (glibc only)',
    async () => {
      expect(tuneAllocator({})).toBe('tuned');
      const minor: number[] = [];
      const observer = new PerformanceObserver((list) => {
        for (const e of list.getEntries())
          if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) minor.push(e.startTime);
      });
      observer.observe({ entryTypes: ['gc'] });
      try {
        const from = performance.now();
        for (let n = 0; n < 3; n++) downloadWritten(YOUNG_COLLECTION_BYTES);
        await new Promise((r) => setTimeout(r, 50));
        // V8's own collections could add some, never take ours away.
        expect(minor.filter((t) => t >= from).length).toBeGreaterThanOrEqual(3);
      } finally {
        observer.disconnect();
      }
    },
  );
});

describe('collectHeap', () => {
  it('runs the collection asked for on this thread, without --expose-gc on the command line', async () => {
    const kinds: number[] = [];
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) kinds.push((e as { detail?: { kind?: number } }).detail?.kind ?? -1);
    });
    observer.observe({ entryTypes: ['gc'] });
    try {
      expect(collectHeap('major')).toBe(true);
      expect(collectHeap('minor')).toBe(true);
      await new Promise((r) => setTimeout(r, 50));
      expect(kinds).toContain(constants.NODE_PERFORMANCE_GC_MAJOR);
      expect(kinds).toContain(constants.NODE_PERFORMANCE_GC_MINOR);
    } finally {
      observer.disconnect();
    }
  });
});
