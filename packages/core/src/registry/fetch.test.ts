import { describe, expect, it } from 'vitest';
import { missingRanges } from './fetch.js';

describe('missingRanges', () => {
  it('is the complement of what is on disk', () => {
    expect(missingRanges(100, [])).toEqual([{ start: 0, end: 100 }]);
    expect(missingRanges(100, [[0, 100]])).toEqual([]);
    expect(
      missingRanges(100, [
        [10, 20],
        [0, 5],
        [50, 100],
      ]),
    ).toEqual([
      { start: 5, end: 10 },
      { start: 20, end: 50 },
    ]);
    expect(
      missingRanges(100, [
        [0, 30],
        [20, 40],
        [90, 120],
      ]),
    ).toEqual([{ start: 40, end: 90 }]);
    expect(missingRanges(0, [])).toEqual([]);
  });
});
