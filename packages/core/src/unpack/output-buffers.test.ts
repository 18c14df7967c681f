// Tests of a decoder's output buffers filled again once released.
import { describe, expect, it } from 'vitest';
import { OUTPUT_BUFFERS_RETIRED, OUTPUT_BUFFERS_SPARE, OutputBuffers } from './output-buffers.js';

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
    const out = new OutputBuffers(4);
    const bufs = Array.from({ length: OUTPUT_BUFFERS_SPARE + 5 }, () => out.take());
    bufs.forEach((b, i) => out.retire(b, (i + 1) * 4));
    out.release(Number.MAX_SAFE_INTEGER);
    const again = new Set(Array.from({ length: OUTPUT_BUFFERS_SPARE + 5 }, () => out.take()));
    expect(bufs.filter((b) => again.has(b))).toHaveLength(OUTPUT_BUFFERS_SPARE);

    // A reader that never releases: the oldest retired ones are forgotten, never handed out again.
    const stalled = new OutputBuffers(4);
    const held = Array.from({ length: OUTPUT_BUFFERS_RETIRED + 3 }, () => stalled.take());
    held.forEach((b, i) => stalled.retire(b, (i + 1) * 4));
    stalled.release((OUTPUT_BUFFERS_RETIRED + 3) * 4);
    const taken = new Set(Array.from({ length: OUTPUT_BUFFERS_RETIRED + 3 }, () => stalled.take()));
    for (const b of held.slice(0, 3)) expect(taken.has(b)).toBe(false);
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
