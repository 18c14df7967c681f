import { describe, expect, it } from 'vitest';
import { READ_BUFFERS_SPARE, ReadBuffers } from './read-buffers.js';

describe('ReadBuffers', () => {
  it('gives a buffer back to take() only once every reader gave its chunk back', () => {
    const buffers = new ReadBuffers(64, 2);
    const hashed = buffers.reader(0);
    const decoded = buffers.reader(1);
    const a = buffers.take();
    expect(a.length).toBe(64);
    const chunk = buffers.lend(a, 10);
    expect(chunk.length).toBe(10);
    expect(chunk.buffer).toBe(a.buffer);
    hashed(chunk);
    hashed(chunk); // the same reader again changes nothing
    const b = buffers.take();
    expect(b).not.toBe(a);
    decoded(chunk);
    expect(buffers.take()).toBe(a);
    expect(buffers.counts).toEqual({ allocated: 2, recycled: 1 });
  });

  it('hands a whole buffer out as it is, and ignores chunks it did not lend', () => {
    const buffers = new ReadBuffers(16, 1);
    const done = buffers.reader(0);
    const a = buffers.take();
    const chunk = buffers.lend(a, 16);
    expect(chunk).toBe(a);
    done(Buffer.alloc(16)); // not lent
    done(a.subarray(0, 16)); // another view of the same bytes: not what was lent
    expect(buffers.take()).not.toBe(a);
    done(chunk);
    expect(buffers.take()).toBe(a);
  });

  it('keeps at most its spare count of buffers that came back', () => {
    const buffers = new ReadBuffers(8, 1, 2);
    const done = buffers.reader(0);
    const lent = [0, 1, 2, 3].map(() => buffers.lend(buffers.take(), 8));
    for (const c of lent) done(c);
    const again = [buffers.take(), buffers.take(), buffers.take()];
    expect(again.filter((b) => lent.includes(b))).toHaveLength(2);
    expect(buffers.counts).toEqual({ allocated: 5, recycled: 2 });
  });

  it('keeps the default spare count', () => {
    const buffers = new ReadBuffers(8, 1);
    const done = buffers.reader(0);
    const lent = Array.from({ length: READ_BUFFERS_SPARE + 4 }, () => buffers.lend(buffers.take(), 8));
    for (const c of lent) done(c);
    for (let i = 0; i < READ_BUFFERS_SPARE + 4; i++) buffers.take();
    expect(buffers.counts.recycled).toBe(READ_BUFFERS_SPARE);
  });

  it('refuses a bad size, reader count or reader index', () => {
    expect(() => new ReadBuffers(0, 1)).toThrow(RangeError);
    expect(() => new ReadBuffers(8, 0)).toThrow(RangeError);
    expect(() => new ReadBuffers(8, 31)).toThrow(RangeError);
    expect(() => new ReadBuffers(8, 2).reader(2)).toThrow(RangeError);
    expect(() => new ReadBuffers(8, 2).reader(-1)).toThrow(RangeError);
  });
});
