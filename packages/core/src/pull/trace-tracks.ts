// The tracks of a trace that come from a pull's observer: each layer's range requests, packed into
// lanes so that spans on one track never overlap, and one track per unpack worker thread.
import type { RangeRequest } from '../registry/range-request.js';
import type { UnpackTimings } from '../unpack/layer.js';

/** A pass as the recorder saw it: its thread, when it started and ended, and its timings. */
export interface PassRecord {
  readonly index: number;
  readonly thread: number;
  readonly startedAt: number;
  endedAt?: number;
  timings?: UnpackTimings;
  readonly read: () => number;
  /** It ran on a slot a waiting pass lent (see UnpackPool's LEND_WAIT_SHARE). */
  readonly borrowed?: boolean;
}

/** A span before it becomes a trace event: times in ms on the recorder's clock. */
export interface SpanSpec {
  readonly name: string;
  readonly cat: string;
  readonly tid: number;
  readonly from: number;
  readonly to: number;
  readonly args: Record<string, string | number>;
}

/** Process of the unpack workers' tracks (the pull's own is 1). */
export const WORKERS_PID = 2;

/** The track of layer `index` (0 is the pull's own). */
export function layerTid(index: number): number {
  return index + 1;
}

/** Where layer `index`'s track sorts: its range lanes follow it. */
export function layerSortIndex(index: number): number {
  return (index + 1) * 1000;
}

/**
 * The track of layer `index`'s unpack pass, right after the layer's (it sorts by its tid). The pass
 * starts while the download runs, and viewers drop spans of one track that overlap without nesting.
 */
export function passTid(index: number): number {
  return layerSortIndex(index) + 1;
}

/** The track of lane `lane` of layer `index`'s range requests (it sorts by its tid, after the pass's). */
export function laneTid(index: number, lane: number): number {
  return layerSortIndex(index) + lane + 2;
}

/** The span name of a request: a first request is `range`; a retry and a re-issue say so. */
export function rangeName(r: RangeRequest): string {
  return r.reason === 'first' ? 'range' : `range ${r.reason}`;
}

/**
 * Layer `index`'s requests as spans in lanes, in the order sent: each goes into the first lane free
 * when it was sent, so a lane's spans never overlap. Returns the spans and the number of lanes.
 */
export function rangeSpans(index: number, digest: string, requests: readonly RangeRequest[], end: number): { spans: SpanSpec[]; lanes: number } {
  const lanes: number[] = [];
  const spans: SpanSpec[] = [];
  for (const r of [...requests].sort((a, b) => a.sentAt - b.sentAt)) {
    const to = Math.min(r.endedAt, end);
    let lane = lanes.findIndex((free) => free <= r.sentAt);
    if (lane < 0) lane = lanes.push(0) - 1;
    lanes[lane] = to;
    const ms = to - r.sentAt;
    spans.push({
      name: rangeName(r),
      cat: 'range',
      tid: laneTid(index, lane),
      from: r.sentAt,
      to,
      args: {
        digest,
        chunk: r.chunk,
        attempt: r.attempt,
        outcome: r.outcome,
        offset: r.offset,
        bytes: r.bytes,
        asked: `${r.start}-${r.end - 1}`,
        queuedMs: round3(r.sentAt - r.queuedAt),
        ...(ms > 0 ? { mibPerS: round3(r.bytes / 1048576 / (ms / 1000)) } : {}),
        ...(r.status !== undefined ? { status: r.status } : {}),
        ...(r.code !== undefined ? { code: r.code } : {}),
        ...(r.yieldedMs !== undefined ? { yieldedMs: round3(r.yieldedMs) } : {}),
      },
    });
  }
  return { spans, lanes: lanes.length };
}

/**
 * Each pass as a span on its thread's track: it lasts the pass's own wall time and ends when its
 * result reached the pulling thread, or, if that was seen later, when the thread's next pass was
 * handed out (the result came before that; the pulling thread was busy in between). A failed pass
 * runs from its start to its end. Its parts, which interleave, are its arguments.
 */
export function passSpans(passes: readonly PassRecord[], digests: readonly string[], end: number): SpanSpec[] {
  return passes.map((p) => {
    const next = passes.filter((q) => q.thread === p.thread && q.startedAt > p.startedAt).reduce((t, q) => Math.min(t, q.startedAt), Infinity);
    const to = Math.min(p.endedAt ?? end, end, next);
    const t = p.timings;
    const from = t ? Math.max(p.startedAt, to - t.totalMs) : p.startedAt;
    const parts: Record<string, number> = t
      ? {
          unpackMs: round3(t.totalMs),
          waitMs: round3(t.waitMs),
          hashMs: round3(t.verifyMs),
          inflateMs: round3(t.decompressMs),
          extractMs: round3(t.extractMs),
          ...cpuArgs(t),
        }
      : { failed: 1 };
    return {
      name: 'unpack',
      cat: 'worker',
      tid: p.thread,
      from,
      to,
      args: { layer: p.index, digest: digests[p.index] ?? '', bytesRead: p.read(), ...(p.borrowed ? { lentSlot: 1 } : {}), ...parts },
    };
  });
}

/** The CPU of a pass's stages that its timings have (see UnpackTimings), as span arguments. */
export function cpuArgs(t: Pick<UnpackTimings, 'threadCpuMs' | 'blobHashCpuMs' | 'inflateCpuMs' | 'tarHashCpuMs' | 'writerCpuMs'>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of ['threadCpuMs', 'blobHashCpuMs', 'inflateCpuMs', 'tarHashCpuMs', 'writerCpuMs'] as const) {
    const v = t[k];
    if (v !== undefined) out[k] = round3(v);
  }
  return out;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
