// A sampled trace of a pull made by programs that write no trace of their own (containerd, the SOCI
// snapshotter, ctr, the CRI client, and fastpulld on containerd's fast path): every 100 ms, each
// process group's CPU (cores busy: the process and every process it started, as measure.ts counts
// them), its resident memory, and what the block device wrote. Written in the Chrome trace-event
// format of fastpull's own traces, so Perfetto and src/trace-svg.ts read both. It says where a
// pull's time went: downloading (little CPU, no device writes), decompressing (the snapshotter's or
// its decompressor's CPU), writing (device writes), or waiting on one process.
import { writeFileSync } from 'node:fs';
import { blockCounters, type ProcTable } from './measure.js';

export interface ProcTraceOptions {
  readonly file: string;
  /** A path on the block device whose writes are recorded. */
  readonly device?: string;
  /** The command's process tree, as the trace names it. */
  readonly command: string;
  /** The daemons' names, in the order measure's `daemons` lists them. */
  readonly daemons: readonly string[];
}

interface Event {
  name: string;
  ph: 'C' | 'X' | 'M';
  ts: number;
  dur?: number;
  pid: number;
  tid?: number;
  args?: Record<string, number | string>;
}

const SAMPLE_MS = 100;
const MIB = 1024 * 1024;

export class ProcTrace {
  private readonly t0 = performance.now();
  private last: { ms: number; cpu: number[]; sectors: number | undefined } | undefined;
  private readonly events: Event[] = [];

  constructor(
    private readonly options: ProcTraceOptions,
    private readonly commandPid: number | undefined,
    private readonly daemonPids: readonly number[],
  ) {}

  private groups(): { name: string; pid: number | undefined; self: boolean }[] {
    return [
      // The command's root is /usr/bin/time: its children are the command.
      { name: this.options.command, pid: this.commandPid, self: false },
      ...this.daemonPids.map((pid, i) => ({ name: this.options.daemons[i] ?? `daemon ${pid}`, pid, self: true })),
    ];
  }

  /** Records a sample when 100 ms have passed since the last one. */
  sample(table: ProcTable): void {
    const ms = performance.now() - this.t0;
    if (this.last !== undefined && ms - this.last.ms < SAMPLE_MS) return;
    const groups = this.groups();
    const cpu = groups.map((g) =>
      g.pid === undefined ? 0 : g.self ? table.cpuSeconds(g.pid) : (table.kids.get(g.pid) ?? []).reduce((a, p) => a + table.cpuSeconds(p), 0),
    );
    const sectors = this.options.device === undefined ? undefined : blockCounters(this.options.device)?.writeSectors;
    const ts = Math.round(ms * 1000);
    groups.forEach((g, i) => {
      this.events.push({ name: `rss: ${g.name}`, ph: 'C', ts, pid: 1, args: { MiB: g.pid === undefined ? 0 : table.rssKiB(g.pid, g.self) / 1024 } });
      if (this.last !== undefined) {
        const cores = Math.max(0, cpu[i]! - (this.last.cpu[i] ?? 0)) / ((ms - this.last.ms) / 1000);
        this.events.push({ name: `cpu: ${g.name}`, ph: 'C', ts, pid: 1, args: { cores } });
      }
    });
    if (this.last !== undefined && sectors !== undefined && this.last.sectors !== undefined) {
      const mibPerS = ((sectors - this.last.sectors) * 512) / MIB / ((ms - this.last.ms) / 1000);
      this.events.push({ name: 'device writes', ph: 'C', ts, pid: 1, args: { 'MiB/s': mibPerS } });
    }
    this.last = { ms, cpu, sectors };
  }

  /** Writes the trace: the samples, and the command's run as one span. */
  finish(wallS: number): void {
    const meta: Event[] = [
      { name: 'process_name', ph: 'M', ts: 0, pid: 1, args: { name: `${this.options.command} (sampled every ${SAMPLE_MS} ms)` } },
      { name: 'thread_name', ph: 'M', ts: 0, pid: 1, tid: 1, args: { name: this.options.command } },
    ];
    const span: Event = { name: 'pull', ph: 'X', ts: 0, dur: Math.round(wallS * 1e6), pid: 1, tid: 1 };
    writeFileSync(this.options.file, JSON.stringify({ traceEvents: [...meta, span, ...this.events], displayTimeUnit: 'ms' }));
  }
}
