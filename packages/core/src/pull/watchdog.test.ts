import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FastpullError } from '../errors.js';
import { ProgressWatch } from './watchdog.js';

describe('ProgressWatch', () => {
  // The watch reads performance.now() on its own interval: both are faked, so time passes only
  // when the test says so, however loaded the machine is.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fails a pull whose running downloads got no byte for the timeout, and only then', () => {
    const fired: FastpullError[] = [];
    const watch = new ProgressWatch(80, (e) => fired.push(e));
    try {
      // No download running: time without bytes does not count.
      vi.advanceTimersByTime(10_000);
      expect(fired).toEqual([]);
      const end = watch.start();
      // Bytes keep coming, each well within the timeout: no timeout however long it runs.
      for (let i = 0; i < 100; i++) {
        vi.advanceTimersByTime(60);
        watch.bytes();
      }
      expect(fired).toEqual([]);
      // Just under the timeout since the last byte: still nothing; past it: one failure.
      vi.advanceTimersByTime(79);
      expect(fired).toEqual([]);
      vi.advanceTimersByTime(30);
      expect(fired).toHaveLength(1);
      expect(fired[0]!.code).toBe('NETWORK_ERROR');
      expect(fired[0]!.details).toEqual({ timeoutMs: 80 });
      end();
      end(); // twice is once
      vi.advanceTimersByTime(10_000);
      expect(fired).toHaveLength(1);
    } finally {
      watch.stop();
    }
  });

  it('counts from the start of the first download, not from when the watch was made', () => {
    const fired: FastpullError[] = [];
    const watch = new ProgressWatch(80, (e) => fired.push(e));
    try {
      vi.advanceTimersByTime(5_000);
      const end = watch.start();
      vi.advanceTimersByTime(60);
      expect(fired).toEqual([]);
      // A second download starting does not restart the count: only bytes do.
      const end2 = watch.start();
      vi.advanceTimersByTime(60);
      expect(fired).toHaveLength(1);
      end();
      end2();
    } finally {
      watch.stop();
    }
  });
});
