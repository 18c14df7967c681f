// `fastpull pull --trace` against the real distribution registry, in the CLI's process and through a
// real fastpulld (which records the trace and sends it back): Chrome trace-event JSON with a named
// track per layer whose spans agree with the --json timings, lanes of range requests that cover each
// blob once, a track per unpack worker thread, and counters whose figures add up.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PullTimings, TraceDocument, TraceEvent } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  findDistributionBinary,
  lacksRegistry,
  Prng,
  pushImage,
  sampleImage,
  sampleLayerEntries,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { runCli, runCliAsync, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { checkCounters, checkCpuArgs, checkNesting, checkRanges, checkWorkers, FLOAT_US, passTid, spans, WORKERS_PID } from './trace-checks.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping CLI trace tests: docker-registry is not installed');

const CHUNK = 64 * 1024;

describe.skipIf(lacksRegistry())('fastpull pull --trace', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('cli-trace');
  let ref = '';
  let daemon: RunningDaemon | undefined;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    // A layer of incompressible bytes, fetched in many ranges, under two small ones.
    const noise = Buffer.from(new Prng(21).bytes(CHUNK * 9 + 321));
    image = await buildImage({ layers: [[{ type: 'file', path: 'noise.bin', content: noise }], ...sampleLayerEntries(21, 2)] });
    await pushImage(registry.url, 'trace/app', 'v1', image);
    ref = `${registry.host}/trace/app:v1`;
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  /** The layer tracks: named, spans within the pull, agreeing with the timings, in a layer's order. */
  function checkLayers(events: readonly TraceEvent[], timings: PullTimings): void {
    const names = events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === 1);
    const pull = spans(events, 0).get('pull')!;
    expect(pull.ts).toBe(0);
    // The recording process's uptime at the pull's start: the CLI's own start, or fastpulld's age.
    expect(pull.args?.processUptimeMs).toBeGreaterThan(0);
    // The recorder starts just before the pull and stops just after it.
    expect(pull.dur! / 1000).toBeGreaterThanOrEqual(timings.totalMs);
    expect(spans(events, 0).get('resolve')!.dur! / 1000).toBeGreaterThanOrEqual(timings.resolveMs);
    const ms = (us: number) => us / 1000;
    image.layers.forEach((layer, i) => {
      const tid = i + 1;
      expect(names.find((e) => e.tid === tid)?.args?.name).toBe(`layer ${i} ${layer.digest.slice(7, 19)}`);
      const track = spans(events, tid);
      expect([...track.keys()].sort()).toEqual(['commit', 'fetch', 'verify', 'waiting']);
      const pass = spans(events, passTid(i));
      expect([...pass.keys()]).toEqual(['unpack']);
      expect(names.find((e) => e.tid === passTid(i))?.args?.name).toBe(`layer ${i} unpack`);
      // Spans of one track follow each other (viewers drop spans that overlap without nesting).
      const ordered = [...track.values()].sort((a, b) => a.ts - b.ts);
      for (let k = 1; k < ordered.length; k++) expect(ordered[k]!.ts).toBeGreaterThanOrEqual(ordered[k - 1]!.ts + ordered[k - 1]!.dur! - FLOAT_US);
      for (const s of [...track.values(), ...pass.values()]) {
        expect(s.args?.digest).toBe(layer.digest);
        expect(s.ts).toBeGreaterThanOrEqual(0);
        expect(s.ts + s.dur!).toBeLessThanOrEqual(pull.dur! + 0.01);
      }
      const t = timings.layers[i]!;
      expect(t.digest).toBe(layer.digest);
      const fetch = track.get('fetch')!;
      const unpack = pass.get('unpack')!;
      const verify = track.get('verify')!;
      const commit = track.get('commit')!;
      expect(ms(fetch.dur!)).toBeCloseTo(t.fetchMs, 2);
      expect(ms(unpack.dur!)).toBeCloseTo(t.unpackMs, 2);
      expect(ms(commit.dur!)).toBeCloseTo(t.commitMs, 2);
      expect(unpack.args).toMatchObject({ hashMs: t.verifyMs, inflateMs: t.decompressMs, extractMs: t.extractMs, waitMs: t.waitMs });
      checkCpuArgs(unpack.args!, t);
      // In the order a layer goes: waiting, fetching, the pass ending after its download, verify, commit.
      expect(track.get('waiting')!.ts).toBeLessThanOrEqual(fetch.ts);
      expect(unpack.ts + unpack.dur!).toBeGreaterThanOrEqual(fetch.ts + fetch.dur! - 0.01);
      expect(verify.ts).toBeCloseTo(unpack.ts + unpack.dur!, 2);
      expect(commit.ts).toBeGreaterThanOrEqual(verify.ts);
    });
  }

  /** Everything a trace of a fresh pull of the image holds, wherever it was recorded. */
  function checkFreshPull(events: readonly TraceEvent[], timings: PullTimings, unpackConcurrency: number): void {
    checkNesting(events);
    checkLayers(events, timings);
    const ranges = image.layers.map((_, i) => checkRanges(events, image, i));
    // The big layer went in 64 KiB ranges (206), each asked for once; the small ones in one plain GET each (200).
    expect(ranges[0]!.length).toBe(Math.ceil(image.layers[0]!.size / CHUNK));
    ranges.forEach((rs, i) => {
      const status = image.layers[i]!.size > CHUNK ? 206 : 200;
      for (const r of rs) expect(r.name).toBe('range');
      for (const r of rs) expect(r.args).toMatchObject({ outcome: 'done', status, attempt: 0 });
      if (status === 200) expect(rs).toHaveLength(1);
    });
    const threads = checkWorkers(events, image, timings);
    // More threads than slots only where a pass waited for its download and lent its slot (at
    // least half of one of the pool's 100 ms looks).
    const waited = events.filter((e) => e.ph === 'X' && e.pid === WORKERS_PID && (e.args!.waitMs as number) >= 50).length;
    expect(threads.size).toBeLessThanOrEqual(unpackConcurrency + waited);
    const total = image.layers.reduce((n, l) => n + l.size, 0);
    checkCounters(events, total);
    const bytes = events.filter((e) => e.ph === 'C' && e.name === 'bytes fetched').map((e) => e.args!.bytes as number);
    expect(bytes.length).toBeGreaterThan(1);
    expect(bytes.at(-1)).toBe(total);
    // Bytes fetched only grow.
    expect(bytes).toEqual([...bytes].sort((a, b) => a - b));
    expect(events.some((e) => e.ph === 'C' && e.name === 'layers' && (e.args!.fetching as number) > 0)).toBe(true);
  }

  it('writes a track per layer with its range requests, a track per unpack worker, and counters', () => {
    const file = join(work.dir, 'pull.trace.json');
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--json', '--chunk-size', '64KiB', '--unpack-concurrency', '2', '--trace', file, ref]);
    expect(r.status, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as { type: string; timings: PullTimings };
    expect(done.type).toBe('done');
    const events = (JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] }).traceEvents;
    checkFreshPull(events, done.timings, 2);
  });

  it('a second pull of the same image: every layer is an `exists` span, no request, no pass', () => {
    const file = join(work.dir, 'again.trace.json');
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--quiet', '--trace', file, ref]);
    expect(r.status, r.stderr).toBe(0);
    const events = (JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] }).traceEvents;
    image.layers.forEach((_, i) => expect([...spans(events, i + 1).keys()]).toEqual(['exists']));
    expect(events.filter((e) => e.cat === 'range' || e.pid === 2)).toEqual([]);
  });

  it('through fastpulld: the daemon records the trace and the CLI writes it', async () => {
    const socket = join(work.dir, 'fastpulld.sock');
    const root = join(work.dir, 'daemon-root');
    daemon = await serveDaemon(['--socket', socket, '--root', root, '--chunk-size', '64KiB', '--unpack-concurrency', '2', '--log-level', 'debug']);
    const file = join(work.dir, 'daemon.trace.json');
    const r = await runCliAsync(['pull', '--address', socket, '--json', '--trace', file, ref]);
    expect(r.status, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as { type: string; timings: PullTimings };
    expect(done.type).toBe('done');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] };
    checkFreshPull(doc.traceEvents, done.timings, 2);
    // The daemon's memory, not the CLI's: the trace names the pull the daemon made.
    expect(doc.traceEvents.find((e) => e.ph === 'M' && e.name === 'process_name' && e.pid === 1)?.args?.name).toBe(`fastpull pull ${ref}`);
    // A pull without --trace asks for none and gets none: the daemon wrote no file anywhere.
    const plain = await runCliAsync(['pull', '--address', socket, '--quiet', ref]);
    expect(plain.status, plain.stderr).toBe(0);
  });

  it('through fastpulld, a failed pull still brings its trace back', async () => {
    const socket = join(work.dir, 'fastpulld.sock');
    const file = join(work.dir, 'failed.trace.json');
    const r = await runCliAsync(['pull', '--address', socket, '--trace', file, `${registry.host}/trace/none:v1`]);
    expect(r.status).not.toBe(0);
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] };
    expect(spans(doc.traceEvents, 0).get('pull')!.args).toEqual({ failed: 1, processUptimeMs: expect.any(Number) });
  });

  it('through fastpulld, callers asking for a trace share a pull and its trace; one asking for none gets none', async () => {
    const loop = await startLoopbackRegistry();
    const client = new FastpullClient(join(work.dir, 'fastpulld.sock'));
    try {
      const other = await sampleImage(22, { layers: 2 });
      loop.addImage('trace/other', 'v1', other);
      const otherRef = `${loop.host}/trace/other:v1`;
      // The manifests wait until all three callers are in, so the pulls they start run at once.
      let release!: () => void;
      loop.faults.hold = { path: /\/manifests\//, until: new Promise<void>((r) => (release = r)) };
      const traces: TraceDocument[][] = [[], [], []];
      const calls = [true, true, false].map((traced, k) => client.pull(otherRef, traced ? { onTrace: (t) => traces[k]!.push(t) } : {}));
      const started = () => daemon!.logs.filter((l) => l.msg === 'pull started' && l.image === otherRef).length;
      await daemon!.waitLog((l) => l.msg === 'joined a running pull' && l.image === otherRef);
      await daemon!.waitLog(() => started() === 2);
      release();
      const results = await Promise.all(calls);
      // Two pulls: the traced callers' one, and the other's (a traced pull is shared only with callers that want a trace).
      expect(started()).toBe(2);
      expect(daemon!.logs.filter((l) => l.msg === 'joined a running pull' && l.image === otherRef)).toHaveLength(1);
      expect(traces[0]).toHaveLength(1);
      expect(traces[1]).toEqual(traces[0]);
      expect(traces[2]).toEqual([]);
      // Both got the shared pull's own trace: its timings are theirs.
      expect(results[1]!.timings).toEqual(results[0]!.timings);
      const events = traces[0]![0]!.traceEvents;
      checkNesting(events);
      expect(spans(events, 0).get('pull')!.dur! / 1000).toBeGreaterThanOrEqual(results[0]!.timings.totalMs);
    } finally {
      await client.close();
      await loop.close();
    }
  });

  it('--trace with several references is a usage error', () => {
    const r = runCli(['pull', '--root', join(work.dir, 'root'), '--trace', join(work.dir, 'x.json'), ref, ref]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--trace: one reference at a time');
  });
});
