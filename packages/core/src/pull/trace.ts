// A pull as a Chrome trace-event document (what Perfetto and chrome://tracing open), built from the
// pull's progress events as they come and its timings at the end: one track per layer, counters.
import type { LayerTimings, PullEvent, PullTimings } from './types.js';

/** One trace event: `X` a complete span, `C` a counter sample, `M` metadata naming a track. */
export interface TraceEvent {
  /** The span's phase (`fetch`, `unpack`...), the counter's name, or the metadata's kind. */
  readonly name: string;
  /** `pull`, `layer` or `counter`. */
  readonly cat?: string;
  /** The event's kind. */
  readonly ph: 'X' | 'C' | 'M';
  /** Microseconds since the recorder started. */
  readonly ts: number;
  /** Microseconds (`X` only). */
  readonly dur?: number;
  /** Always 1: one pull, one process track. */
  readonly pid: number;
  /** The track: 0 the pull's own, `i + 1` layer `i`'s (counters have none). */
  readonly tid?: number;
  /** Details: the layer's digest and its timings, a counter's values, a track's name. */
  readonly args?: Readonly<Record<string, string | number>>;
}

/** The document: `{"traceEvents": [...]}`, with `displayTimeUnit` for the viewers. */
export interface TraceDocument {
  /** Every span, counter sample and track name. */
  readonly traceEvents: readonly TraceEvent[];
  /** How the viewers show times. */
  readonly displayTimeUnit: 'ms';
}

/** Options of {@link TraceRecorder}. */
export interface TraceRecorderOptions {
  /** Sample this process's resident memory every this many ms (default 100; 0: never). */
  readonly rssIntervalMs?: number;
  /** The clock, in ms (default performance.now). */
  readonly now?: () => number;
}

const PID = 1;
/** The pull's own track (resolving, the whole pull); layer `i` is on track `i + 1`. */
const PULL_TID = 0;

/** When each state of a layer was first reported, in ms on the recorder's clock. */
type StateTimes = Partial<Record<string, number>>;

/**
 * Records one pull. Call `start()` before the pull, pass every progress event to `event()`, then
 * `finish(timings)` for the document. Where the events say when a state began, the timings say how
 * long the fetch, the unpack pass and the commit took: spans end at the event that follows them
 * (the unpack pass ends when the layer is `verifying`, the commit when it is `committed`) and last
 * as long as the timings say. The unpack pass's parts (waiting for bytes, hashing, inflating,
 * extracting) interleave, so they are the pass span's arguments, not spans of their own.
 * @example
 * const trace = new TraceRecorder();
 * trace.start();
 * const r = await pull('127.0.0.1:5000/app:1', { root, onProgress: (e) => trace.event(e) });
 * writeFileSync('pull.trace.json', JSON.stringify(trace.finish(r.timings)));
 */
export class TraceRecorder {
  private readonly now: () => number;
  private readonly rssIntervalMs: number;
  private t0 = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly counters: TraceEvent[] = [];
  private name = '';
  private resolvedAt: number | undefined;
  private layers: { digest: string; size: number }[] = [];
  private readonly states = new Map<number, StateTimes>();
  private readonly fetched = new Map<number, number>();
  private readonly current = new Map<number, string>();

  constructor(options: TraceRecorderOptions = {}) {
    this.now = options.now ?? (() => performance.now());
    this.rssIntervalMs = options.rssIntervalMs ?? 100;
  }

  /** The pull starts now; memory sampling begins. */
  start(): void {
    this.t0 = this.now();
    if (this.rssIntervalMs > 0) {
      this.sampleRss();
      this.timer = setInterval(() => this.sampleRss(), this.rssIntervalMs);
      this.timer.unref();
    }
  }

  /** One progress event of the pull. */
  event(e: PullEvent): void {
    const t = this.now();
    if (e.type === 'resolved') {
      this.name = e.name;
      this.resolvedAt = t;
      this.layers = e.layers.map((l) => ({ digest: l.digest, size: l.size }));
      this.counter(t, 'layers', this.stateCounts());
      return;
    }
    if (e.type !== 'layer') return;
    const times = this.states.get(e.index) ?? {};
    times[e.state] ??= t;
    this.states.set(e.index, times);
    const before = this.current.get(e.index);
    this.current.set(e.index, e.state);
    // Bytes fetched: a layer counts while it downloads, and with all its bytes once it moved past that.
    if (e.state === 'fetching' || before === 'fetching') {
      this.fetched.set(e.index, e.state === 'fetching' ? e.bytes : e.total);
      this.counter(t, 'bytes fetched', { bytes: [...this.fetched.values()].reduce((a, b) => a + b, 0) });
    }
    if (before !== e.state) this.counter(t, 'layers', this.stateCounts());
  }

  /** The pull is over (`timings` when it succeeded): stops sampling and returns the document. */
  finish(timings?: PullTimings): TraceDocument {
    const end = this.now();
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.sampleRss();
    }
    const events: TraceEvent[] = [
      meta('process_name', PULL_TID, { name: this.name ? `fastpull pull ${this.name}` : 'fastpull pull' }),
      meta('thread_name', PULL_TID, { name: 'pull' }),
      meta('thread_sort_index', PULL_TID, { sort_index: 0 }),
      this.span('pull', 'pull', PULL_TID, this.t0, end, timings ? { totalMs: timings.totalMs } : { failed: 1 }),
    ];
    if (this.resolvedAt !== undefined) events.push(this.span('resolve', 'pull', PULL_TID, this.t0, this.resolvedAt, timings ? { resolveMs: timings.resolveMs } : {}));
    this.layers.forEach((layer, i) => {
      events.push(meta('thread_name', i + 1, { name: `layer ${i} ${layer.digest.slice(7, 19)}` }), meta('thread_sort_index', i + 1, { sort_index: i + 1 }));
      events.push(...this.layerSpans(i, end, timings?.layers[i]));
    });
    return { traceEvents: [...events, ...this.counters], displayTimeUnit: 'ms' };
  }

  /** A layer's spans: waiting, fetch, the unpack pass, verify, commit (or `exists`), clipped to the pull. */
  private layerSpans(i: number, end: number, lt: LayerTimings | undefined): TraceEvent[] {
    const s = this.states.get(i) ?? {};
    const tid = i + 1;
    const out: TraceEvent[] = [];
    const { digest, size } = this.layers[i]!;
    const after = (...keys: string[]): number => keys.map((k) => s[k]).find((v): v is number => v !== undefined) ?? end;
    if (s.waiting !== undefined) out.push(this.span('waiting', 'layer', tid, s.waiting, after('fetching', 'extracting', 'verifying', 'committed', 'exists'), { digest }));
    if (s.exists !== undefined) out.push(this.span('exists', 'layer', tid, s.exists, s.exists, { digest }));
    if (s.fetching !== undefined) {
      const stop = lt ? Math.min(s.fetching + lt.fetchMs, end) : after('extracting', 'verifying', 'committed');
      out.push(this.span('fetch', 'layer', tid, s.fetching, stop, { digest, bytes: size, ...(lt ? { fetchMs: lt.fetchMs } : {}) }));
    }
    if (lt && lt.state === 'committed' && s.verifying !== undefined) {
      out.push(
        this.span('unpack', 'layer', tid, Math.max(s.verifying - lt.unpackMs, this.t0), s.verifying, {
          digest,
          unpackMs: lt.unpackMs,
          waitMs: lt.waitMs,
          hashMs: lt.verifyMs,
          inflateMs: lt.decompressMs,
          extractMs: lt.extractMs,
          ...(lt.ztocCheckpoints !== undefined ? { ztocCheckpoints: lt.ztocCheckpoints } : {}),
        }),
      );
      const committed = s.committed ?? end;
      const commitStart = Math.max(committed - lt.commitMs, s.verifying);
      out.push(this.span('verify', 'layer', tid, s.verifying, commitStart, { digest }));
      out.push(this.span('commit', 'layer', tid, commitStart, committed, { digest, commitMs: lt.commitMs }));
    } else if (s.extracting !== undefined) {
      // A failed pull has no timings: the pass shows from when the layer was extracting.
      out.push(this.span('unpack', 'layer', tid, s.extracting, after('verifying', 'committed'), { digest }));
    }
    return out;
  }

  private stateCounts(): Record<string, number> {
    const counts: Record<string, number> = { waiting: 0, fetching: 0, extracting: 0 };
    for (const state of this.current.values()) if (state in counts) counts[state]! += 1;
    return counts;
  }

  private sampleRss(): void {
    this.counter(this.now(), 'rss', { bytes: process.memoryUsage.rss() });
  }

  private counter(t: number, name: string, args: Record<string, number>): void {
    this.counters.push({ name, cat: 'counter', ph: 'C', ts: this.us(t), pid: PID, args });
  }

  private span(name: string, cat: string, tid: number, from: number, to: number, args: Record<string, string | number>): TraceEvent {
    const ts = this.us(from);
    return { name, cat, ph: 'X', ts, dur: Math.max(0, Math.round((this.us(to) - ts) * 1e3) / 1e3), pid: PID, tid, args };
  }

  /** Microseconds since the start, to the nanosecond. */
  private us(t: number): number {
    return Math.round((t - this.t0) * 1e6) / 1e3;
  }
}

function meta(name: string, tid: number, args: Record<string, string | number>): TraceEvent {
  return { name, ph: 'M', ts: 0, pid: PID, tid, args };
}
