import { describe, expect, it } from 'vitest';
import { backoffMs, BACKOFF_MAX_MS, parseRetryAfter, retryDelayMs } from './retry.js';

describe('retry timing', () => {
  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('Wed, 02 Dec 2026 15:00:00 GMT');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Wed, 02 Dec 2026 15:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 02 Dec 2026 14:00:00 GMT', now)).toBe(0);
    for (const bad of [undefined, '', '-1', '1.5', 'soon', '12345678901']) expect(parseRetryAfter(bad, now)).toBeUndefined();
  });

  it('backs off exponentially with jitter, capped, and never shorter than Retry-After', () => {
    for (let i = 0; i < 50; i++) {
      expect(backoffMs(1)).toBeGreaterThanOrEqual(100);
      expect(backoffMs(1)).toBeLessThanOrEqual(300);
      expect(backoffMs(3)).toBeGreaterThanOrEqual(400);
      expect(backoffMs(30)).toBeLessThanOrEqual(BACKOFF_MAX_MS * 1.5);
      expect(retryDelayMs(1, 5000)).toBe(5000);
    }
  });
});
