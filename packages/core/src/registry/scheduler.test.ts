import { describe, expect, it } from 'vitest';
import { FetchScheduler } from './scheduler.js';

/** A task that runs until released, recording how many run at once. */
function harness(s: FetchScheduler) {
  let running = 0;
  let peak = 0;
  const gates: (() => void)[] = [];
  const start = (host: string, bytes: number, signal?: AbortSignal) =>
    s.run(
      host,
      bytes,
      () =>
        new Promise<void>((resolve) => {
          running++;
          peak = Math.max(peak, running);
          gates.push(() => {
            running--;
            resolve();
          });
        }),
      signal,
    );
  const tick = () => new Promise((r) => setTimeout(r, 5));
  return {
    start,
    gates,
    tick,
    get running() {
      return running;
    },
    get peak() {
      return peak;
    },
  };
}

describe('FetchScheduler', () => {
  it('bounds requests globally and per host, without one busy host blocking another', async () => {
    const s = new FetchScheduler({ maxRequests: 3, maxPerHost: 2, maxBytes: 1 << 30 });
    const h = harness(s);
    const all = [h.start('a', 1), h.start('a', 1), h.start('a', 1), h.start('b', 1), h.start('b', 1)];
    await h.tick();
    expect(h.running).toBe(3); // a, a, b: the third a waits for its host, b goes past it
    while (h.gates.length > 0) {
      h.gates.shift()!();
      await h.tick();
    }
    await Promise.all(all);
    expect(h.peak).toBe(3);
    expect(s.inFlight).toEqual({ requests: 0, bytes: 0 });
  });

  it('keeps bytes in flight under the budget, but always lets one request through', async () => {
    const s = new FetchScheduler({ maxRequests: 10, maxPerHost: 10, maxBytes: 100 });
    const h = harness(s);
    const all = [h.start('a', 60), h.start('a', 60), h.start('a', 500)];
    await h.tick();
    expect(h.running).toBe(1);
    h.gates.shift()!();
    await h.tick();
    expect(h.running).toBe(1);
    h.gates.shift()!();
    await h.tick();
    expect(h.running).toBe(1); // 500 bytes alone exceed the budget, and run alone
    h.gates.shift()!();
    await Promise.all(all);
  });

  it('withdraws a waiting request on abort', async () => {
    const s = new FetchScheduler({ maxRequests: 1 });
    const h = harness(s);
    const first = h.start('a', 1);
    const ac = new AbortController();
    const second = h.start('a', 1, ac.signal);
    ac.abort();
    await expect(second).rejects.toMatchObject({ code: 'ABORTED' });
    await h.tick();
    h.gates.shift()!();
    await first;
    expect(s.inFlight.requests).toBe(0);
  });
});
