// `pull --timings`: where a pull's time went, per layer and in all, from core's PullTimings.
import type { PhaseTotals, PullTimings } from '@fastpull/core';
import { formatDuration, formatTable, shortDigest } from './io.js';

const PHASES = [
  ['fetchMs', 'fetch'],
  ['verifyMs', 'verify'],
  ['decompressMs', 'decompress'],
  ['extractMs', 'extract'],
  ['commitMs', 'commit'],
] as const satisfies ReadonlyArray<readonly [keyof PhaseTotals, string]>;

/**
 * Timings as `pull --json` prints them: core's, with the pull's `resolveMs` also among `phases`,
 * where earlier builds had it (deprecated there: it is no per-layer sum; read `resolveMs`).
 */
export function jsonTimings(timings: PullTimings): PullTimings & { readonly phases: PhaseTotals & { readonly resolveMs: number } } {
  return { ...timings, phases: { resolveMs: timings.resolveMs, ...timings.phases } };
}

/**
 * The table lines: one row per layer (fetch, the unpack pass and its parts, commit), a row of sums
 * over the layers, then the wall time and the phase with the largest sum.
 */
export function timingsLines(timings: PullTimings): string[] {
  const rows: string[][] = [['LAYER', 'STATE', 'FETCH', 'UNPACK', 'VERIFY', 'DECOMPRESS', 'EXTRACT', 'COMMIT']];
  for (const l of timings.layers) {
    rows.push([shortDigest(l.digest), l.state, ...[l.fetchMs, l.unpackMs, l.verifyMs, l.decompressMs, l.extractMs, l.commitMs].map(formatDuration)]);
  }
  const p = timings.phases;
  const unpack = timings.layers.reduce((n, l) => n + l.unpackMs, 0);
  rows.push(['sum', '', ...[p.fetchMs, unpack, p.verifyMs, p.decompressMs, p.extractMs, p.commitMs].map(formatDuration)]);
  const [, top] = PHASES.reduce((best, cur) => (p[cur[0]] > p[best[0]] ? cur : best));
  return [
    ...formatTable(rows),
    `resolve ${formatDuration(timings.resolveMs)}, total ${formatDuration(timings.totalMs)}; most time: ${top} (layers run at once and the unpack pass follows the download, so phases overlap)`,
  ];
}
