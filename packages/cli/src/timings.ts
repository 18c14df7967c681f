// `pull --timings`: where a pull's time went, per layer and in all, from core's PullTimings.
import type { LayerTimings, PullTimings } from '@fastpull/core';
import { formatDuration, formatTable, shortDigest } from './io.js';

/**
 * LayerTimings with the finer phases that core may report besides the single unpack pass; each
 * column is shown only when some layer has it.
 */
export type DetailedLayerTimings = LayerTimings & {
  readonly verifyMs?: number;
  readonly decompressMs?: number;
  readonly extractMs?: number;
};

const OPTIONAL_PHASES = [
  ['verifyMs', 'VERIFY'],
  ['decompressMs', 'DECOMPRESS'],
  ['extractMs', 'EXTRACT'],
] as const;

/** The table lines, e.g. `LAYER  STATE  FETCH  UNPACK  COMMIT`, one row per layer, then the total. */
export function timingsLines(timings: PullTimings): string[] {
  const layers = timings.layers as readonly DetailedLayerTimings[];
  const extra = OPTIONAL_PHASES.filter(([key]) => layers.some((l) => typeof l[key] === 'number'));
  const rows: string[][] = [['LAYER', 'STATE', 'FETCH', 'UNPACK', ...extra.map(([, title]) => title), 'COMMIT']];
  for (const l of layers) {
    rows.push([
      shortDigest(l.digest),
      l.state,
      formatDuration(l.fetchMs),
      formatDuration(l.unpackMs),
      ...extra.map(([key]) => (typeof l[key] === 'number' ? formatDuration(l[key]) : '-')),
      formatDuration(l.commitMs),
    ]);
  }
  return [
    ...formatTable(rows),
    `resolve ${formatDuration(timings.resolveMs)}, total ${formatDuration(timings.totalMs)} (layers run at once, so their phases overlap)`,
  ];
}
