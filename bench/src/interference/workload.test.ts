import { describe, expect, it } from 'vitest';
import { throughput, Workload } from './workload.js';

describe('interference workload', () => {
  it("reads throughput between two moments from each worker's reports", () => {
    const s = (count: number, ms: number) => ({ count, ns: BigInt(ms) * 1_000_000n });
    const a = [s(0, 0), s(50, 500), s(100, 1000), s(300, 2000)];
    const b = [s(0, 0), s(10, 1000), s(20, 2000)];
    // From the reports at or before each end: a 100 -> 300 over 1 s, b 10 -> 20 over 1 s.
    expect(throughput([a, b], 1_000_000_000n, 2_500_000_000n)).toBe(210);
    expect(throughput([a], 0n, 600_000_000n)).toBe(100);
    expect(throughput([a], -1n, 600_000_000n)).toBeNaN();
  });

  it('runs pinned workers that report, and stops them', async () => {
    const w = await Workload.start([0]);
    try {
      const t0 = await w.reported();
      const t1 = await w.reported();
      // reported() returns only once a report has come at or after its call: one lies between t0 and t1.
      expect(w.samples[0]!.length).toBeGreaterThan(1);
      expect(w.rate(t0, t1)).toBeGreaterThan(0);
    } finally {
      await w.stop();
    }
  });
});
