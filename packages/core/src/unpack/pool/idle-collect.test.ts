import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IDLE_COLLECT_MS, IdleCollector } from './idle-collect.js';

describe('IdleCollector', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('collects once, after the delay, when no work arrives', () => {
    const collect = vi.fn();
    const idle = new IdleCollector(collect);
    idle.idle();
    expect(idle.pending).toBe(true);
    vi.advanceTimersByTime(IDLE_COLLECT_MS - 1);
    expect(collect).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(collect).toHaveBeenCalledTimes(1);
    expect(idle.pending).toBe(false);
    vi.advanceTimersByTime(10 * IDLE_COLLECT_MS);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('skips the collection when work arrives within the delay, and waits for the next idle', () => {
    const collect = vi.fn();
    const idle = new IdleCollector(collect, 20);
    // Back-to-back passes: each ends and the next arrives 5 ms later.
    for (let i = 0; i < 10; i++) {
      idle.idle();
      vi.advanceTimersByTime(5);
      idle.busy();
    }
    vi.advanceTimersByTime(100);
    expect(collect).not.toHaveBeenCalled();
    idle.idle();
    vi.advanceTimersByTime(20);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('restarts the delay when idle is called again', () => {
    const collect = vi.fn();
    const idle = new IdleCollector(collect, 20);
    idle.idle();
    vi.advanceTimersByTime(15);
    idle.idle();
    vi.advanceTimersByTime(15);
    expect(collect).not.toHaveBeenCalled();
    vi.advanceTimersByTime(5);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('busy without a pending collection does nothing', () => {
    const collect = vi.fn();
    const idle = new IdleCollector(collect, 20);
    idle.busy();
    vi.advanceTimersByTime(100);
    expect(collect).not.toHaveBeenCalled();
    expect(idle.pending).toBe(false);
  });
});
