// One layer's queue of small files for the addon's writer threads (native/fastpull_files.c).
//
// Making a small file is almost all kernel work (the create, the first write, the inode updates),
// paid on whichever thread calls. The unpack thread hands each small new regular file to the sink
// and goes on parsing, while a pool of threads makes the files side by side. The writer keeps every
// decision: it cleans the name, makes the parents, chooses what may go to the sink, and drains the
// sink before anything that could touch a name still queued (a replacement, a hardlink, a
// whiteout) and before directories get their final modes and times.
import { availableCores } from '../util/cpu.js';
import { nativeFs } from '../native/addon.js';
import { fsError } from './apply/report.js';
import type { Times } from './apply/times.js';

/** Files up to this size go to the sink; larger ones are written by the unpack thread as they stream. */
export const SINK_MAX_FILE = 1024 * 1024;
/** Bytes a sink may hold before the unpack thread waits: bounds its memory whatever the layer. */
export const SINK_MAX_PENDING = 1024 * 1024;
/** Labels of queued files a sink keeps before it looks whether it can let them go (see {@link FileSink.add}). */
const PRUNE_ENTRIES = 32;
/** The most writer threads the addon starts (native/fastpull_files.c MAX_THREADS). */
export const MAX_WRITER_THREADS = 16;

/**
 * Writer threads in the process, shared by every layer being unpacked: one per core, at least two
 * and at most four. More made no file sooner, only spent more CPU (in the kernel, where a thread
 * waiting for a lock whose holder runs spins: perf puts it in rwsem_spin_on_owner under file
 * creation, the lock of the directory the files go into). Figures: docs/architecture.md, "Figures
 * behind the defaults".
 */
export const WRITER_THREADS = writerThreadsFor(availableCores());

/**
 * {@link WRITER_THREADS} on `cores` cores: `asked` (Tuning.writerThreads, for measuring) when it is a
 * whole number from 1 to {@link MAX_WRITER_THREADS} (other values are ignored), else one per core, 2 to 4.
 * @example writerThreadsFor(1) // 2; writerThreadsFor(16) // 4; writerThreadsFor(16, 8) // 8
 */
export function writerThreadsFor(cores: number, asked?: number): number {
  if (asked !== undefined && Number.isInteger(asked) && asked >= 1 && asked <= MAX_WRITER_THREADS) return asked;
  return Math.min(4, Math.max(2, cores));
}

type Sink = object & { readonly __brand?: 'FileSink' };

/** The addon's calls behind {@link FileSink}. */
export interface NativeFiles {
  fileSinkCreate(threads: number): Sink;
  fileSinkAdd(
    sink: Sink,
    seq: number,
    path: Buffer,
    chunks: readonly Uint8Array[],
    mode: number,
    uid: number,
    gid: number,
    atimeSec: number,
    atimeNsec: number,
    mtimeSec: number,
    mtimeNsec: number,
  ): number;
  fileSinkWait(sink: Sink, below: number): Promise<number>;
  fileSinkCancel(sink: Sink): void;
  fileSinkError(sink: Sink): { seq: number; error: Error } | null;
  /** The writer threads' CPU on the sink's files so far (ns); absent from addons built before it. */
  fileSinkCpuNs?(sink: Sink): number;
}

let calls: NativeFiles | null | undefined;

function nativeFiles(): NativeFiles | undefined {
  if (calls === undefined) {
    try {
      const m = nativeFs() as unknown as Partial<NativeFiles>;
      calls = typeof m.fileSinkCreate === 'function' && typeof m.fileSinkAdd === 'function' && typeof m.fileSinkWait === 'function' ? (m as NativeFiles) : null;
    } catch {
      calls = null;
    }
  }
  return calls ?? undefined;
}

/** A file for the sink: its raw absolute path, its data, mode, owner (none: leave it) and times. */
export interface SinkFile {
  path: Buffer;
  chunks: readonly Uint8Array[];
  mode: number;
  owner: { uid: number; gid: number } | undefined;
  times: Times;
  /** What an error of this file is reported as: the entry's label and details (unpack/apply/report.ts). */
  label: string;
  details: Record<string, unknown>;
}

/** The small-file writers of one layer's extraction. */
export class FileSink {
  private seq = 0;
  /** Label and details of each file not known to be written, by sequence number. */
  private readonly entries = new Map<number, { label: string; details: Record<string, unknown> }>();

  private constructor(
    private readonly native: NativeFiles,
    private readonly sink: Sink,
  ) {}

  /**
   * A sink, or undefined where the addon lacks the writer threads (files are then written in line).
   * `asked`: the threads a pass's Tuning.writerThreads asks for (see {@link writerThreadsFor}).
   */
  static open(asked?: number): FileSink | undefined {
    const native = nativeFiles();
    const threads = asked === undefined ? WRITER_THREADS : writerThreadsFor(availableCores(), asked);
    return native === undefined ? undefined : new FileSink(native, native.fileSinkCreate(threads));
  }

  /** Whether this addon's writer threads count their CPU (see {@link cpuMs}). */
  static clocked(): boolean {
    return typeof nativeFiles()?.fileSinkCpuNs === 'function';
  }

  /**
   * Queues the file. The chunks are copied before this returns. Returns undefined while the sink
   * holds less than {@link SINK_MAX_PENDING} (no promise per file), else a promise that resolves
   * once it does again; the promise rejects with the error of a file that failed (as the writer's
   * own calls would: see unpack/apply/report.ts fsError).
   */
  add(f: SinkFile): Promise<void> | undefined {
    const seq = this.seq++;
    this.entries.set(seq, { label: f.label, details: f.details });
    const { uid, gid } = f.owner ?? { uid: -1, gid: -1 };
    const { atime, mtime } = f.times;
    const pending = this.native.fileSinkAdd(this.sink, seq, f.path, f.chunks, f.mode, uid, gid, atime.sec, atime.nsec, mtime.sec, mtime.nsec);
    if (pending < 0) return this.drain(); // an earlier file failed: report it
    // Only this file's bytes pending: every file before it is made. Unless one of them failed (its
    // error is kept until drain), their labels are not needed any more, and holding them until
    // the layer ends made a layer of 20,000 small files promote and scan them all (GC).
    if (this.entries.size > PRUNE_ENTRIES && pending === jobBytes(f.chunks) && this.native.fileSinkError(this.sink) === null) {
      const mine = this.entries.get(seq)!;
      this.entries.clear();
      this.entries.set(seq, mine);
    }
    // A failure after this add shows at the next add or drain; the wait is where one may have come.
    return pending > SINK_MAX_PENDING ? this.room() : undefined;
  }

  /** Resolves once the sink holds half its bound or less. */
  private async room(): Promise<void> {
    await this.native.fileSinkWait(this.sink, SINK_MAX_PENDING / 2);
    this.throwIfFailed();
  }

  /** Labels this sink holds for files not known to be made (they go once every file before the newest is made). */
  get labelsHeld(): number {
    return this.entries.size;
  }

  /** Resolves once every queued file is made; rejects with the first that failed. */
  async drain(): Promise<void> {
    if (this.entries.size === 0) return;
    await this.native.fileSinkWait(this.sink, 0);
    this.throwIfFailed();
    this.entries.clear();
  }

  /** Drops what no thread has started and waits for the rest: nothing writes below the layer after this. */
  async abandon(): Promise<void> {
    this.native.fileSinkCancel(this.sink);
    await this.native.fileSinkWait(this.sink, 0);
    this.entries.clear();
  }

  /**
   * CPU the writer threads spent making this sink's files, in ms, each on its own thread clock
   * (only the file's calls; files dropped after a failure cost nothing). Complete once drain() or
   * abandon() has resolved. Undefined where the addon predates the count.
   */
  get cpuMs(): number | undefined {
    const ns = this.native.fileSinkCpuNs?.(this.sink);
    return ns === undefined ? undefined : ns / 1e6;
  }

  private throwIfFailed(): void {
    const failed = this.native.fileSinkError(this.sink);
    if (failed === null) return;
    const entry = this.entries.get(failed.seq);
    throw fsError(failed.error, entry?.label ?? 'writing a file', entry?.details ?? {});
  }
}

/** What the addon counts as pending for one file: its bytes and one more. */
function jobBytes(chunks: readonly Uint8Array[]): number {
  let n = 1;
  for (const c of chunks) n += c.length;
  return n;
}
