import { describe, expect, it } from 'vitest';
import type { FastpullError } from '../errors.js';
import { sleep } from '../util/retry.js';
import { ProgressWatch } from './watchdog.js';

describe('ProgressWatch', () => {
  it('fails a pull whose running downloads got no byte for the timeout, and only then', async () => {
    const fired: FastpullError[] = [];
    const watch = new ProgressWatch(80, (e) => fired.push(e));
    try {
      // No download running: time without bytes does not count.
      await sleep(200);
      expect(fired).toEqual([]);
      const end = watch.start();
      // Bytes keep coming: no timeout however long it runs.
      for (let i = 0; i < 8; i++) {
        await sleep(25);
        watch.bytes();
      }
      expect(fired).toEqual([]);
      await sleep(250);
      expect(fired.length).toBeGreaterThan(0);
      expect(fired[0]!.code).toBe('NETWORK_ERROR');
      expect(fired[0]!.details).toEqual({ timeoutMs: 80 });
      end();
      end(); // twice is once
      const n = fired.length;
      await sleep(200);
      expect(fired.length).toBe(n);
    } finally {
      watch.stop();
    }
  });
});
