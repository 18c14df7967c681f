// Tests of the seeded generator: repeatable sequences, bounds and lengths.
import { describe, expect, it } from 'vitest';
import { Prng } from './prng.js';

describe('Prng', () => {
  it('repeats the same sequence for the same seed and differs for another', () => {
    const a = new Prng(7);
    const b = new Prng(7);
    const c = new Prng(8);
    const seqA = Array.from({ length: 20 }, () => a.nextUint32());
    expect(Array.from({ length: 20 }, () => b.nextUint32())).toEqual(seqA);
    expect(Array.from({ length: 20 }, () => c.nextUint32())).not.toEqual(seqA);
    expect(new Prng(7).bytes(1001).equals(new Prng(7).bytes(1001))).toBe(true);
  });

  it('keeps int within its bounds and reaches both ends', () => {
    const rng = new Prng(1);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const v = rng.int(3, 7);
      expect(v).toBeGreaterThanOrEqual(3);
      expect(v).toBeLessThanOrEqual(7);
      seen.add(v);
    }
    expect([...seen].sort()).toEqual([3, 4, 5, 6, 7]);
    expect(() => rng.int(5, 4)).toThrow(RangeError);
  });

  it('makes bytes, binary and text of exactly the asked length', () => {
    const rng = new Prng(2);
    for (const n of [0, 1, 3, 4, 5, 4097]) {
      expect(rng.bytes(n).byteLength).toBe(n);
      expect(rng.binary(n).byteLength).toBe(n);
      expect(rng.text(n)).toHaveLength(n);
    }
    expect(rng.text(500)).toMatch(/^[A-Za-z .\n]+$/);
    expect(rng.pick(['only'])).toBe('only');
    expect(() => rng.pick([])).toThrow(RangeError);
    expect(rng.shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5]);
  });
});
