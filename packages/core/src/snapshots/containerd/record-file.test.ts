import { describe, expect, it } from 'vitest';
import { snapshotTime } from './record-file.js';

const toMs = (rfc: string): number => {
  const m = /^(.*)\.(\d{9})Z$/.exec(rfc);
  if (!m) throw new Error(`not RFC 3339 with nanoseconds: ${rfc}`);
  return Date.parse(`${m[1]}Z`) + Number(m[2]) / 1e6;
};

describe('snapshotTime', () => {
  it('never reads as before Date.now() taken ahead of it, nor more than a millisecond after', () => {
    let last = 0;
    for (let i = 0; i < 20_000; i++) {
      const before = Date.now();
      const t = toMs(snapshotTime());
      const after = Date.now();
      expect(t).toBeGreaterThanOrEqual(before);
      expect(t).toBeLessThanOrEqual(after + 1);
      expect(t).toBeGreaterThanOrEqual(last);
      last = t;
    }
  });
});
