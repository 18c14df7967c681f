// A pull's trace when ranges fail: against the project's loopback registry, which cuts or stalls one
// response, the retried and the re-issued requests are spans of their own, marked, on the same
// chunk, and every byte of the blob still lands exactly once across all of the layer's requests.
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pull, TraceRecorder, type PullOptions, type TraceEvent } from '@fastpull/core';
import { buildImage, Prng, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import { tempDir } from './helpers.js';
import { checkCounters, checkNesting, checkRanges, checkWorkers } from './trace-checks.js';

const work = tempDir('pull-trace');
let big: BuiltImage;
let reg: LoopbackRegistry;
let n = 0;
const MIB = 1024 * 1024;

beforeAll(async () => {
  const noise = Buffer.from(new Prng(17).bytes(3 * MIB + 555));
  big = await buildImage({ layers: [[{ type: 'file', path: 'noise.bin', content: noise }], [{ type: 'file', path: 'top', content: 'x' }]] });
  reg = await startLoopbackRegistry();
  reg.addImage('trace/app', '1', big);
});
afterEach(() => {
  reg.faults = {};
});
afterAll(async () => {
  await reg.close();
  work.cleanup();
});

/** Pulls the image into a fresh store with a trace; checks what every trace holds; returns its events. */
async function tracedPull(options: Partial<PullOptions>): Promise<TraceEvent[]> {
  const trace = new TraceRecorder({ sampleIntervalMs: 20 });
  trace.start();
  const r = await pull(`${reg.host}/trace/app:1`, {
    root: join(work.dir, `root${n++}`),
    chunkSize: MIB,
    ...options,
    onProgress: (e) => trace.event(e),
    observer: trace.observer,
  });
  const events = [...trace.finish(r.timings).traceEvents];
  checkNesting(events);
  checkWorkers(events, big, r.timings);
  checkCounters(
    events,
    big.layers.reduce((s, l) => s + l.size, 0),
  );
  return events;
}

/** The requests of the big layer's first chunk, in the order sent. */
function firstChunk(ranges: readonly TraceEvent[]): TraceEvent[] {
  return ranges.filter((r) => r.args!.chunk === 0).sort((a, b) => (a.args!.attempt as number) - (b.args!.attempt as number));
}

describe('a pull trace of failing ranges', () => {
  it('a response cut mid-body: the failed request, then a `range retry` for the remainder', async () => {
    const layer = big.layers[0]!;
    reg.faults.dropAfter = { bytes: 100_000, times: 1, path: new RegExp(layer.digest) };
    const events = await tracedPull({});
    const ranges = checkRanges(events, big, 0);
    const [failed, retry, ...more] = firstChunk(ranges);
    expect(more).toEqual([]);
    expect(failed!.name).toBe('range');
    expect(failed!.args).toMatchObject({ attempt: 0, outcome: 'error', code: 'NETWORK_ERROR', offset: 0 });
    expect(retry!.name).toBe('range retry');
    // The retry asks for what the cut request had not landed, and lands it.
    expect(retry!.args).toMatchObject({
      attempt: 1,
      outcome: 'done',
      status: 206,
      offset: failed!.args!.bytes,
      asked: `${failed!.args!.bytes as number}-${MIB - 1}`,
    });
    expect(retry!.ts).toBeGreaterThanOrEqual(failed!.ts + failed!.dur!);
    expect(ranges.filter((r) => r.name !== 'range')).toHaveLength(1);
  });

  it('a response that stalls: the straggler, then a `range reissue` on a fresh connection', async () => {
    const layer = big.layers[0]!;
    reg.faults.stallAfter = { bytes: 100_000, times: 1, path: new RegExp(layer.digest) };
    const events = await tracedPull({ stragglerWindowMs: 60_000, stallTimeoutMs: 300 });
    const ranges = checkRanges(events, big, 0);
    const [stalled, reissue, ...more] = firstChunk(ranges);
    expect(more).toEqual([]);
    expect(stalled!.args).toMatchObject({ attempt: 0, outcome: 'straggler', offset: 0, bytes: 100_000 });
    // It was cut after the stall timeout, not at once.
    expect(stalled!.dur! / 1000).toBeGreaterThanOrEqual(300);
    expect(reissue!.name).toBe('range reissue');
    expect(reissue!.args).toMatchObject({ attempt: 1, outcome: 'done', offset: 100_000, bytes: MIB - 100_000, asked: `100000-${MIB - 1}` });
    // A straggler's remainder is re-issued (not retried after a back-off), once the straggler is cut.
    expect(reissue!.ts).toBeGreaterThanOrEqual(stalled!.ts + stalled!.dur!);
  });
});
