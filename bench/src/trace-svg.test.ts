// The trace-to-SVG renderer on a hand-made trace: rows in the viewers' order, a rectangle per span in
// its phase's colour placed on the time axis, counters drawn, names escaped, gzip read.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { TraceDocument, TraceEvent } from '@fastpull/core';
import { readTrace, traceSvg } from './trace-svg.js';

const M = (pid: number, tid: number, name: string, args: Record<string, string | number>): TraceEvent => ({ name, ph: 'M', ts: 0, pid, tid, args });
const X = (pid: number, tid: number, name: string, ts: number, dur: number): TraceEvent => ({ name, cat: 'x', ph: 'X', ts, dur, pid, tid, args: {} });

const doc: TraceDocument = {
  displayTimeUnit: 'ms',
  traceEvents: [
    M(1, 0, 'process_name', { name: 'fastpull pull r/<app>:1' }),
    M(1, 0, 'thread_name', { name: 'pull' }),
    M(1, 1, 'thread_name', { name: 'layer 0 aaaa' }),
    M(1, 1, 'thread_sort_index', { sort_index: 1000 }),
    M(1, 1001, 'thread_name', { name: 'layer 0 ranges 1' }),
    M(2, 9, 'thread_name', { name: 'worker thread 9' }),
    X(2, 9, 'unpack', 100_000, 800_000),
    X(1, 1001, 'range retry', 0, 500_000),
    X(1, 1, 'fetch', 0, 500_000),
    X(1, 0, 'pull', 0, 1_000_000),
    { name: 'network', cat: 'counter', ph: 'C', ts: 0, pid: 1, args: { bytesPerSecond: 0 } },
    { name: 'network', cat: 'counter', ph: 'C', ts: 500_000, pid: 1, args: { bytesPerSecond: 200 * 1048576 } },
  ],
};

describe('traceSvg', () => {
  it('draws each track as a row in order, spans in phase colours on the time axis, counters', () => {
    const svg = traceSvg(doc);
    expect(svg.startsWith('<svg ')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    const labels = [...svg.matchAll(/text-anchor="end">([^<]+)</g)].map((m) => m[1]);
    expect(labels.slice(0, 4)).toEqual(['pull', 'layer 0 aaaa', 'layer 0 ranges 1', 'unpack: worker thread 9']);
    expect(labels).toContain('network');
    expect(svg).toContain('max 200 MiB/s');
    expect(svg).toContain('fastpull pull r/&lt;app&gt;:1 (1.00 s)');
    // The pull spans the whole plot; the pass starts a tenth in and lasts eight tenths of it.
    const rect = (fill: string) =>
      svg
        .match(new RegExp(`<rect x="([\\d.]+)" y="[\\d.]+" width="([\\d.]+)" height="12" fill="${fill}"`))!
        .slice(1)
        .map(Number);
    expect(rect('#d9d9d9')).toEqual([190, 900]);
    expect(rect('#59a14f')).toEqual([280, 720]);
    expect(rect('#f28e2b')).toEqual([190, 450]);
    expect(svg).toContain('>range retry</text>');
  });

  it("draws a sampled process trace's counters, each with its unit, over the whole time axis", () => {
    const sampled = {
      traceEvents: [
        { name: 'thread_name', ph: 'M', ts: 0, pid: 1, tid: 1, args: { name: 'CRI client' } },
        { name: 'pull', ph: 'X', ts: 0, dur: 1_000_000, pid: 1, tid: 1 },
        { name: 'cpu: containerd', ph: 'C', ts: 100_000, pid: 1, args: { cores: 1.5 } },
        { name: 'rss: containerd', ph: 'C', ts: 100_000, pid: 1, args: { MiB: 120 } },
        { name: 'device writes', ph: 'C', ts: 2_000_000, pid: 1, args: { 'MiB/s': 300 } },
      ],
    } as unknown as TraceDocument;
    const svg = traceSvg(sampled);
    const labels = [...svg.matchAll(/text-anchor="end">([^<]+)</g)].map((m) => m[1]);
    expect(labels).toEqual(expect.arrayContaining(['CRI client', 'cpu: containerd', 'rss: containerd', 'device writes']));
    expect(svg).toContain('max 1.50 cores');
    expect(svg).toContain('max 120 MiB');
    expect(svg).toContain('max 300 MiB/s');
    // The last sample, at 2 s, ends the axis: the one-second pull spans half of it.
    expect(svg).toContain('(2.00 s)');
    expect(svg).toMatch(/<rect x="190.00" y="[\d.]+" width="450.00" height="12" fill="#d9d9d9"/);
  });

  it('reads a gzipped trace as a plain one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastpull-trace-svg-'));
    try {
      writeFileSync(join(dir, 'a.trace.json.gz'), gzipSync(JSON.stringify(doc)));
      writeFileSync(join(dir, 'a.trace.json'), JSON.stringify(doc));
      expect(readTrace(join(dir, 'a.trace.json.gz'))).toEqual(readTrace(join(dir, 'a.trace.json')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
