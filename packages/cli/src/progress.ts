// Pull progress for people: on a terminal, one live line per layer and a total, redrawn in place
// (like `docker pull`); elsewhere, one log line per state change of a layer. Both take PullEvents
// and a clock, so they render the same way every time for the same events and times.
import { formatPlatform, type LayerState, type PullEvent } from '@fastpull/core';
import { formatBytes, formatDuration, shortDigest } from './io.js';

/** Where progress is written: a stream's write is enough. */
export interface ProgressSink {
  write(chunk: string): unknown;
}

/** What a layer is doing, in the words `docker pull` uses. */
export type LayerStatus = 'Waiting' | 'Downloading' | 'Download complete' | 'Extracting' | 'Verifying' | 'Pull complete' | 'Already exists';

/** One layer of a pull, as the events so far describe it. */
export interface LayerProgress {
  readonly digest: string;
  readonly total: number;
  /** Compressed bytes on disk so far (including any resumed from an earlier pull). */
  fetched: number;
  /** The latest state core reported. */
  state: LayerState;
  /** A download was started for it (false when the blob or the snapshot was already there). */
  downloading: boolean;
  /** Its unpacker started (it follows the download, so this can be true while bytes still arrive). */
  extracting: boolean;
  /** Clock time and bytes at the first and the latest download progress, for the rate. */
  firstSample?: { readonly t: number; readonly bytes: number };
  lastSample?: { readonly t: number; readonly bytes: number };
  /** Compressed bytes the unpack pass has consumed, once the layer is extracting and the pass said. */
  unpacked?: number;
  /** The same samples of the unpack pass, for its rate. */
  firstUnpackSample?: { readonly t: number; readonly bytes: number };
  lastUnpackSample?: { readonly t: number; readonly bytes: number };
}

/** The state of one pull, built from its events. */
export class PullProgress {
  name = '';
  layers: LayerProgress[] = [];
  startedAt: number | undefined;
  finishedAt: number | undefined;

  apply(e: PullEvent, now: number): void {
    this.startedAt ??= now;
    switch (e.type) {
      case 'resolved':
        this.name = e.name;
        this.layers = e.layers.map((l) => ({ digest: l.digest, total: l.size, fetched: 0, state: 'waiting', downloading: false, extracting: false }));
        break;
      case 'layer': {
        const l = this.layers[e.index];
        if (!l) return;
        l.state = e.state;
        if (e.state === 'fetching') {
          l.downloading = true;
          l.fetched = e.bytes;
          l.firstSample ??= { t: now, bytes: e.bytes };
          l.lastSample = { t: now, bytes: e.bytes };
        } else if (e.state === 'extracting') {
          l.extracting = true;
          if (e.unpacked !== undefined) {
            l.unpacked = e.unpacked;
            l.firstUnpackSample ??= { t: now, bytes: e.unpacked };
            l.lastUnpackSample = { t: now, bytes: e.unpacked };
          }
        } else if (e.state === 'verifying' || e.state === 'committed' || e.state === 'exists') {
          l.fetched = l.total;
        }
        break;
      }
      case 'done':
        this.finishedAt = now;
        break;
    }
  }

  /** Bytes per second of the layer's download so far, or undefined until there is a measure. */
  static rate(l: LayerProgress): number | undefined {
    return sampleRate(l.firstSample, l.lastSample);
  }

  /** Compressed bytes per second the unpack pass consumes, measured since the layer began extracting. */
  static unpackRate(l: LayerProgress): number | undefined {
    return sampleRate(l.firstUnpackSample, l.lastUnpackSample);
  }

  static status(l: LayerProgress): LayerStatus {
    switch (l.state) {
      case 'waiting':
        return 'Waiting';
      case 'fetching':
      case 'extracting':
        // The unpacker follows the download: while bytes still arrive, the download is the news.
        if (l.downloading && l.fetched < l.total) return 'Downloading';
        return l.extracting ? 'Extracting' : 'Download complete';
      case 'verifying':
        return 'Verifying';
      case 'committed':
        return 'Pull complete';
      case 'exists':
        return 'Already exists';
    }
  }

  /** Bytes to download in all (layers already there do not count), bytes done, and layers finished. */
  totals(): { bytes: number; fetched: number; complete: number; rate: number | undefined } {
    let bytes = 0;
    let fetched = 0;
    let complete = 0;
    let first: number | undefined;
    let last: number | undefined;
    let moved = 0;
    for (const l of this.layers) {
      if (l.state === 'committed' || l.state === 'exists') complete++;
      if (l.state === 'exists') continue;
      bytes += l.total;
      fetched += Math.min(l.fetched, l.total);
      if (l.firstSample && l.lastSample) {
        first = Math.min(first ?? l.firstSample.t, l.firstSample.t);
        last = Math.max(last ?? l.lastSample.t, l.lastSample.t);
        moved += l.lastSample.bytes - l.firstSample.bytes;
      }
    }
    const rate = first !== undefined && last !== undefined && last - first >= 50 && moved > 0 ? (moved * 1000) / (last - first) : undefined;
    return { bytes, fetched, complete, rate };
  }
}

function sampleRate(a: { t: number; bytes: number } | undefined, b: { t: number; bytes: number } | undefined): number | undefined {
  if (!a || !b || b.t - a.t < 50 || b.bytes <= a.bytes) return undefined;
  return ((b.bytes - a.bytes) * 1000) / (b.t - a.t);
}

const ESC = '\x1b[';
const STATUS_COLOR: Readonly<Record<LayerStatus, string>> = {
  Waiting: '2',
  Downloading: '36',
  'Download complete': '36',
  Extracting: '33',
  Verifying: '33',
  'Pull complete': '32',
  'Already exists': '32',
};
const STATUS_WIDTH = Math.max(...Object.keys(STATUS_COLOR).map((s) => s.length));
const BAR_WIDTH = 24;

function eta(remaining: number, rate: number | undefined, sinceSample: number): string {
  if (rate === undefined || remaining <= 0) return '';
  const s = Math.max(0, remaining / rate - sinceSample / 1000);
  // Overdue by the rate so far: no guess beats none.
  if (Math.ceil(s) === 0) return '';
  return `ETA ${formatDuration(Math.ceil(s) * 1000).replace(/\.00s$/, 's')}`;
}

function bar(done: number, total: number): string {
  const filled = total > 0 ? Math.min(BAR_WIDTH, Math.floor((done / total) * BAR_WIDTH)) : 0;
  return `[${'='.repeat(filled)}${filled < BAR_WIDTH ? '>' : ''}${' '.repeat(Math.max(0, BAR_WIDTH - filled - 1))}]`;
}

/** The text of a layer's line (no colour), e.g. `0a1b2c3d4e5f: Downloading  [====>   ]  4.0 MiB/16.0 MiB  8.0 MiB/s  ETA 2s`. */
export function layerLine(l: LayerProgress, now: number, withBar = true): { prefix: string; status: LayerStatus; rest: string } {
  const status = PullProgress.status(l);
  const parts: string[] = [];
  switch (status) {
    case 'Downloading': {
      const rate = PullProgress.rate(l);
      if (withBar) parts.push(bar(l.fetched, l.total));
      parts.push(`${formatBytes(l.fetched)}/${formatBytes(l.total)}`);
      if (rate !== undefined) parts.push(`${formatBytes(rate)}/s`, eta(l.total - l.fetched, rate, now - (l.lastSample?.t ?? now)));
      break;
    }
    case 'Extracting': {
      // The pass's bar: compressed bytes consumed, with the pass's own rate and ETA.
      if (l.unpacked === undefined) {
        parts.push(formatBytes(l.total));
        break;
      }
      const rate = PullProgress.unpackRate(l);
      if (withBar) parts.push(bar(l.unpacked, l.total));
      parts.push(`${formatBytes(l.unpacked)}/${formatBytes(l.total)}`);
      if (rate !== undefined) parts.push(`${formatBytes(rate)}/s`, eta(l.total - l.unpacked, rate, now - (l.lastUnpackSample?.t ?? now)));
      break;
    }
    case 'Already exists':
    case 'Waiting':
      break;
    default:
      parts.push(formatBytes(l.total));
  }
  return { prefix: `${shortDigest(l.digest)}: `, status, rest: parts.filter((p) => p !== '').join('  ') };
}

/** The total line, e.g. `Total: 2/5 layers  12.0 MiB/40.0 MiB  9.1 MiB/s  ETA 3s` or `Total: 5/5 layers  40.0 MiB in 4.21s`. */
export function totalLine(p: PullProgress, now: number): string {
  const t = p.totals();
  const head = `Total: ${t.complete}/${p.layers.length} layers`;
  if (p.finishedAt !== undefined) return `${head}  ${formatBytes(t.bytes)} in ${formatDuration(p.finishedAt - (p.startedAt ?? p.finishedAt))}`;
  const parts = [head, `${formatBytes(t.fetched)}/${formatBytes(t.bytes)}`];
  if (t.rate !== undefined) {
    const lastSample = Math.max(...p.layers.map((l) => l.lastSample?.t ?? 0));
    parts.push(`${formatBytes(t.rate)}/s`, eta(t.bytes - t.fetched, t.rate, now - lastSample));
  }
  return parts.filter((s) => s !== '').join('  ');
}

/** The line saying what a reference resolved to (printed once, above the live lines or the log). */
export function resolvedLine(e: Extract<PullEvent, { type: 'resolved' }>): string {
  return `${e.name}: resolved ${e.manifest} (${formatPlatform(e.platform)}), ${e.layers.length} layer${e.layers.length === 1 ? '' : 's'}`;
}

export interface LiveProgressOptions {
  readonly out: ProgressSink;
  /** Milliseconds, monotonic (performance.now in the CLI). */
  readonly now: () => number;
  readonly color: boolean;
  /** Terminal width; lines are cut to fit so the cursor arithmetic holds (default 80). */
  readonly columns?: number;
  /** Least time between two redraws caused by events (default 100 ms: 10 Hz). */
  readonly intervalMs?: number;
}

/**
 * The live view: one line per layer and a total, redrawn in place with ANSI cursor-up and
 * erase-line. Events redraw at most every `intervalMs`; `tick()` (called on a timer) keeps rates and
 * ETAs moving between events; `finish()` draws the final state once.
 */
export class LiveProgress {
  private readonly progress = new PullProgress();
  private drawn = 0;
  private lastDraw = -Infinity;
  private finished = false;

  constructor(private readonly options: LiveProgressOptions) {}

  event(e: PullEvent): void {
    if (this.finished) return;
    const now = this.options.now();
    this.progress.apply(e, now);
    if (e.type === 'resolved') {
      this.options.out.write(`${resolvedLine(e)}\n`);
      this.draw(now);
    } else if (e.type === 'done') {
      this.finish();
    } else if (now - this.lastDraw >= (this.options.intervalMs ?? 100)) {
      this.draw(now);
    }
  }

  tick(): void {
    if (!this.finished && this.progress.layers.length > 0) this.draw(this.options.now());
  }

  /** Draws the final state (once) and leaves the lines in place. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.progress.layers.length > 0) this.draw(this.options.now());
  }

  /** The lines of the current frame, without colour or cutting to the terminal width. */
  lines(now = this.options.now()): string[] {
    return [...this.progress.layers.map((l) => layerLineText(layerLine(l, now))), totalLine(this.progress, now)];
  }

  private draw(now: number): void {
    this.lastDraw = now;
    const width = Math.max(20, (this.options.columns || 80) - 1);
    let s = this.drawn > 0 ? `${ESC}${this.drawn}A` : '';
    const rows = this.progress.layers.map((l) => {
      // On a narrow terminal the bar goes first, so the numbers stay.
      const full = layerLine(l, now);
      return this.paint(layerLineText(full).length <= width ? full : layerLine(l, now, false), width);
    });
    rows.push(cut(totalLine(this.progress, now), width));
    for (const row of rows) s += `\r${ESC}2K${row}\n`;
    this.drawn = rows.length;
    this.options.out.write(s);
  }

  private paint(line: ReturnType<typeof layerLine>, width: number): string {
    const plain = layerLineText(line);
    if (!this.options.color || plain.length > width) return cut(plain, width);
    const status = `${ESC}${STATUS_COLOR[line.status]}m${line.status}${ESC}0m`;
    return line.rest ? `${line.prefix}${status}${' '.repeat(STATUS_WIDTH - line.status.length)}  ${line.rest}` : `${line.prefix}${status}`;
  }
}

function layerLineText(line: ReturnType<typeof layerLine>): string {
  return `${line.prefix}${line.status.padEnd(STATUS_WIDTH)}${line.rest ? `  ${line.rest}` : ''}`.replace(/\s+$/, '');
}

function cut(s: string, width: number): string {
  return s.length > width ? s.slice(0, width) : s;
}

/**
 * The log view, for pipes and files: a line when the pull resolves and one each time a layer's
 * state changes (never one per chunk of bytes).
 */
export class LogProgress {
  private readonly progress = new PullProgress();
  private readonly said: (LayerStatus | undefined)[] = [];

  constructor(
    private readonly out: ProgressSink,
    private readonly now: () => number,
  ) {}

  event(e: PullEvent): void {
    const now = this.now();
    this.progress.apply(e, now);
    if (e.type === 'resolved') {
      this.out.write(`${resolvedLine(e)}\n`);
      return;
    }
    if (e.type !== 'layer') return;
    const l = this.progress.layers[e.index];
    if (!l) return;
    const status = PullProgress.status(l);
    if (this.said[e.index] === status) return;
    this.said[e.index] = status;
    const size = status === 'Downloading' || status === 'Pull complete' ? ` (${formatBytes(l.total)})` : '';
    this.out.write(`  ${shortDigest(l.digest)}: ${status.toLowerCase()}${size}\n`);
  }
}
