// Where a pull's time went: each layer's times from its steps, and the pull's from its layers.
import type { Digest } from '../oci/digest.js';
import type { UnpackedLayer } from '../unpack/index.js';
import type { LayerTimings, PhaseTotals, PullTimings } from './types.js';

/** A layer whose snapshot was already in the store: nothing was done, every time is 0. */
export function existsTimings(digest: Digest): LayerTimings {
  return { digest, fetchMs: 0, unpackMs: 0, waitMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0, state: 'exists' };
}

/** A committed layer's times: its download, its unpack pass (split by what the pass did) and its commit. */
export function committedTimings(
  digest: Digest,
  fetchMs: number,
  r: Pick<UnpackedLayer, 'timings' | 'checkpointsUsed'> & Partial<Pick<UnpackedLayer, 'releasedBytes'>>,
  commitMs: number,
): LayerTimings {
  const { totalMs, waitMs, verifyMs, decompressMs, extractMs, threadCpuMs, blobHashCpuMs, inflateCpuMs, tarHashCpuMs, writerCpuMs } = r.timings;
  return {
    digest,
    fetchMs,
    unpackMs: totalMs,
    waitMs,
    verifyMs,
    decompressMs,
    extractMs,
    commitMs,
    state: 'committed',
    ...(threadCpuMs !== undefined ? { threadCpuMs } : {}),
    ...(blobHashCpuMs !== undefined ? { blobHashCpuMs } : {}),
    ...(inflateCpuMs !== undefined ? { inflateCpuMs } : {}),
    ...(tarHashCpuMs !== undefined ? { tarHashCpuMs } : {}),
    ...(writerCpuMs !== undefined ? { writerCpuMs } : {}),
    ...(r.checkpointsUsed !== undefined ? { ztocCheckpoints: r.checkpointsUsed } : {}),
    ...(r.releasedBytes ? { releasedBytes: r.releasedBytes } : {}),
  };
}

/** Sums of each per-layer phase over the layers (resolving is once per pull, and not among them). */
export function phaseTotals(layers: readonly LayerTimings[]): PhaseTotals {
  const sum = (k: keyof PhaseTotals): number => layers.reduce((n, l) => n + l[k], 0);
  return { fetchMs: sum('fetchMs'), verifyMs: sum('verifyMs'), decompressMs: sum('decompressMs'), extractMs: sum('extractMs'), commitMs: sum('commitMs') };
}

/** A pull's timings: `resolveMs` of resolving, wall time since `t0`, the layers' and their sums. */
export function pullTimings(resolveMs: number, t0: number, layers: readonly LayerTimings[]): PullTimings {
  return { resolveMs, totalMs: performance.now() - t0, layers, phases: phaseTotals(layers) };
}
