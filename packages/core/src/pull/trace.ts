// A pull as a Chrome trace-event document (what Perfetto and chrome://tracing open), built from the
// pull's progress events as they come, what its observer reports (range requests, unpack passes, bytes)
// and its timings at the end: a track per layer with lanes of range requests, a track per unpack
// worker thread, counters.
import type { RangeRequest } from '../registry/range-request.js';
import type { PullObserver } from './observer.js';
import { cpuArgs, laneTid, layerSortIndex, layerTid, passSpans, passTid, rangeSpans, WORKERS_PID, type PassRecord, type SpanSpec } from './trace-tracks.js';
import type { LayerTimings, PullEvent, PullTimings } from './types.js';

/** One trace event: `X` a complete span, `C` a counter sample, `M` metadata naming a track. */
export interface TraceEvent {
  /** The span's phase (`fetch`, `unpack`...), the counter's name, or the metadata's kind. */
  readonly name: string;
  /** `pull`, `layer`, `range`, `worker` or `counter`. */
  readonly cat?: string;
  /** The event's kind. */
  readonly ph: 'X' | 'C' | 'M';
  /** Microseconds since the recorder started. */
  readonly ts: number;
  /** Microseconds (`X` only). */
  readonly dur?: number;
  /** 1: the pull (its own track, its layers', counters); 2: the unpack worker threads. */
  readonly pid: number;
  /**
   * The track. Of the pull: 0 its own, `i + 1` layer `i`'s, `(i + 1) * 1000 + 1` layer `i`'s unpack
   * pass, `(i + 1) * 1000 + k + 2` lane `k` of layer `i`'s range requests. Of the workers: the
   * thread's `threadId` (0: the pulling thread). Counters have none.
   */
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
  /** Sample the counters (memory, bytes in flight, network rate) every this many ms (default 100; 0: never). */
  readonly sampleIntervalMs?: number;
  /**
   * The former name of `sampleIntervalMs` (read when that is not given).
   * @deprecated use sampleIntervalMs
   */
  readonly rssIntervalMs?: number;
  /** The clock, in ms (default performance.now: the observer's times must be on it). */
  readonly now?: () => number;
}

const PID = 1;
/** The pull's own track (resolving, the whole pull); layer `i` is on track `i + 1`. */
const PULL_TID = 0;

/** When each state of a layer was first reported, in ms on the recorder's clock. */
type StateTimes = Partial<Record<string, number>>;

/**
 * Records one pull. Call `start()` before the pull, pass every progress event to `event()` and
 * `observer` as the pull's observer, then `finish(timings)` for the document. The observer gives the
 * range requests (spans in lanes under their layer), the unpack passes (spans on their worker
 * thread's track) and the bytes landing; the counters are sampled every `sampleIntervalMs`: the
 * process's resident memory, the bytes downloaded but not yet read by the unpack passes, and the
 * network rate. Where the events say when a state began, the timings say how
 * long the fetch, the unpack pass and the commit took: spans end at the event that follows them
 * (the unpack pass ends when the layer is `verifying`, the commit when it is `committed`) and last
 * as long as the timings say. The unpack pass's parts (waiting for bytes, hashing, inflating,
 * extracting) interleave, so they are the pass span's arguments, not spans of their own.
 * @example
 * const trace = new TraceRecorder();
 * trace.start();
 * const r = await pull('127.0.0.1:5000/app:1', { root, onProgress: (e) => trace.event(e), observer: trace.observer });
 * writeFileSync('pull.trace.json', JSON.stringify(trace.finish(r.timings)));
 */
export class TraceRecorder {
  private readonly now: () => number;
  private readonly sampleIntervalMs: number;
  private t0 = 0;
  /** The process's uptime when the pull started, in ms (see {@link start}). */
  private uptimeMs: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly counters: TraceEvent[] = [];
  private name = '';
  private resolvedAt: number | undefined;
  private layers: { digest: string; size: number }[] = [];
  private readonly states = new Map<number, StateTimes>();
  private readonly fetched = new Map<number, number>();
  private readonly current = new Map<number, string>();
  private readonly ranges = new Map<number, RangeRequest[]>();
  private readonly passes: PassRecord[] = [];
  /** Bytes in each layer's blob file (resumed ones too), and those fetched over the network. */
  private readonly landed = new Map<number, number>();
  private network = 0;
  private lastSample: { t: number; network: number } | undefined;

  /** Pass it as the pull's `observer` (PullOptions.observer). */
  readonly observer: PullObserver = {
    bytes: (index, n, resumed) => {
      this.landed.set(index, (this.landed.get(index) ?? 0) + n);
      if (!resumed) this.network += n;
    },
    range: (index, request) => {
      const list = this.ranges.get(index);
      if (list) list.push(request);
      else this.ranges.set(index, [request]);
    },
    unpackStarted: (index, pass) => {
      this.passes.push({ index, thread: pass.thread, startedAt: this.now(), read: pass.read, ...(pass.borrowed ? { borrowed: true } : {}) });
    },
    unpackEnded: (index, pass) => {
      const p = this.passes.findLast((x) => x.index === index && x.endedAt === undefined);
      if (!p) return;
      p.endedAt = this.now();
      if (pass.timings) p.timings = pass.timings;
    },
  };

  constructor(options: TraceRecorderOptions = {}) {
    this.now = options.now ?? (() => performance.now());
    this.sampleIntervalMs = options.sampleIntervalMs ?? options.rssIntervalMs ?? 100;
  }

  /** The pull starts now; sampling begins. */
  start(): void {
    this.t0 = this.now();
    // On the pull span: for a command, what its start took (Node, then fastpull's modules) before
    // the pull; for a daemon, how long it had been up. With the pull's span it tells a command's
    // wall time that went outside the pull (its start, or after the pull: its exit).
    this.uptimeMs = Math.round(process.uptime() * 1000);
    if (this.sampleIntervalMs > 0) {
      this.sample();
      this.timer = setInterval(() => this.sample(), this.sampleIntervalMs);
      this.timer.unref();
    }
  }

  /**
   * Samples the counters now (the timer does, every `sampleIntervalMs`): resident memory, bytes in
   * flight (in the layers' blob files, not yet read by their unpack passes) and the network rate
   * since the last sample.
   */
  sample(): void {
    const t = this.now();
    this.counter(t, 'rss', { bytes: process.memoryUsage.rss() });
    let inFlight = 0;
    for (const [index, landed] of this.landed) {
      const pass = this.passes.findLast((p) => p.index === index);
      inFlight += Math.max(0, landed - (pass ? pass.read() : 0));
    }
    this.counter(t, 'bytes in flight', { bytes: inFlight });
    const last = this.lastSample;
    if (last && t > last.t) this.counter(t, 'network', { bytesPerSecond: Math.round(((this.network - last.network) * 1000) / (t - last.t)) });
    this.lastSample = { t, network: this.network };
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
      this.sample();
    }
    const events: TraceEvent[] = [
      meta('process_name', PULL_TID, { name: this.name ? `fastpull pull ${this.name}` : 'fastpull pull' }),
      meta('thread_name', PULL_TID, { name: 'pull' }),
      meta('thread_sort_index', PULL_TID, { sort_index: 0 }),
      this.span('pull', 'pull', PULL_TID, this.t0, end, {
        ...(timings ? { totalMs: timings.totalMs } : { failed: 1 }),
        ...(this.uptimeMs !== undefined ? { processUptimeMs: this.uptimeMs } : {}),
      }),
    ];
    if (this.resolvedAt !== undefined)
      events.push(this.span('resolve', 'pull', PULL_TID, this.t0, this.resolvedAt, timings ? { resolveMs: timings.resolveMs } : {}));
    this.layers.forEach((layer, i) => {
      const short = layer.digest.slice(7, 19);
      events.push(meta('thread_name', layerTid(i), { name: `layer ${i} ${short}` }), meta('thread_sort_index', layerTid(i), { sort_index: layerSortIndex(i) }));
      const own = this.layerSpans(i, end, timings?.layers[i]);
      if (own.some((e) => e.tid === passTid(i)))
        events.push(meta('thread_name', passTid(i), { name: `layer ${i} unpack` }), meta('thread_sort_index', passTid(i), { sort_index: passTid(i) }));
      events.push(...own);
      const { spans, lanes } = rangeSpans(i, layer.digest, this.ranges.get(i) ?? [], end);
      for (let k = 0; k < lanes; k++)
        events.push(
          meta('thread_name', laneTid(i, k), { name: `layer ${i} ranges ${k + 1}` }),
          meta('thread_sort_index', laneTid(i, k), { sort_index: laneTid(i, k) }),
        );
      events.push(...spans.map((x) => this.spanOf(PID, x)));
    });
    if (this.passes.length > 0) {
      events.push(meta('process_name', 0, { name: 'unpack workers' }, WORKERS_PID), meta('process_sort_index', 0, { sort_index: 1 }, WORKERS_PID));
      for (const thread of new Set(this.passes.map((p) => p.thread))) {
        events.push(meta('thread_name', thread, { name: thread === 0 ? 'pulling thread' : `worker thread ${thread}` }, WORKERS_PID));
      }
      events.push(
        ...passSpans(
          this.passes,
          this.layers.map((l) => l.digest),
          end,
        ).map((x) => this.spanOf(WORKERS_PID, x)),
      );
    }
    return { traceEvents: [...events, ...this.counters], displayTimeUnit: 'ms' };
  }

  /** A layer's spans: waiting, fetch, verify, commit (or `exists`) on its track, the unpack pass on its own; clipped to the pull. */
  private layerSpans(i: number, end: number, lt: LayerTimings | undefined): TraceEvent[] {
    const s = this.states.get(i) ?? {};
    const tid = i + 1;
    const out: TraceEvent[] = [];
    const { digest, size } = this.layers[i]!;
    const after = (...keys: string[]): number => keys.map((k) => s[k]).find((v): v is number => v !== undefined) ?? end;
    if (s.waiting !== undefined)
      out.push(this.span('waiting', 'layer', tid, s.waiting, after('fetching', 'extracting', 'verifying', 'committed', 'exists'), { digest }));
    if (s.exists !== undefined) out.push(this.span('exists', 'layer', tid, s.exists, s.exists, { digest }));
    if (s.fetching !== undefined) {
      const stop = lt ? Math.min(s.fetching + lt.fetchMs, end) : after('extracting', 'verifying', 'committed');
      const requests = this.ranges.get(i) ?? [];
      const again = requests.filter((r) => r.reason !== 'first').length;
      out.push(
        this.span('fetch', 'layer', tid, s.fetching, stop, {
          digest,
          bytes: size,
          ...(lt ? { fetchMs: lt.fetchMs } : {}),
          ...(requests.length > 0 ? { requests: requests.length, reissued: again } : {}),
        }),
      );
    }
    if (lt && lt.state === 'committed' && s.verifying !== undefined) {
      out.push(
        this.span('unpack', 'layer', passTid(i), Math.max(s.verifying - lt.unpackMs, this.t0), s.verifying, {
          digest,
          unpackMs: lt.unpackMs,
          waitMs: lt.waitMs,
          hashMs: lt.verifyMs,
          inflateMs: lt.decompressMs,
          extractMs: lt.extractMs,
          ...cpuArgs(lt),
          ...(lt.ztocCheckpoints !== undefined ? { ztocCheckpoints: lt.ztocCheckpoints } : {}),
          ...(lt.releasedBytes !== undefined ? { releasedBytes: lt.releasedBytes } : {}),
        }),
      );
      const committed = s.committed ?? end;
      const commitStart = Math.max(committed - lt.commitMs, s.verifying);
      out.push(this.span('verify', 'layer', tid, s.verifying, commitStart, { digest }));
      out.push(this.span('commit', 'layer', tid, commitStart, committed, { digest, commitMs: lt.commitMs }));
    } else if (s.extracting !== undefined) {
      // A failed pull has no timings: the pass shows from when the layer was extracting.
      out.push(this.span('unpack', 'layer', passTid(i), s.extracting, after('verifying', 'committed'), { digest }));
    }
    return out;
  }

  private stateCounts(): Record<string, number> {
    const counts: Record<string, number> = { waiting: 0, fetching: 0, extracting: 0 };
    for (const state of this.current.values()) if (state in counts) counts[state]! += 1;
    return counts;
  }

  private counter(t: number, name: string, args: Record<string, number>): void {
    this.counters.push({ name, cat: 'counter', ph: 'C', ts: this.us(t), pid: PID, args });
  }

  private span(name: string, cat: string, tid: number, from: number, to: number, args: Record<string, string | number>, pid = PID): TraceEvent {
    const ts = this.us(from);
    return { name, cat, ph: 'X', ts, dur: Math.max(0, Math.round((this.us(to) - ts) * 1e3) / 1e3), pid, tid, args };
  }

  private spanOf(pid: number, x: SpanSpec): TraceEvent {
    return this.span(x.name, x.cat, x.tid, x.from, x.to, x.args, pid);
  }

  /** Microseconds since the start, to the nanosecond. */
  private us(t: number): number {
    return Math.round((t - this.t0) * 1e6) / 1e3;
  }
}

function meta(name: string, tid: number, args: Record<string, string | number>, pid = PID): TraceEvent {
  return { name, ph: 'M', ts: 0, pid, tid, args };
}
