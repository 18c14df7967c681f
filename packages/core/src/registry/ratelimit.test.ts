// The rate limiter's arithmetic on a clock the test moves: when reads go, in which order, and how many
// bytes pass by a given time. Nothing here waits for a real timer.
import { describe, expect, it } from 'vitest';
import { parseRateLimit } from '../service/settings.js';
import { defaultBurst, LOWER_SHARE, MIN_BURST, RateLimiter, throttleOf, type RateClock } from './ratelimit.js';

/** A clock whose time moves only when told; scheduled callbacks run as it passes them. */
class ManualClock implements RateClock {
  t = 0;
  private tasks: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;
  now(): number {
    return this.t;
  }
  schedule(fn: () => void, ms: number): unknown {
    const id = ++this.ids;
    this.tasks.push({ at: this.t + ms, fn, id });
    return id;
  }
  cancel(handle: unknown): void {
    this.tasks = this.tasks.filter((t) => t.id !== handle);
  }
  /** Moves time on by `ms`, running what falls due in order, then lets promise callbacks run. */
  async advance(ms: number): Promise<void> {
    const until = this.t + ms;
    for (;;) {
      this.tasks.sort((a, b) => a.at - b.at);
      const due = this.tasks[0];
      if (due === undefined || due.at > until) break;
      this.tasks.shift();
      this.t = due.at;
      due.fn();
      await settle();
    }
    this.t = until;
    await settle();
  }
  get pending(): number {
    return this.tasks.length;
  }
}

/** Lets every promise callback queued so far run (no timer: microtasks only). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

const KiB = 1024;

describe('RateLimiter', () => {
  it('lets a full bucket go at once, then one read per refill', async () => {
    const clock = new ManualClock();
    const l = new RateLimiter(1000, { burst: 1000, clock });
    expect(l.take(600)).toBeUndefined();
    expect(l.take(400)).toBeUndefined();
    let went = false;
    void l.take(500)!.then(() => (went = true));
    expect(l.waiting).toBe(1);
    expect(l.nextGrantMs).toBe(500);
    await clock.advance(499);
    expect(went).toBe(false);
    await clock.advance(1);
    expect(went).toBe(true);
    expect(l.bytesGranted).toBe(1500);
  });

  it('never lets more than burst + rate * t pass by time t, and keeps up the rate', async () => {
    const clock = new ManualClock();
    const rate = 100 * KiB;
    const l = new RateLimiter(rate, { clock });
    const burst = l.burst;
    expect(burst).toBe(MIN_BURST);
    let passed = 0;
    // Four readers reading 64 KiB at a time as fast as the limiter lets them.
    const reader = async (): Promise<void> => {
      for (;;) {
        passed += 64 * KiB;
        const wait = l.take(64 * KiB);
        if (wait) await wait;
      }
    };
    for (let i = 0; i < 4; i++) void reader();
    for (let step = 1; step <= 200; step++) {
      await clock.advance(50);
      // Read and taken: what has passed is what the limiter granted, less those still waiting.
      expect(l.bytesGranted).toBeLessThanOrEqual(burst + (rate * clock.t) / 1000);
    }
    // 10 s at 100 KiB/s: within one read of the rate.
    expect(l.bytesGranted).toBeGreaterThanOrEqual(burst + rate * 10 - 64 * KiB);
    expect(passed).toBeGreaterThan(0);
  });

  it('grants a waiting read of higher rank before lower ones that waited longer', async () => {
    const clock = new ManualClock();
    const l = new RateLimiter(1000, { burst: 1000, clock });
    expect(l.take(1000, 0)).toBeUndefined();
    const order: string[] = [];
    void l.take(100, 0)!.then(() => order.push('low1'));
    void l.take(100, 1)!.then(() => order.push('normal'));
    void l.take(100, 0)!.then(() => order.push('low2'));
    void l.take(100, 2)!.then(() => order.push('high'));
    // A high read while lower ones wait and tokens are there still goes through the queue's order.
    await clock.advance(1000);
    expect(order).toEqual(['high', 'normal', 'low1', 'low2']);
  });

  it('lets a high read go at once past waiting low reads when the bucket holds enough', async () => {
    const clock = new ManualClock();
    const l = new RateLimiter(1000, { burst: 1000, clock });
    expect(l.take(900, 0)).toBeUndefined();
    const low = l.take(500, 0);
    expect(low).toBeDefined();
    // 100 tokens are there: a high read of 100 needs no wait, the low one keeps waiting.
    expect(l.take(100, 2)).toBeUndefined();
    // A normal read waits behind nobody of its rank but finds the bucket empty.
    expect(l.take(100, 1)).toBeDefined();
  });

  it('gives lower ranks a floor of one byte for every LOWER_SHARE granted above them', async () => {
    const clock = new ManualClock();
    const rate = 64 * KiB;
    const l = new RateLimiter(rate, { burst: 64 * KiB, clock });
    const got = { high: 0, low: 0 };
    const reader = (rank: number, key: 'high' | 'low') => async (): Promise<void> => {
      for (;;) {
        const wait = l.take(16 * KiB, rank);
        if (wait) await wait;
        got[key] += 16 * KiB;
      }
    };
    for (let i = 0; i < 4; i++) void reader(2, 'high')();
    for (let i = 0; i < 4; i++) void reader(0, 'low')();
    await clock.advance(100_000);
    const total = got.high + got.low;
    expect(total).toBeGreaterThan(rate * 99);
    // The low readers got their floor and no more than about it.
    expect(got.low / total).toBeGreaterThan(1 / (LOWER_SHARE + 1) / 2);
    expect(got.low / total).toBeLessThan(2 / (LOWER_SHARE + 1));
  });

  it('lets every waiting read go when the rate is set to 0, and slows them when it is lowered', async () => {
    const clock = new ManualClock();
    const l = new RateLimiter(1000, { burst: 1000, clock });
    expect(l.take(1000)).toBeUndefined();
    let went = 0;
    for (let i = 0; i < 3; i++) void l.take(1000)!.then(() => went++);
    l.setRate(0);
    await settle();
    expect(went).toBe(3);
    expect(l.waiting).toBe(0);
    expect(clock.pending).toBe(0);
    expect(l.take(1e9)).toBeUndefined();
    // From no limit to 100 B/s: the bucket holds its burst (1000 here) and refills at the new rate.
    l.setRate(100);
    expect(l.take(1000)).toBeUndefined();
    let late = false;
    void l.take(500)!.then(() => (late = true));
    await clock.advance(4999);
    expect(late).toBe(false);
    await clock.advance(1);
    expect(late).toBe(true);
  });

  it('takes the default burst from the rate', () => {
    expect(defaultBurst(1000)).toBe(MIN_BURST);
    expect(defaultBurst(100 * 1024 ** 2)).toBe(5 * 1024 ** 2);
    expect(new RateLimiter(100 * 1024 ** 2).burst).toBe(defaultBurst(100 * 1024 ** 2));
    expect(() => new RateLimiter(-1)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => new RateLimiter(1.5)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => new RateLimiter(10, { burst: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('throttleOf', () => {
  it('is absent without a limit, so an unlimited pull calls nothing per read', () => {
    expect(throttleOf([], { rank: 1 })).toBeUndefined();
    expect(throttleOf([undefined, 0], { rank: 1 })).toBeUndefined();
  });

  it('holds a read until every limiter over it lets it go, at the rank read when it asks', async () => {
    const clock = new ManualClock();
    const own = new RateLimiter(1000, { burst: 1000, clock });
    const shared = new RateLimiter(500, { burst: 500, clock });
    const ticket = { rank: 0 };
    const t = throttleOf([own, shared], ticket)!;
    expect(t.take(500)).toBeUndefined();
    let went = false;
    void t.take(500)!.then(() => (went = true));
    expect(t.waiting).toBe(1);
    // The own bucket has 500 left; the shared one is empty and takes 1 s to refill 500.
    await clock.advance(999);
    expect(went).toBe(false);
    await clock.advance(1);
    expect(went).toBe(true);
    expect(t.waiting).toBe(0);
    // Raised: the next read queues at rank 2 in the shared limiter.
    ticket.rank = 2;
    expect(shared.take(500, 0)).toBeDefined();
    let high = false;
    void t.take(100)!.then(() => (high = true));
    await clock.advance(200);
    expect(high).toBe(true);
  });
});

describe('parseRateLimit', () => {
  it('reads sizes per second, and 0 or none as no limit', () => {
    expect(parseRateLimit('50MiB', '--rate-limit')).toBe(50 * 1024 ** 2);
    expect(parseRateLimit('1.5GB', '--rate-limit')).toBe(1.5e9);
    expect(parseRateLimit('800KiB', '--rate-limit')).toBe(800 * 1024);
    expect(parseRateLimit('800KiB/s', '--rate-limit')).toBe(800 * 1024);
    expect(parseRateLimit(1048576, 'rate_limit')).toBe(1048576);
    for (const none of ['0', 0, 'none', 'NONE', '', '0MiB']) expect(parseRateLimit(none, 'rate_limit')).toBe(0);
    for (const bad of ['fast', '-1', '5 parsecs', -5, 1.5, '1e6', true, '0.1']) {
      expect(() => parseRateLimit(bad, '--rate-limit'), String(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('--rate-limit') }),
      );
    }
  });
});
