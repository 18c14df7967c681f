// TraceRecorder on a scripted clock: spans from events alone when a pull fails, and the byte counter.
import { describe, expect, it } from 'vitest';
import type { Digest } from '../oci/digest.js';
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
    at(5, { type: 'resolved', name: 'r/app:1', manifest: A, platform: { os: 'linux', architecture: 'amd64' }, layers: [{ digest: A, size: 100, chainID: A }, { digest: B, size: 50, chainID: B }] });
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
      [1, 'unpack', 15000, 5000],
      [2, 'exists', 7000, 0],
    ]);
    expect(doc.traceEvents.find((e) => e.name === 'pull')!.args).toEqual({ failed: 1 });
    expect(doc.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => e.args!.name)).toEqual(['pull', `layer 0 ${'a'.repeat(12)}`, `layer 1 ${'b'.repeat(12)}`]);
    // The exists layer is no fetched byte; the fetched one counts in full once past fetching.
    expect(doc.traceEvents.filter((e) => e.name === 'bytes fetched').map((e) => e.args!.bytes)).toEqual([20, 60, 100]);
    expect(doc.traceEvents.filter((e) => e.name === 'rss')).toEqual([]);
  });

  it('samples resident memory while running and stops when finished', async () => {
    const trace = new TraceRecorder({ rssIntervalMs: 10 });
    trace.start();
    await new Promise((r) => setTimeout(r, 60));
    const n = trace.finish().traceEvents.filter((e) => e.name === 'rss').length;
    expect(n).toBeGreaterThanOrEqual(3);
    await new Promise((r) => setTimeout(r, 40));
    expect(trace.finish().traceEvents.filter((e) => e.name === 'rss').length).toBe(n);
  });
});
