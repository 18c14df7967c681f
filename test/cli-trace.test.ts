// `fastpull pull --trace FILE` against the real distribution registry: the file is Chrome trace-event
// JSON with a named track per layer whose spans lie within the pull and agree with its --json timings.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PullTimings, TraceEvent } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type BuiltImage } from '@fastpull/core/testing';
import { runCli, tempDir } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping CLI trace tests: docker-registry is not installed');

/** Spans of one track by name. */
function spans(events: readonly TraceEvent[], tid: number): Map<string, TraceEvent> {
  return new Map(events.filter((e) => e.ph === 'X' && e.tid === tid).map((e) => [e.name, e]));
}

describe.skipIf(!binary)('fastpull pull --trace', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('cli-trace');
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(21, { layers: 3 });
    await pushImage(registry.url, 'trace/app', 'v1', image);
    ref = `${registry.host}/trace/app:v1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('writes a track per layer whose spans lie within the pull and agree with the --json timings, and counters', () => {
    const file = join(work.dir, 'pull.trace.json');
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--json', '--chunk-size', '64KiB', '--trace', file, ref]);
    expect(r.status, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as { type: string; timings: PullTimings };
    expect(done.type).toBe('done');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] };
    const events = doc.traceEvents;
    const names = events.filter((e) => e.ph === 'M' && e.name === 'thread_name');
    const pull = spans(events, 0).get('pull')!;
    expect(pull.ts).toBe(0);
    // The recorder starts just before the pull and stops just after it.
    expect(pull.dur! / 1000).toBeGreaterThanOrEqual(done.timings.totalMs);
    expect(spans(events, 0).get('resolve')!.dur! / 1000).toBeGreaterThanOrEqual(done.timings.resolveMs);
    const ms = (us: number) => us / 1000;
    image.layers.forEach((layer, i) => {
      const tid = i + 1;
      expect(names.find((e) => e.tid === tid)?.args?.name).toBe(`layer ${i} ${layer.digest.slice(7, 19)}`);
      const track = spans(events, tid);
      expect([...track.keys()].sort()).toEqual(['commit', 'fetch', 'unpack', 'verify', 'waiting']);
      for (const s of track.values()) {
        expect(s.args?.digest).toBe(layer.digest);
        expect(s.ts).toBeGreaterThanOrEqual(0);
        expect(s.ts + s.dur!).toBeLessThanOrEqual(pull.dur! + 0.01);
      }
      const t = done.timings.layers[i]!;
      expect(t.digest).toBe(layer.digest);
      const fetch = track.get('fetch')!;
      const unpack = track.get('unpack')!;
      const verify = track.get('verify')!;
      const commit = track.get('commit')!;
      expect(ms(fetch.dur!)).toBeCloseTo(t.fetchMs, 2);
      expect(ms(unpack.dur!)).toBeCloseTo(t.unpackMs, 2);
      expect(ms(commit.dur!)).toBeCloseTo(t.commitMs, 2);
      expect(unpack.args).toMatchObject({ hashMs: t.verifyMs, inflateMs: t.decompressMs, extractMs: t.extractMs, waitMs: t.waitMs });
      // In the order a layer goes: waiting, fetching, the pass ending after its download, verify, commit.
      expect(track.get('waiting')!.ts).toBeLessThanOrEqual(fetch.ts);
      expect(unpack.ts + unpack.dur!).toBeGreaterThanOrEqual(fetch.ts + fetch.dur! - 0.01);
      expect(verify.ts).toBeCloseTo(unpack.ts + unpack.dur!, 2);
      expect(commit.ts).toBeGreaterThanOrEqual(verify.ts);
    });
    const counters = events.filter((e) => e.ph === 'C');
    const bytes = counters.filter((e) => e.name === 'bytes fetched').map((e) => e.args!.bytes as number);
    expect(bytes.length).toBeGreaterThan(1);
    expect(bytes.at(-1)).toBe(image.layers.reduce((n, l) => n + l.size, 0));
    // Bytes fetched only grow.
    expect(bytes).toEqual([...bytes].sort((a, b) => a - b));
    const rss = counters.filter((e) => e.name === 'rss');
    expect(rss.length).toBeGreaterThanOrEqual(2);
    for (const c of rss) expect(c.args!.bytes as number).toBeGreaterThan(1024 * 1024);
    expect(counters.some((e) => e.name === 'layers' && (e.args!.fetching as number) > 0)).toBe(true);
  });

  it('a second pull of the same image: every layer is an `exists` span', () => {
    const file = join(work.dir, 'again.trace.json');
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--quiet', '--trace', file, ref]);
    expect(r.status, r.stderr).toBe(0);
    const events = (JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] }).traceEvents;
    image.layers.forEach((_, i) => expect([...spans(events, i + 1).keys()]).toEqual(['exists']));
  });

  it('--trace with several references is a usage error', () => {
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--trace', join(work.dir, 'x.json'), ref, ref]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--trace: one reference at a time');
  });
});
