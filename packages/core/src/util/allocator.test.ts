// tuneAllocator: applied once on glibc, skipped on request, refused with bad values.
import { describe, expect, it } from 'vitest';
import { nativeFs } from '../unpack/native.js';
import { MMAP_THRESHOLD, TRIM_THRESHOLD, tuneAllocator } from './allocator.js';

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
