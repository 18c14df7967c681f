import { describe, expect, it } from 'vitest';
import type { Digest, LayerTimings, PullTimings } from '@fastpull/core';
import { jsonTimings, timingsLines } from './timings.js';

const d = (c: string) => `sha256:${c.repeat(64)}` as Digest;

describe('timingsLines', () => {
  it('prints every phase per layer, their sums, and the phase that took most', () => {
    const layers: LayerTimings[] = [
      { digest: d('a'), fetchMs: 1200, unpackMs: 400, waitMs: 100, verifyMs: 50, decompressMs: 150, extractMs: 100, commitMs: 3, state: 'committed' },
      { digest: d('b'), fetchMs: 0, unpackMs: 0, waitMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0, state: 'exists' },
    ];
    const t: PullTimings = {
      resolveMs: 35,
      totalMs: 2345,
      layers,
      phases: { fetchMs: 1200, verifyMs: 50, decompressMs: 150, extractMs: 100, commitMs: 3 },
    };
    expect(timingsLines(t)).toEqual([
      'LAYER         STATE      FETCH  UNPACK  VERIFY  DECOMPRESS  EXTRACT  COMMIT',
      'aaaaaaaaaaaa  committed  1.20s  400ms   50ms    150ms       100ms    3ms',
      'bbbbbbbbbbbb  exists     0ms    0ms     0ms     0ms         0ms      0ms',
      'sum                      1.20s  400ms   50ms    150ms       100ms    3ms',
      'resolve 35ms, total 2.35s; most time: fetch (layers run at once and the unpack pass follows the download, so phases overlap)',
    ]);
    const decompressBound = timingsLines({ ...t, phases: { ...t.phases, fetchMs: 10 } });
    expect(decompressBound.at(-1)).toMatch(/most time: decompress /);
  });

  it("pull --json keeps the pull's resolveMs among the phases, where readers of earlier builds find it", () => {
    const t: PullTimings = { resolveMs: 35, totalMs: 100, layers: [], phases: { fetchMs: 1, verifyMs: 2, decompressMs: 3, extractMs: 4, commitMs: 5 } };
    const json = JSON.parse(JSON.stringify(jsonTimings(t))) as { resolveMs: number; phases: Record<string, number> };
    expect(json.resolveMs).toBe(35);
    expect(json.phases).toEqual({ resolveMs: 35, fetchMs: 1, verifyMs: 2, decompressMs: 3, extractMs: 4, commitMs: 5 });
    // The library's own sums are per-layer phases only.
    expect(Object.keys(t.phases)).not.toContain('resolveMs');
  });
});
