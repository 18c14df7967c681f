import { describe, expect, it } from 'vitest';
import { Watermark, WatermarkView } from './watermark.js';

describe('Watermark', () => {
  it('advances only over the contiguous prefix, whatever the order ranges land in', () => {
    const w = new Watermark(100);
    w.add(50, 60);
    w.add(20, 30);
    expect(w.value).toBe(0);
    w.add(0, 10);
    expect(w.value).toBe(10);
    w.add(10, 20);
    expect(w.value).toBe(30);
    w.add(30, 50);
    expect(w.value).toBe(60);
    w.add(70, 100);
    w.add(60, 65);
    expect(w.value).toBe(65);
    w.add(65, 70);
    expect(w.value).toBe(100);
  });

  it('merges overlapping and repeated ranges', () => {
    const w = new Watermark(40);
    w.add(10, 20);
    w.add(15, 30);
    w.add(12, 14);
    w.add(0, 11);
    expect(w.value).toBe(30);
    w.add(0, 5);
    expect(w.value).toBe(30);
  });

  it('wakes a waiting reader through the shared buffer when it advances or fails', async () => {
    const w = new Watermark(10);
    const view = new WatermarkView(w.buffer);
    const waited = view.waitPast(0, 5000);
    setTimeout(() => w.add(0, 4), 10);
    await waited;
    expect(view.value).toBe(4);
    const again = view.waitPast(4, 5000);
    setTimeout(() => w.fail(), 10);
    await again;
    expect(view.failed).toBe(true);
  });

  it('is complete at once for blobs already on disk', () => {
    expect(Watermark.complete(123).value).toBe(123);
  });

  it("lists ranges without the bytes a reader may free, and grants a reader's ask only once the record is saved", () => {
    const w = new Watermark(100);
    w.add(0, 40);
    w.add(60, 80);
    expect(w.ranges(30)).toEqual([
      [30, 40],
      [60, 80],
    ]);
    expect(w.ranges(50)).toEqual([[60, 80]]);
    const reader = new WatermarkView(w.buffer);
    const recorded: number[] = [];
    expect(w.grantRelease((from) => recorded.push(from))).toBe(0); // nothing asked: nothing saved
    expect(recorded).toEqual([]);
    reader.askRelease(32);
    reader.askRelease(16); // asks never move back
    expect(reader.releaseAsked).toBe(32);
    expect(reader.releaseGranted).toBe(0);
    // A record that cannot be saved grants nothing.
    expect(() =>
      w.grantRelease(() => {
        throw new Error('ENOSPC');
      }),
    ).toThrow('ENOSPC');
    expect(reader.releaseGranted).toBe(0);
    expect(w.grantRelease((from) => recorded.push(from))).toBe(32);
    expect(recorded).toEqual([32]);
    expect(reader.releaseGranted).toBe(32);
    expect(w.grantRelease((from) => recorded.push(from))).toBe(32); // granted already: no new record
    expect(recorded).toEqual([32]);
  });
});
