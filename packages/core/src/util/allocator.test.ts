// tuneAllocator: applied once on glibc, skipped on request, refused with bad values; trimAllocator
// gives back what the tuned allocator keeps.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { nativeFs } from '../unpack/native.js';
import { MMAP_THRESHOLD, TRIM_THRESHOLD, trimAllocator, tuneAllocator } from './allocator.js';

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

describe('trimAllocator', () => {
  it.skipIf(!glibc)('returns to the kernel what the tuned allocator kept of freed buffers (glibc only)', () => {
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
    expect(trimAllocator({})).toBe(true);
    const after = process.memoryUsage.rss();
    expect(kept - after, `RSS ${(kept / MiB).toFixed(1)} MiB before the trim, ${(after / MiB).toFixed(1)} MiB after`).toBeGreaterThan(32 * MiB);
    expect(trimAllocator({ FASTPULL_TUNE_MALLOC: '0' })).toBe(false);
  });
  if (!glibc) console.log('trimAllocator test skipped: the C library is not glibc');
});
