// TraceRecorder on a scripted clock: spans from events alone when a pull fails, and the byte counter.
import { describe, expect, it, vi } from 'vitest';
import type { Digest } from '../oci/digest.js';
import type { RangeRequest } from '../registry/range-request.js';
import { TraceRecorder } from './trace.js';
import type { PullEvent } from './types.js';

const A = `sha256:${'a'.repeat(64)}` as Digest;
const B = `sha256:${'b'.repeat(64)}` as Digest;

describe('TraceRecorder', () => {
  it('a failed pull (no timings): spans run from each state to the next, or to the end', () => {
    let clock = 1000;
    const trace = new TraceRecorder({ now: () => clock, rssIntervalMs: 0 });
    trace.start();
    const at = (ms: number, e: PullEvent): void => {
      clock = 1000 + ms;
      trace.event(e);
    };
    at(5, {
      type: 'resolved',
      name: 'r/app:1',
      manifest: A,
      platform: { os: 'linux', architecture: 'amd64' },
      layers: [
        { digest: A, size: 100, chainID: A },
        { digest: B, size: 50, chainID: B },
      ],
    });
    at(6, { type: 'layer', index: 0, digest: A, state: 'waiting', bytes: 0, total: 100 });
    at(7, { type: 'layer', index: 1, digest: B, state: 'exists', bytes: 50, total: 50 });
    at(10, { type: 'layer', index: 0, digest: A, state: 'fetching', bytes: 20, total: 100 });
    at(12, { type: 'layer', index: 0, digest: A, state: 'fetching', bytes: 60, total: 100 });
    at(15, { type: 'layer', index: 0, digest: A, state: 'extracting', bytes: 100, total: 100 });
    clock = 1020;
    const doc = trace.finish();
    const x = doc.traceEvents.filter((e) => e.ph === 'X').map((e) => [e.tid, e.name, e.ts, e.dur]);
    expect(x).toEqual([
      [0, 'pull', 0, 20000],
      [0, 'resolve', 0, 5000],
      [1, 'waiting', 6000, 4000],
      [1, 'fetch', 10000, 5000],
      // The pass overlaps the download: on a track of its own, so the viewers show both.
      [1001, 'unpack', 15000, 5000],
      [2, 'exists', 7000, 0],
    ]);
    const pullArgs = doc.traceEvents.find((e) => e.name === 'pull')!.args!;
    expect(pullArgs).toEqual({ failed: 1, processUptimeMs: expect.any(Number) });
    // This process's uptime when start() ran: before now, after the process began.
    expect(pullArgs.processUptimeMs).toBeGreaterThan(0);
    expect(pullArgs.processUptimeMs).toBeLessThanOrEqual(Math.ceil(process.uptime() * 1000));
    expect(doc.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => e.args!.name)).toEqual([
      'pull',
      `layer 0 ${'a'.repeat(12)}`,
      'layer 0 unpack',
      `layer 1 ${'b'.repeat(12)}`,
    ]);
    // The exists layer is no fetched byte; the fetched one counts in full once past fetching.
    expect(doc.traceEvents.filter((e) => e.name === 'bytes fetched').map((e) => e.args!.bytes)).toEqual([20, 60, 100]);
    expect(doc.traceEvents.filter((e) => e.name === 'rss')).toEqual([]);
  });

  it('observer: range requests in lanes that never overlap, passes on their thread, bytes in flight and the network rate', () => {
    let clock = 0;
    let read = 0;
    const trace = new TraceRecorder({ now: () => clock, sampleIntervalMs: 0 });
    trace.start();
    trace.event({
      type: 'resolved',
      name: 'r/app:1',
      manifest: A,
      platform: { os: 'linux', architecture: 'amd64' },
      layers: [{ digest: A, size: 300, chainID: A }],
    });
    trace.event({ type: 'layer', index: 0, digest: A, state: 'fetching', bytes: 0, total: 300 });
    const req = (chunk: number, sentAt: number, endedAt: number, more: Partial<RangeRequest> = {}): RangeRequest => ({
      chunk,
      attempt: 0,
      reason: 'first',
      outcome: 'done',
      start: chunk * 100,
      end: chunk * 100 + 100,
      offset: chunk * 100,
      bytes: 100,
      status: 206,
      queuedAt: 0,
      sentAt,
      endedAt,
      ...more,
    });
    const o = trace.observer;
    o.unpackStarted!(0, { thread: 7, read: () => read });
    clock = 10;
    trace.sample();
    o.bytes!(0, 150, false);
    o.bytes!(0, 50, true);
    read = 120;
    clock = 20;
    trace.sample();
    // Chunks 0 and 1 overlap (two lanes); chunk 2 starts after chunk 0 ended (back in lane 1); chunk 1's remainder is re-issued.
    o.range!(0, req(0, 1, 8));
    o.range!(0, req(1, 2, 12, { outcome: 'straggler', bytes: 40, end: 200 }));
    o.range!(0, req(2, 9, 15, { yieldedMs: 2.34567 }));
    o.range!(0, req(1, 12, 18, { attempt: 1, reason: 'reissue', start: 140, offset: 140, bytes: 60 }));
    o.bytes!(0, 100, false);
    read = 300;
    clock = 30;
    trace.sample();
    o.unpackEnded!(0, {
      thread: 7,
      timings: {
        totalMs: 25,
        waitMs: 5,
        verifyMs: 1,
        extractMs: 4,
        decompressMs: 15,
        threadCpuMs: 6.25,
        blobHashCpuMs: 1.5,
        inflateCpuMs: 12.0004,
        tarHashCpuMs: 0,
        writerCpuMs: 3.1416,
      },
    });
    const doc = trace.finish();
    const x = doc.traceEvents
      .filter((e) => e.ph === 'X' && e.cat === 'range')
      .map((e) => [e.name, e.tid, e.ts, e.dur, e.args!.offset, e.args!.bytes, e.args!.outcome]);
    expect(x).toEqual([
      ['range', 1002, 1000, 7000, 0, 100, 'done'],
      ['range', 1003, 2000, 10000, 100, 40, 'straggler'],
      ['range', 1002, 9000, 6000, 200, 100, 'done'],
      ['range reissue', 1003, 12000, 6000, 140, 60, 'done'],
    ]);
    // Time a range held back for the earliest one, only where it did.
    expect(doc.traceEvents.filter((e) => e.cat === 'range').map((e) => e.args!.yieldedMs)).toEqual([undefined, undefined, 2.346, undefined]);
    const names = doc.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => [e.pid, e.tid, e.args!.name]);
    expect(names).toEqual([
      [1, 0, 'pull'],
      [1, 1, `layer 0 ${'a'.repeat(12)}`],
      [1, 1002, 'layer 0 ranges 1'],
      [1, 1003, 'layer 0 ranges 2'],
      [2, 7, 'worker thread 7'],
    ]);
    const fetch = doc.traceEvents.find((e) => e.name === 'fetch')!;
    expect(fetch.args).toMatchObject({ requests: 4, reissued: 1 });
    // The pass lasted its 25 ms and ended when it was reported, at 30 ms.
    const pass = doc.traceEvents.find((e) => e.pid === 2 && e.ph === 'X')!;
    expect([pass.name, pass.tid, pass.ts, pass.dur]).toEqual(['unpack', 7, 5000, 25000]);
    // Each stage's CPU the pass measured (0 too), to the microsecond.
    expect(pass.args).toEqual({
      layer: 0,
      digest: A,
      bytesRead: 300,
      unpackMs: 25,
      waitMs: 5,
      hashMs: 1,
      inflateMs: 15,
      extractMs: 4,
      threadCpuMs: 6.25,
      blobHashCpuMs: 1.5,
      inflateCpuMs: 12,
      tarHashCpuMs: 0,
      writerCpuMs: 3.142,
    });
    // In flight: landed (resumed bytes too) less read; the rate counts fetched bytes only. Without
    // an interval only the explicit samples are taken.
    expect(doc.traceEvents.filter((e) => e.name === 'bytes in flight').map((e) => [e.ts, e.args!.bytes])).toEqual([
      [10000, 0],
      [20000, 80],
      [30000, 0],
    ]);
    expect(doc.traceEvents.filter((e) => e.name === 'network').map((e) => [e.ts, e.args!.bytesPerSecond])).toEqual([
      [20000, 15000],
      [30000, 10000],
    ]);
  });

  it('marks a pass that ran on a slot another pass lent', () => {
    let clock = 0;
    const trace = new TraceRecorder({ now: () => clock, sampleIntervalMs: 0 });
    trace.start();
    trace.event({
      type: 'resolved',
      name: 'r/app:1',
      manifest: A,
      platform: { os: 'linux', architecture: 'amd64' },
      layers: [
        { digest: A, size: 300, chainID: A },
        { digest: B, size: 10, chainID: B },
      ],
    });
    const o = trace.observer;
    o.unpackStarted!(0, { thread: 7, read: () => 0 });
    clock = 5;
    o.unpackStarted!(1, { thread: 8, read: () => 10, borrowed: true });
    clock = 9;
    o.unpackEnded!(1, { thread: 8 });
    clock = 20;
    o.unpackEnded!(0, { thread: 7 });
    const passes = trace.finish().traceEvents.filter((e) => e.pid === 2 && e.ph === 'X');
    expect(passes.map((e) => [e.tid, e.args!.layer, e.args!.lentSlot])).toEqual([
      [7, 0, undefined],
      [8, 1, 1],
    ]);
  });

  it("a pass's end seen after the thread's next pass was handed out is put before it: a worker's passes never overlap", () => {
    let clock = 0;
    const trace = new TraceRecorder({ now: () => clock, sampleIntervalMs: 0 });
    trace.start();
    const timings = (totalMs: number) => ({ totalMs, waitMs: 0, verifyMs: 0, extractMs: 0, decompressMs: totalMs });
    const o = trace.observer;
    clock = 1;
    o.unpackStarted!(0, { thread: 3, read: () => 0 });
    // The result came at 10, but the pulling thread, busy, handed out the next pass first (at 12)
    // and saw the result only at 19.
    clock = 12;
    o.unpackStarted!(1, { thread: 3, read: () => 0 });
    clock = 19;
    o.unpackEnded!(0, { thread: 3, timings: timings(8) });
    clock = 30;
    o.unpackEnded!(1, { thread: 3, timings: timings(15) });
    const passes = trace
      .finish()
      .traceEvents.filter((e) => e.pid === 2 && e.ph === 'X')
      .map((e) => [e.args!.layer, e.ts, e.dur]);
    expect(passes).toEqual([
      [0, 4000, 8000],
      [1, 15000, 15000],
    ]);
  });

  it('samples resident memory while running and stops when finished', () => {
    // The sampling interval is faked: samples happen when the test advances time, not when a
    // loaded machine gets round to them.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const trace = new TraceRecorder({ rssIntervalMs: 10 });
      trace.start();
      vi.advanceTimersByTime(35);
      const n = trace.finish().traceEvents.filter((e) => e.name === 'rss').length;
      expect(n).toBeGreaterThanOrEqual(3);
      vi.advanceTimersByTime(100);
      expect(trace.finish().traceEvents.filter((e) => e.name === 'rss').length).toBe(n);
    } finally {
      vi.useRealTimers();
    }
  });
});
