// Checks of a pull's trace document shared by the trace tests (CLI, daemon, faults): what the tracks,
// spans and counters must hold for any pull, whatever ran it.
import { expect } from 'vitest';
import type { LayerTimings, PullTimings, TraceEvent } from '@fastpull/core';
import type { BuiltImage } from '@fastpull/core/testing';

/** The pull's process and the unpack workers' (see TraceEvent.pid). */
export const PULL_PID = 1;
export const WORKERS_PID = 2;

/** Layer `i`'s unpack track (see TraceEvent.tid). */
export const passTid = (i: number): number => (i + 1) * 1000 + 1;

/** Spans of one track of the pull's process, by name. */
export function spans(events: readonly TraceEvent[], tid: number): Map<string, TraceEvent> {
  return new Map(events.filter((e) => e.ph === 'X' && e.pid === PULL_PID && e.tid === tid).map((e) => [e.name, e]));
}

const end = (e: TraceEvent): number => e.ts + e.dur!;

/** Rounding of trace times (to the nanosecond). */
const ROUNDING_US = 0.01;
/** Whole nanoseconds added in floating point may be off in the last bit. */
export const FLOAT_US = 1e-6;

/**
 * Layer `i`'s range requests: lanes named after the layer whose spans never overlap, each inside the
 * layer's fetch span; the bytes they landed cover the blob exactly once. Returns the spans.
 */
export function checkRanges(events: readonly TraceEvent[], image: BuiltImage, i: number): TraceEvent[] {
  const layer = image.layers[i]!;
  const laneNames = new Map(
    events
      .filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === PULL_PID && String(e.args?.name).startsWith(`layer ${i} ranges `))
      .map((e) => [e.tid!, e.args!.name]),
  );
  const ranges = events.filter((e) => e.ph === 'X' && e.cat === 'range' && e.args?.digest === layer.digest);
  expect(ranges.length).toBeGreaterThan(0);
  const fetch = spans(events, i + 1).get('fetch')!;
  expect(fetch.args).toMatchObject({ requests: ranges.length, reissued: ranges.filter((r) => r.name !== 'range').length });
  for (const r of ranges) {
    expect(laneNames.has(r.tid!), `range on an unnamed track ${r.tid}`).toBe(true);
    // fetchMs is timed from before the `fetching` event and ends after the last request: exact nesting.
    expect(r.ts).toBeGreaterThanOrEqual(fetch.ts - ROUNDING_US);
    expect(end(r)).toBeLessThanOrEqual(end(fetch) + ROUNDING_US);
  }
  for (const tid of laneNames.keys()) {
    const lane = ranges.filter((r) => r.tid === tid).sort((a, b) => a.ts - b.ts);
    expect(lane.length).toBeGreaterThan(0);
    for (let k = 1; k < lane.length; k++) expect(lane[k]!.ts).toBeGreaterThanOrEqual(end(lane[k - 1]!) - FLOAT_US);
  }
  // What landed, [offset, offset + bytes), tiles the blob: no gap, no byte twice.
  const pieces = ranges
    .map((r) => [r.args!.offset as number, (r.args!.offset as number) + (r.args!.bytes as number)] as const)
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let pos = 0;
  for (const [a, b] of pieces) {
    expect(a).toBe(pos);
    pos = b;
  }
  expect(pos).toBe(layer.size);
  return ranges;
}

/**
 * The unpack workers' tracks: one `unpack` span per committed layer, on a named track of a thread
 * that ran it (threadId > 0 with workers), passes of one thread never overlapping, each span's parts
 * those of the layer's timings and its time that of the layer's pass. Returns the threads.
 */
/** A pass span's stage CPU arguments: each one the layer's timings have, and no other. */
export function checkCpuArgs(args: Readonly<Record<string, string | number>>, t: LayerTimings): void {
  for (const k of ['threadCpuMs', 'blobHashCpuMs', 'inflateCpuMs', 'tarHashCpuMs', 'writerCpuMs'] as const) {
    const want = t[k];
    if (want === undefined) expect(args, k).not.toHaveProperty(k);
    else expect(args[k] as number, k).toBeCloseTo(want, 2);
  }
}

export function checkWorkers(events: readonly TraceEvent[], image: BuiltImage, timings: PullTimings): Set<number> {
  const names = new Map(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === WORKERS_PID).map((e) => [e.tid!, String(e.args!.name)]));
  expect(events.find((e) => e.ph === 'M' && e.name === 'process_name' && e.pid === WORKERS_PID)?.args?.name).toBe('unpack workers');
  const passes = events.filter((e) => e.ph === 'X' && e.pid === WORKERS_PID);
  expect(passes.map((p) => p.args!.layer).sort()).toEqual(image.layers.map((_, i) => i));
  for (const p of passes) {
    const i = p.args!.layer as number;
    const t = timings.layers[i]!;
    expect(p.name).toBe('unpack');
    expect(p.tid).toBeGreaterThan(0);
    expect(names.get(p.tid!)).toBe(`worker thread ${p.tid}`);
    expect(p.args).toMatchObject({ digest: image.layers[i]!.digest, bytesRead: image.layers[i]!.size });
    expect(p.args!.unpackMs as number).toBeCloseTo(t.unpackMs, 2);
    expect(p.args!.waitMs as number).toBeCloseTo(t.waitMs, 2);
    expect(p.args!.hashMs as number).toBeCloseTo(t.verifyMs, 2);
    expect(p.args!.inflateMs as number).toBeCloseTo(t.decompressMs, 2);
    expect(p.args!.extractMs as number).toBeCloseTo(t.extractMs, 2);
    checkCpuArgs(p.args!, t);
    // The same pass as on the layer's unpack track, seen from the worker: as long, and over when
    // the layer goes on to verify; it started once the layer had begun.
    const unpack = spans(events, passTid(i)).get('unpack')!;
    expect(p.dur! / 1000).toBeCloseTo(t.unpackMs, 2);
    expect(end(p)).toBeLessThanOrEqual(end(unpack) + ROUNDING_US);
    expect(p.ts).toBeGreaterThanOrEqual(spans(events, i + 1).get('waiting')!.ts - ROUNDING_US);
  }
  const threads = new Set(passes.map((p) => p.tid!));
  for (const tid of threads) {
    const track = passes.filter((p) => p.tid === tid).sort((a, b) => a.ts - b.ts);
    for (let k = 1; k < track.length; k++) expect(track[k]!.ts).toBeGreaterThanOrEqual(end(track[k - 1]!) - FLOAT_US);
  }
  return threads;
}

/**
 * The sampled counters: memory, bytes in flight (never negative, never more than the image, none
 * left at the end), and a network rate whose integral over time is the bytes fetched.
 */
export function checkCounters(events: readonly TraceEvent[], fetchedBytes: number): void {
  const counters = events.filter((e) => e.ph === 'C');
  const rss = counters.filter((e) => e.name === 'rss');
  expect(rss.length).toBeGreaterThanOrEqual(2);
  for (const c of rss) expect(c.args!.bytes as number).toBeGreaterThan(1024 * 1024);
  const inFlight = counters.filter((e) => e.name === 'bytes in flight').map((e) => e.args!.bytes as number);
  expect(inFlight.length).toBe(rss.length);
  for (const b of inFlight) expect(b).toBeGreaterThanOrEqual(0);
  expect(Math.max(...inFlight)).toBeLessThanOrEqual(fetchedBytes);
  expect(inFlight.at(-1)).toBe(0);
  const times = counters.filter((e) => e.name === 'bytes in flight').map((e) => e.ts);
  const network = counters.filter((e) => e.name === 'network');
  expect(network.length).toBe(rss.length - 1);
  let integral = 0;
  network.forEach((c, k) => {
    expect(c.ts).toBe(times[k + 1]);
    integral += ((c.args!.bytesPerSecond as number) * (times[k + 1]! - times[k]!)) / 1e6;
  });
  // Rates are whole bytes per second: the integral is off by at most one byte per second sampled.
  expect(Math.abs(integral - fetchedBytes)).toBeLessThanOrEqual(1 + (times.at(-1)! - times[0]!) / 1e6);
}

/**
 * On every track, spans follow each other or nest: never overlap without nesting (the trace-event
 * format forbids it, and Perfetto drops such spans).
 */
export function checkNesting(events: readonly TraceEvent[]): void {
  const tracks = new Map<string, TraceEvent[]>();
  for (const e of events) {
    if (e.ph !== 'X') continue;
    const key = `${e.pid}/${e.tid}`;
    tracks.set(key, [...(tracks.get(key) ?? []), e]);
  }
  for (const [key, spans] of tracks) {
    const stack: TraceEvent[] = [];
    for (const s of [...spans].sort((a, b) => a.ts - b.ts || b.dur! - a.dur!)) {
      while (stack.length > 0 && s.ts >= end(stack.at(-1)!) - FLOAT_US) stack.pop();
      const parent = stack.at(-1);
      if (parent) expect(end(s), `${s.name} at ${s.ts} on track ${key} overlaps ${parent.name} without nesting`).toBeLessThanOrEqual(end(parent) + FLOAT_US);
      stack.push(s);
    }
  }
}
