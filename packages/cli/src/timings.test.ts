import { describe, expect, it } from 'vitest';
import type { Digest, PullTimings } from '@fastpull/core';
import { timingsLines, type DetailedLayerTimings } from './timings.js';

const d = (c: string) => `sha256:${c.repeat(64)}` as Digest;

describe('timingsLines', () => {
  it('prints the phases core reports today, per layer, and the total', () => {
    const t: PullTimings = {
      resolveMs: 35,
      totalMs: 2345,
      layers: [
        { digest: d('a'), fetchMs: 1200, unpackMs: 400, commitMs: 3, state: 'committed' },
        { digest: d('b'), fetchMs: 0, unpackMs: 0, commitMs: 0, state: 'exists' },
      ],
    };
    expect(timingsLines(t)).toEqual([
      'LAYER         STATE      FETCH  UNPACK  COMMIT',
      'aaaaaaaaaaaa  committed  1.20s  400ms   3ms',
      'bbbbbbbbbbbb  exists     0ms    0ms     0ms',
      'resolve 35ms, total 2.35s (layers run at once, so their phases overlap)',
    ]);
  });

  it('adds the verify, decompress and extract columns when core reports them', () => {
    const layers: DetailedLayerTimings[] = [
      { digest: d('a'), fetchMs: 10, unpackMs: 20, verifyMs: 5, extractMs: 12, commitMs: 1, state: 'committed' },
      { digest: d('b'), fetchMs: 0, unpackMs: 0, commitMs: 0, state: 'exists' },
    ];
    const lines = timingsLines({ resolveMs: 1, totalMs: 40, layers });
    expect(lines[0]).toBe('LAYER         STATE      FETCH  UNPACK  VERIFY  EXTRACT  COMMIT');
    expect(lines[1]).toBe('aaaaaaaaaaaa  committed  10ms   20ms    5ms     12ms     1ms');
    expect(lines[2]).toBe('bbbbbbbbbbbb  exists     0ms    0ms     -       -        0ms');
  });
});
