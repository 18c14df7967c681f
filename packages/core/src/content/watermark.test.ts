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
});
