// Tests of a decoder's output buffers filled again once released.
import { describe, expect, it } from 'vitest';
import { OUTPUT_RETIRED_BYTES, OUTPUT_SPARE_BYTES, OutputBuffers } from './output-buffers.js';

describe('OutputBuffers', () => {
  it('gives a retired buffer again only once every byte in it is released', () => {
    const out = new OutputBuffers(16);
    const a = out.take();
    const b = out.take();
    out.retire(a, 16); // a held output [0, 16)
    out.retire(b, 32); // b held [16, 32)
    out.release(15);
    const c = out.take();
    expect(c).not.toBe(a);
    out.release(16);
    expect(out.take()).toBe(a);
    expect(out.take()).not.toBe(b);
    out.release(32);
    expect(out.take()).toBe(b);
    expect(out.counts).toEqual({ allocated: 4, recycled: 2 });
  });

  it('only goes forward: a smaller offset releases nothing more', () => {
    const out = new OutputBuffers(8);
    const a = out.take();
    out.release(100);
    out.release(3);
    out.retire(a, 50);
    expect(out.take()).toBe(a);
  });

  it('keeps a bounded number of spare and of retired buffers, leaving the rest to the collector', () => {
    for (const size of [1 << 20, 256 * 1024]) {
      const out = new OutputBuffers(size);
      // 16 MiB spare and 32 MiB retired, whatever the buffers' size.
      expect([out.spareMax * size, out.retiredMax * size]).toEqual([OUTPUT_SPARE_BYTES, OUTPUT_RETIRED_BYTES]);
      const bufs = Array.from({ length: out.spareMax + 5 }, () => out.take());
      bufs.forEach((b, i) => out.retire(b, (i + 1) * size));
      out.release(Number.MAX_SAFE_INTEGER);
      const again = new Set(Array.from({ length: out.spareMax + 5 }, () => out.take()));
      expect(bufs.filter((b) => again.has(b))).toHaveLength(out.spareMax);

      // A reader that never releases: the oldest retired ones are forgotten, never handed out again.
      const stalled = new OutputBuffers(size);
      const held = Array.from({ length: stalled.retiredMax + 3 }, () => stalled.take());
      held.forEach((b, i) => stalled.retire(b, (i + 1) * size));
      stalled.release((stalled.retiredMax + 3) * size);
      const taken = new Set(Array.from({ length: stalled.retiredMax + 3 }, () => stalled.take()));
      for (const b of held.slice(0, 3)) expect(taken.has(b)).toBe(false);
      expect(held.slice(3).filter((b) => taken.has(b))).toHaveLength(Math.min(stalled.spareMax, stalled.retiredMax));
    }
  });

  it('gives nothing again after clear()', () => {
    const out = new OutputBuffers(4);
    const a = out.take();
    out.retire(a, 4);
    out.release(4);
    out.clear();
    expect(out.take()).not.toBe(a);
  });

  it('refuses a size that is not a positive integer', () => {
    expect(() => new OutputBuffers(0)).toThrow(RangeError);
    expect(() => new OutputBuffers(1.5)).toThrow(RangeError);
  });
});
