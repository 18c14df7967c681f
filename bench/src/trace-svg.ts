// Renders a pull's trace (what `fastpull pull --trace` writes) as a standalone SVG: one row per track
// in the order Perfetto shows them, spans coloured by phase, the sampled counters as filled curves,
// a time axis and a legend. For pictures in docs; open the JSON in Perfetto to explore.
//
//   node bench/dist/trace-svg.js TRACE.json[.gz] [OUT.svg]   (default: TRACE with .svg)
import { readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import type { TraceDocument, TraceEvent } from '@fastpull/core';

/** Phase colours: fetching blues, unpacking greens, the rest muted; retries and re-issues stand out. */
const COLOURS: Record<string, string> = {
  pull: '#d9d9d9',
  resolve: '#f2c14e',
  waiting: '#bfbfbf',
  exists: '#8c8c8c',
  fetch: '#4e79a7',
  range: '#8fb8de',
  'range retry': '#f28e2b',
  'range reissue': '#e15759',
  unpack: '#59a14f',
  verify: '#b07aa1',
  commit: '#9c755f',
};
const COUNTERS: readonly { name: string; key: string; label: string; unit: (v: number) => string; colour: string }[] = [
  { name: 'network', key: 'bytesPerSecond', label: 'network', unit: (v) => `${(v / 1048576).toFixed(0)} MiB/s`, colour: '#4e79a7' },
  { name: 'bytes in flight', key: 'bytes', label: 'bytes in flight', unit: (v) => `${(v / 1048576).toFixed(1)} MiB`, colour: '#f28e2b' },
  { name: 'rss', key: 'bytes', label: 'resident memory', unit: (v) => `${(v / 1048576).toFixed(0)} MiB`, colour: '#76b7b2' },
];

/** Units of the counters of a sampled process trace (src/peers/proc-trace.ts), by their one argument. */
const UNITS: Record<string, (v: number) => string> = {
  cores: (v) => `${v.toFixed(2)} cores`,
  MiB: (v) => `${v.toFixed(0)} MiB`,
  'MiB/s': (v) => `${v.toFixed(0)} MiB/s`,
};
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#b07aa1', '#9c755f', '#edc948'];

/** The counters to draw: fastpull's own, then any other (a sampled process trace's), in order of appearance. */
function countersOf(events: readonly TraceEvent[]): typeof COUNTERS {
  const known = COUNTERS.filter((c) => events.some((e) => e.ph === 'C' && e.name === c.name));
  const others: (typeof COUNTERS)[number][] = [];
  for (const e of events) {
    if (e.ph !== 'C' || COUNTERS.some((c) => c.name === e.name) || others.some((c) => c.name === e.name)) continue;
    const key = Object.keys(e.args ?? {})[0] ?? 'value';
    others.push({ name: e.name, key, label: e.name, unit: UNITS[key] ?? ((v) => v.toFixed(2)), colour: PALETTE[others.length % PALETTE.length]! });
  }
  return [...known, ...others];
}

const LABEL_W = 190;
const PLOT_W = 900;
const ROW_H = 16;
const SPAN_H = 12;
const COUNTER_H = 42;
const PAD = 10;

interface Track {
  readonly pid: number;
  readonly tid: number;
  readonly name: string;
  readonly sort: number;
  readonly spans: TraceEvent[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A step of 1, 2 or 5 times a power of ten giving about `n` ticks over `span`. */
function tickStep(span: number, n: number): number {
  const raw = span / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
}

/** The tracks that hold spans, ordered as the viewers order them: by process, then sort index. */
function tracksOf(events: readonly TraceEvent[]): Track[] {
  const meta = (name: string, pid: number, tid: number) => events.find((e) => e.ph === 'M' && e.name === name && e.pid === pid && e.tid === tid)?.args;
  const byKey = new Map<string, Track>();
  for (const e of events) {
    if (e.ph !== 'X' || e.tid === undefined) continue;
    const key = `${e.pid}/${e.tid}`;
    let t = byKey.get(key);
    if (!t) {
      const name = String(meta('thread_name', e.pid, e.tid)?.name ?? `track ${e.tid}`);
      const sort = Number(meta('thread_sort_index', e.pid, e.tid)?.sort_index ?? e.tid);
      t = { pid: e.pid, tid: e.tid, name: e.pid === 1 ? name : `unpack: ${name}`, sort, spans: [] };
      byKey.set(key, t);
    }
    t.spans.push(e);
  }
  return [...byKey.values()].sort((a, b) => a.pid - b.pid || a.sort - b.sort);
}

/** The SVG of a trace document. */
export function traceSvg(doc: TraceDocument, title?: string): string {
  const events = doc.traceEvents;
  const tracks = tracksOf(events);
  const endUs = Math.max(1, ...events.filter((e) => e.ph === 'X' || e.ph === 'C').map((e) => e.ts + (e.dur ?? 0)));
  const x = (us: number) => LABEL_W + (us / endUs) * PLOT_W;
  const counters = countersOf(events);
  const heading = title ?? String(events.find((e) => e.ph === 'M' && e.name === 'process_name' && e.pid === 1)?.args?.name ?? 'pull');
  const top = PAD + 22;
  const countersTop = top + tracks.length * ROW_H + 8;
  const axisTop = countersTop + counters.length * (COUNTER_H + 6) + 4;
  const legendTop = axisTop + 30;
  const height = legendTop + 24;
  const width = LABEL_W + PLOT_W + PAD * 2;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${PAD}" y="${PAD + 12}" font-size="13" font-weight="bold">${esc(heading)} (${(endUs / 1e6).toFixed(2)} s)</text>`,
  ];
  tracks.forEach((t, row) => {
    const y = top + row * ROW_H;
    if (row % 2 === 0) out.push(`<rect x="${LABEL_W}" y="${y}" width="${PLOT_W}" height="${ROW_H}" fill="#f7f7f7"/>`);
    out.push(`<text x="${LABEL_W - 6}" y="${y + ROW_H - 4}" text-anchor="end">${esc(t.name)}</text>`);
    for (const s of t.spans) {
      const x0 = x(s.ts);
      const w = Math.max(0.6, x(s.ts + (s.dur ?? 0)) - x0);
      const tip = `${s.name} ${((s.dur ?? 0) / 1000).toFixed(1)} ms${s.args ? ` ${JSON.stringify(s.args)}` : ''}`;
      out.push(
        `<rect x="${x0.toFixed(2)}" y="${y + (ROW_H - SPAN_H) / 2}" width="${w.toFixed(2)}" height="${SPAN_H}" fill="${COLOURS[s.name] ?? '#bab0ac'}" stroke="white" stroke-width="0.3"><title>${esc(tip)}</title></rect>`,
      );
    }
  });
  counters.forEach((c, k) => {
    const y0 = countersTop + k * (COUNTER_H + 6);
    const samples = events.filter((e) => e.ph === 'C' && e.name === c.name).map((e) => [e.ts, Number(e.args?.[c.key] ?? 0)] as const);
    const max = Math.max(1, ...samples.map(([, v]) => v));
    const base = y0 + COUNTER_H;
    // Counters hold their value until the next sample: a step curve.
    let path = `M ${x(samples[0]?.[0] ?? 0).toFixed(2)} ${base}`;
    samples.forEach(([ts, v], i) => {
      const yv = base - (v / max) * (COUNTER_H - 4);
      if (i > 0) path += ` H ${x(ts).toFixed(2)}`;
      path += ` V ${yv.toFixed(2)}`;
    });
    path += ` H ${x(samples.at(-1)?.[0] ?? 0).toFixed(2)} V ${base} Z`;
    out.push(`<rect x="${LABEL_W}" y="${y0}" width="${PLOT_W}" height="${COUNTER_H}" fill="#fbfbfb" stroke="#e0e0e0"/>`);
    out.push(`<path d="${path}" fill="${c.colour}" fill-opacity="0.55" stroke="${c.colour}" stroke-width="0.8"/>`);
    out.push(`<text x="${LABEL_W - 6}" y="${y0 + 14}" text-anchor="end">${esc(c.label)}</text>`);
    out.push(`<text x="${LABEL_W - 6}" y="${y0 + 27}" text-anchor="end" fill="#666">max ${esc(c.unit(max))}</text>`);
  });
  const step = tickStep(endUs / 1000, 10);
  out.push(`<line x1="${LABEL_W}" y1="${axisTop}" x2="${LABEL_W + PLOT_W}" y2="${axisTop}" stroke="#333"/>`);
  for (let ms = 0; ms * 1000 <= endUs; ms += step) {
    const tx = x(ms * 1000);
    out.push(`<line x1="${tx.toFixed(2)}" y1="${top}" x2="${tx.toFixed(2)}" y2="${axisTop + 4}" stroke="#000" stroke-opacity="0.08"/>`);
    out.push(`<text x="${tx.toFixed(2)}" y="${axisTop + 16}" text-anchor="middle">${step >= 1000 ? `${ms / 1000} s` : `${ms} ms`}</text>`);
  }
  const used = new Set(tracks.flatMap((t) => t.spans.map((s) => s.name)));
  let lx = LABEL_W;
  for (const [name, colour] of Object.entries(COLOURS)) {
    if (!used.has(name)) continue;
    out.push(`<rect x="${lx}" y="${legendTop}" width="12" height="10" fill="${colour}"/><text x="${lx + 16}" y="${legendTop + 9}">${esc(name)}</text>`);
    lx += 24 + name.length * 6.2;
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** A trace file, plain or gzipped JSON. */
export function readTrace(path: string): TraceDocument {
  const raw = readFileSync(path);
  const text = raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw).toString('utf8') : raw.toString('utf8');
  return JSON.parse(text) as TraceDocument;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [input, output] = process.argv.slice(2);
  if (!input) {
    process.stderr.write('usage: node bench/dist/trace-svg.js TRACE.json[.gz] [OUT.svg]\n');
    process.exit(2);
  }
  const to = output ?? input.replace(/(\.trace)?\.json(\.gz)?$/, '') + '.svg';
  writeFileSync(to, traceSvg(readTrace(input)));
  process.stderr.write(`wrote ${to}\n`);
}
