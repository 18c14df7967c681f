// Parallel gunzip: decodes one gzip stream on several threads, output identical to a serial decoder.
//
// Deflate is serial in two ways: a block's start is known only once the block before it is decoded,
// and a match may copy from the 32 KiB before it. The decoder here (after the two-stage scheme that
// pugz and rapidgzip published) cuts the compressed stream into chunks and, for each chunk but the
// first, searches from the chunk's first bit for something that looks like a block boundary (a
// dynamic block header that builds valid codes, a stored block's LEN/NLEN pair, a member header) and
// decodes from there on a worker thread while the window before it is still unknown: a byte copied
// from that window is written as a marker naming its place in it (native/fastpull_inflate.c). Each
// job decodes until the first boundary at or past the next chunk's start.
//
// The chunks are then taken in order. Chunk k's guess is used only when the decode before it, which
// started from a known state, stopped exactly there: deflate decoding is deterministic, so the guess
// then decoded the real stream, and its markers resolve against the 32 KiB just emitted. A guess that
// does not line up (a false boundary, a fixed-Huffman or last block the search skips, a block longer
// than the chunk) is dropped, and the span is decoded from the known state instead: serially, never
// wrongly. Every member's CRC-32 and length are checked, as zlib does, and the decoder accepts and
// refuses exactly what zlib does, so the output always equals node:zlib's.
import { availableParallelism } from 'node:os';
import { Transform, type TransformCallback } from 'node:stream';
import { Worker } from 'node:worker_threads';
import zlib from 'node:zlib';
import { FastpullError } from '../errors.js';
import { ERROR_TEXT, JobSlot, nativeInflate, runJob, St, Status, WINDOW, type JobInput, type JobResult, type JobStart, type WireJob, type WireResult } from './pargzip-job.js';
import type { FromInflateWorker, SlotRef, ToInflateWorker } from './pargzip-worker.js';
import { compiledWorker } from './pool.js';
import type { GzipCheckpoint } from './ztoc.js';

/** Compressed bytes per chunk, at most. */
export const PARGZIP_CHUNK = 4 * 1024 * 1024;
/** Compressed bytes per chunk, at least. */
const MIN_CHUNK = 256 * 1024;
/** Bytes past a chunk's end a job gets, for the block that crosses it (at most; see overrun). */
const OVERRUN = 512 * 1024;
/** Size of the output buffers the stream emits. */
const OUTPUT_PIECE = 256 * 1024;
/** Most symbols one job writes before it stops (a continuation goes on from there). */
const JOB_CAP = 4 * 1024 * 1024;
/** Most symbols of a job that starts at a checkpoint (its span is known). */
const MAX_CHECKPOINT_JOB = 16 * 1024 * 1024;

/** Options of {@link createParallelGunzip}. */
export interface ParallelGunzipOptions {
  /** Decode threads; default the pool's. */
  pool?: InflatePool;
  /** Compressed bytes per chunk (at least 1 KiB); default: the stream's size split four ways per thread, 256 KiB to 4 MiB. */
  chunkSize?: number;
  /** The stream's size when known (it sizes the chunks). */
  size?: number;
  /** Most symbols per job; for tests. */
  jobCap?: number;
  /**
   * Known places to start decoding (a SOCI zTOC's, see {@link parseZtoc}): chunks then begin at these
   * instead of at guessed block boundaries, with their windows, so no markers are needed. Each one is
   * checked when its turn comes (the bytes before it must be its window); one that does not fit is
   * decoded past serially, as a wrong guess is.
   */
  checkpoints?: readonly GzipCheckpoint[];
}

/** Counters of one parallel decode, for benchmarks and tests. */
export interface ParallelGunzipStats {
  /** Jobs whose guessed start was confirmed and used. */
  guessesUsed: number;
  /** Jobs whose guess was dropped (false boundary, no boundary, or no match). */
  guessesDropped: number;
  /** Jobs run from a known state (the first, continuations, and the spans after a dropped guess). */
  exactJobs: number;
  /** Output bytes that were written as 16-bit symbols (markers possible) and resolved afterwards. */
  markedBytes: number;
  /** Continuations of guesses launched before the output reached them. */
  eagerJobs: number;
  /** Of those, the ones that started with a known window (no markers): the guess's last 32 KiB were all bytes. */
  eagerKnownWindow: number;
  /** Chunks that started at a given checkpoint and were used (they count as guesses used too). */
  checkpointsUsed: number;
  /** Checkpoints whose window or place did not fit the stream. */
  checkpointsDropped: number;
}

/** A slot lent to a stream for one job (and its result, until released). */
export interface SlotLease {
  slot: JobSlot;
  lease: number;
}

interface QueuedJob {
  job: WireJob;
  lease: SlotLease;
  urgent: boolean;
  owner: object;
  resolve: (r: JobResult) => void;
  reject: (e: Error) => void;
}

/** Free slots kept per decode thread (beyond them a released slot is let go). */
const FREE_SLOTS_PER_THREAD = 4;

/**
 * Worker threads that run decode jobs, one at a time each, in order of priority: a job the output is
 * waiting for goes before speculative ones. Jobs read and write shared slots ({@link JobSlot}) that the
 * pool lends and takes back, so no buffer moves between threads.
 * @example
 * const pool = new InflatePool({ threads: 4 });
 * try {
 *   await pipeline(fs.createReadStream('layer.tar.gz'), createParallelGunzip({ pool }), fs.createWriteStream('layer.tar'));
 * } finally {
 *   await pool.close();
 * }
 */
export class InflatePool {
  /** Threads decoding at once. */
  readonly threads: number;
  private readonly script: string | undefined;
  private readonly idle: Worker[] = [];
  /** Each worker, with the slots whose buffer it already has. */
  private readonly all = new Map<Worker, Set<number>>();
  private readonly queue: QueuedJob[] = [];
  private busy = 0;
  private nextId = 1;
  private nextSlot = 1;
  private nextLease = 1;
  private readonly free: JobSlot[] = [];
  /** Lent slots: the lease, its owner, and whether a job runs in it now. */
  private readonly lent = new Map<JobSlot, { lease: number; owner: object; running: boolean; releaseWhenDone: boolean }>();

  /**
   * `threads` defaults to the machine's cores; 0 decodes on the calling thread (tests). INVALID_ARGUMENT
   * for a negative or fractional count.
   */
  constructor(options: { threads?: number } = {}) {
    this.threads = options.threads ?? availableParallelism();
    if (!Number.isInteger(this.threads) || this.threads < 0) throw new FastpullError('INVALID_ARGUMENT', `inflate threads ${options.threads}: want an integer >= 0`);
    this.script = this.threads === 0 ? undefined : compiledWorker('pargzip-worker.js');
  }

  /** Whether the native decoder is available (else {@link createParallelGunzip} cannot be used). */
  static available(): boolean {
    return nativeInflate() !== null;
  }

  /** Slots allocated and not let go (lent plus free); for tests. */
  get slotCount(): number {
    return this.lent.size + this.free.length;
  }

  /** Slots ever allocated; for tests. */
  get slotsCreated(): number {
    return this.nextSlot - 1;
  }

  /** Slots lent out now; for tests. */
  get slotsLent(): number {
    return this.lent.size;
  }

  /** Lends `owner` a slot for a job of at most `cap` symbols and `inputBytes` of input. */
  takeSlot(owner: object, cap: number, inputBytes: number): SlotLease {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const f = this.free[i]!;
      if (f.cap === cap && f.inputBytes >= inputBytes && (best < 0 || f.inputBytes < this.free[best]!.inputBytes)) best = i;
    }
    const slot = best >= 0 ? this.free.splice(best, 1)[0]! : new JobSlot(this.nextSlot++, cap, Math.ceil(Math.max(inputBytes, 1) / SLOT_INPUT_STEP) * SLOT_INPUT_STEP);
    const lease = this.nextLease++;
    this.lent.set(slot, { lease, owner, running: false, releaseWhenDone: false });
    return { slot, lease };
  }

  /** Takes a slot back (a job still running in it gives it back when done). Later calls for the same lease do nothing. */
  release(l: SlotLease): void {
    const info = this.lent.get(l.slot);
    if (!info || info.lease !== l.lease) return;
    if (info.running) {
      info.releaseWhenDone = true;
      return;
    }
    this.lent.delete(l.slot);
    this.free.push(l.slot);
    while (this.free.length > Math.max(1, this.threads) * FREE_SLOTS_PER_THREAD) {
      const gone = this.free.shift()!;
      for (const [w, known] of this.all) {
        if (known.delete(gone.id)) w.postMessage({ id: 0, forget: gone.id } satisfies ToInflateWorker);
      }
    }
  }

  /** Runs a job whose input the caller wrote into its slot; `urgent` ones go first. */
  run(job: JobInput, lease: SlotLease, urgent: boolean, owner: object): Promise<JobResult> {
    if (job.data.buffer !== lease.slot.buffer || job.data.byteOffset !== lease.slot.input.byteOffset) throw new FastpullError('INTERNAL', 'inflate job: its input is not in its slot');
    const { data, ...rest } = job;
    const wire: WireJob = { ...rest, dataLength: data.length };
    return new Promise((resolve, reject) => {
      const entry: QueuedJob = { job: wire, lease, urgent, owner, resolve, reject };
      if (!this.script) {
        this.setRunning(lease, true);
        setImmediate(() => {
          this.setRunning(lease, false);
          try {
            resolve(attach(runJob(wire, lease.slot), lease));
          } catch (e) {
            reject(e as Error);
          }
        });
        return;
      }
      if (urgent) {
        const i = this.queue.findIndex((q) => !q.urgent);
        this.queue.splice(i < 0 ? this.queue.length : i, 0, entry);
      } else {
        this.queue.push(entry);
      }
      this.pump();
    });
  }

  /** Drops the queued (not yet running) jobs of `owner`, whose promises never settle, and takes back all its slots. */
  drop(owner: object): void {
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.queue[i]!.owner === owner) this.queue.splice(i, 1);
    for (const [slot, info] of [...this.lent]) if (info.owner === owner) this.release({ slot, lease: info.lease });
  }

  private setRunning(l: SlotLease, running: boolean): void {
    const info = this.lent.get(l.slot);
    if (!info || info.lease !== l.lease) return;
    info.running = running;
    if (!running && info.releaseWhenDone) this.release(l);
  }

  private pump(): void {
    while (this.busy < this.threads && this.queue.length > 0) {
      const entry = this.queue.shift()!;
      const worker = this.idle.pop() ?? this.spawn();
      const known = this.all.get(worker)!;
      this.busy++;
      worker.ref();
      const id = this.nextId++;
      const finish = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        this.busy--;
      };
      const onMessage = (msg: FromInflateWorker) => {
        if (msg.id !== id) return;
        finish();
        worker.unref();
        this.idle.push(worker);
        this.setRunning(entry.lease, false);
        if (msg.ok) entry.resolve(attach(msg.result, entry.lease));
        else entry.reject(new FastpullError('INTERNAL', `inflate worker: ${msg.message}`));
        this.pump();
      };
      const onError = (e: Error) => {
        finish();
        this.all.delete(worker);
        this.setRunning(entry.lease, false);
        entry.reject(new FastpullError('INTERNAL', `inflate worker failed: ${e.message}`, { cause: e }));
        this.pump();
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      const slot = entry.lease.slot;
      const ref: SlotRef = { id: slot.id, cap: slot.cap, inputBytes: slot.inputBytes };
      if (!known.has(slot.id)) {
        ref.buffer = slot.buffer;
        known.add(slot.id);
      }
      this.setRunning(entry.lease, true);
      worker.postMessage({ id, job: entry.job, slot: ref } satisfies ToInflateWorker);
    }
  }

  private spawn(): Worker {
    const worker = new Worker(this.script!);
    this.all.set(worker, new Set());
    worker.on('exit', () => {
      this.all.delete(worker);
      const i = this.idle.indexOf(worker);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return worker;
  }

  /** Stops the threads. */
  async close(): Promise<void> {
    this.queue.length = 0;
    await Promise.all([...this.all.keys()].map((w) => w.terminate()));
  }
}

/** Slot inputs grow in steps of this many bytes. */
const SLOT_INPUT_STEP = 256 * 1024;

/** A result with its views on the slot. */
function attach(w: WireResult, lease: SlotLease): JobResult {
  const { n16, n8, ...rest } = w;
  return { ...rest, out16: lease.slot.out16.subarray(0, n16), out8: lease.slot.out8.subarray(WINDOW, WINDOW + n8), slot: lease.slot, lease: lease.lease };
}

let sharedPool: InflatePool | undefined;

/**
 * The thread's shared decode pool, one thread per core. Its idle threads do not keep the process alive.
 * @example
 * const gunzip = createParallelGunzip({ pool: sharedInflatePool() });
 */
export function sharedInflatePool(): InflatePool {
  sharedPool ??= new InflatePool();
  return sharedPool;
}

/**
 * A Transform that gunzips like zlib.createGunzip (multi-member streams, trailing zeros ignored, the
 * same errors refused) with its work spread over `options.pool`'s threads. The output is the same
 * bytes as node:zlib's; a corrupt stream fails with INVALID_LAYER. Throws INTERNAL when the native
 * decoder is not built ({@link InflatePool.available}).
 * @example
 * await pipeline(fs.createReadStream(blob), createParallelGunzip({ size: fs.statSync(blob).size }), tarExtractor);
 */
export function createParallelGunzip(options: ParallelGunzipOptions = {}): ParallelGunzipStream {
  return new ParallelGunzip(options);
}

/** The stream {@link createParallelGunzip} returns: a Transform with the decode's counters. */
export interface ParallelGunzipStream extends Transform {
  /** Counters, final once the stream has ended. */
  readonly stats: ParallelGunzipStats;
}

class ParallelGunzip extends Transform implements ParallelGunzipStream {
  /** Counters, final once the stream has ended. */
  readonly stats: ParallelGunzipStats = { guessesUsed: 0, guessesDropped: 0, exactJobs: 0, markedBytes: 0, eagerJobs: 0, eagerKnownWindow: 0, checkpointsUsed: 0, checkpointsDropped: 0 };
  private readonly pool: InflatePool;
  private readonly chunk: number;
  private cap: number;
  private readonly overrun: number;
  /** Checkpoints in order, past the start of the stream. */
  private readonly checkpoints: readonly GzipCheckpoint[];
  /** Input bytes of the slots this stream asks for: its largest chunk and the overrun. */
  private readonly slotInput: number;
  // Compressed bytes written and kept: pieces from byte `kept`.
  private readonly pieces: Buffer[] = [];
  private kept = 0;
  private written = 0;
  private ended = false;
  private heldWrite: TransformCallback | undefined;
  private readonly waiters: { end: number; resolve: () => void }[] = [];
  // Output flow control.
  private pullWaiter: (() => void) | undefined;
  private finished: Promise<void> | undefined;
  private failed: Error | undefined;
  private stopped = false;
  private readonly owner = {};

  constructor(options: ParallelGunzipOptions) {
    super({ readableHighWaterMark: 1024 * 1024, writableHighWaterMark: 1024 * 1024 });
    if (!nativeInflate()) throw new FastpullError('INTERNAL', 'parallel gunzip: the native decoder is not built (`pnpm --filter @fastpull/core build:native`)');
    this.pool = options.pool ?? sharedInflatePool();
    const threads = Math.max(1, this.pool.threads);
    this.chunk = options.chunkSize !== undefined ? Math.max(1024, options.chunkSize) : (options.size ? Math.min(PARGZIP_CHUNK, Math.max(MIN_CHUNK, Math.ceil(options.size / (threads * 4)))) : PARGZIP_CHUNK);
    this.cap = options.jobCap ?? JOB_CAP;
    // zlib's blocks span up to ~100 KiB of input; smaller chunks (tests) get a smaller margin, and a
    // job that still runs out asks for more (a Need continuation).
    this.overrun = Math.min(OVERRUN, Math.max(16 * 1024, this.chunk));
    const cps: GzipCheckpoint[] = [];
    for (const c of options.checkpoints ?? []) {
      const prev = cps.at(-1);
      if (!(Number.isSafeInteger(c.bit) && Number.isSafeInteger(c.out) && c.out > 0 && c.bit > 0)) continue;
      if (c.window.length !== Math.min(c.out, WINDOW)) continue;
      if (prev && (c.bit <= prev.bit || c.out <= prev.out)) continue;
      // Each window goes to a decode thread with its job, and a structured clone copies the whole
      // buffer under a view: keep windows in buffers of their own.
      const own = c.window.byteOffset === 0 && c.window.buffer.byteLength === c.window.length;
      cps.push(own ? c : { ...c, window: new Uint8Array(c.window) });
    }
    this.checkpoints = cps;
    let span = this.chunk;
    let outSpan = 0;
    for (let i = 1; i < cps.length; i++) {
      span = Math.max(span, Math.ceil((cps[i]!.bit - cps[i - 1]!.bit) / 8) + 1);
      outSpan = Math.max(outSpan, cps[i]!.out - cps[i - 1]!.out);
    }
    this.slotInput = Math.min(span, 64 * 1024 * 1024) + this.overrun;
    // A checkpoint's span (4 MiB of tar by soci's default, plus the block that crosses it) in one job,
    // not one job and a small continuation.
    if (options.jobCap === undefined && outSpan > 0) this.cap = Math.min(MAX_CHECKPOINT_JOB, Math.max(this.cap, Math.ceil(outSpan * 1.25) + 65536));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (chunk.length > 0) {
      this.pieces.push(chunk);
      this.written += chunk.length;
    }
    this.finished ??= this.decode().then(
      () => undefined,
      (e: unknown) => {
        this.failed = e as Error;
        this.destroy(e as Error);
      },
    );
    this.wake();
    // Hold the writer once enough is buffered, unless the decoder waits for more.
    if (this.written - this.kept > this.bufferLimit() && this.waiters.length === 0) this.heldWrite = callback;
    else callback();
  }

  override _flush(callback: TransformCallback): void {
    this.ended = true;
    this.finished ??= this.decode().then(
      () => undefined,
      (e: unknown) => {
        this.failed = e as Error;
      },
    );
    this.wake();
    void this.finished.then(() => callback(this.failed));
  }

  override _read(size: number): void {
    const w = this.pullWaiter;
    this.pullWaiter = undefined;
    w?.();
    super._read(size);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stopped = true;
    this.pool.drop(this.owner);
    for (const w of this.waiters.splice(0)) w.resolve();
    this.pullWaiter?.();
    this.releaseWrite();
    callback(error);
  }

  private bufferLimit(): number {
    return (Math.max(1, this.pool.threads) * 2 + 2) * this.chunk + this.overrun;
  }

  private releaseWrite(): void {
    const cb = this.heldWrite;
    this.heldWrite = undefined;
    cb?.();
  }

  private wake(): void {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (this.ended || this.written >= w.end) {
        this.waiters.splice(i, 1);
        w.resolve();
      }
    }
  }

  /** Resolves once bytes up to `end` were written, or the input ended. */
  private ready(end: number): Promise<void> {
    if (this.ended || this.written >= end || this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push({ end, resolve });
      this.releaseWrite();
    });
  }

  /** A slot for a job, holding a copy of input bytes [from, to). */
  private copyInput(from: number, to: number): { data: Uint8Array; lease: SlotLease } {
    const native = nativeInflate()!;
    // Slots are asked for at the size of the largest chunk, so that one fits every job of the stream
    // and is reused, instead of a fresh (page-faulting) slot for each larger span.
    const lease = this.pool.takeSlot(this.owner, this.cap, Math.max(to - from, this.slotInput));
    const out = lease.slot.input.subarray(0, to - from);
    let at = this.kept;
    let o = 0;
    for (const p of this.pieces) {
      const pEnd = at + p.length;
      if (pEnd > from && at < to) {
        const s = Math.max(from, at) - at;
        const e = Math.min(to, pEnd) - at;
        native.copyBytes(out, o, p, s, e - s);
        o += e - s;
      }
      at = pEnd;
      if (at >= to) break;
    }
    if (o !== to - from) {
      this.pool.release(lease);
      throw new FastpullError('INTERNAL', `parallel gunzip: input bytes ${from}-${to} are no longer kept`);
    }
    return { data: out, lease };
  }

  /** Forgets input below `low`. */
  private release(low: number): void {
    while (this.pieces.length > 0 && this.kept + this.pieces[0]!.length <= low) this.kept += this.pieces.shift()!.length;
    if (this.written - this.kept <= this.bufferLimit()) this.releaseWrite();
  }

  /** Waits until the reader wants more. */
  private async pushOut(buf: Buffer): Promise<void> {
    if (this.stopped) return;
    if (!this.push(buf)) await new Promise<void>((resolve) => (this.pullWaiter = resolve));
  }

  private async decode(): Promise<void> {
    const C = this.chunk;
    const pool = this.pool;
    const stats = this.stats;
    const specs = new Map<number, Promise<JobResult>>();
    // Continuations launched as soon as a guess stopped at its output cap or data end (before the
    // output reaches it), by exact start state and stop; the chunk they belong to drops them with it.
    const conts = new Map<string, { k: number; p: Promise<JobResult> }>();
    const eagerKnown = new WeakSet<Promise<JobResult>>();
    let nextSpec = 1;
    let specWake: (() => void) | undefined;
    const maxAhead = Math.max(1, pool.threads) * 2;
    const contKey = (st: JobStart, stop: number) => `${st.kind}:${st.bit}:${st.left}:${stop}`;
    const launchEager = (k: number, r: JobResult, stop: number) => {
      if (this.stopped || (r.status !== Status.Cap && r.status !== Status.Need)) return;
      if (specs.size + conts.size >= maxAhead + pool.threads) return;
      const from = Math.floor(r.end.bit / 8);
      const to = Math.min(this.written, Math.ceil(stop / 8) + this.overrun);
      if (from < this.kept || to <= from || (r.status === Status.Need && to <= from + 64 && !this.ended)) return;
      // The guess's own bytes give the window once they are all known (then no markers at all).
      const window = knownTail(r);
      const { data, lease } = this.copyInput(from, to);
      const job: JobInput = { ...r.end, data, dataOffset: from, final: this.ended && to === this.written, stopKey: stop, cap: this.cap, window };
      const p = pool.run(job, lease, false, this.owner);
      if (window) eagerKnown.add(p);
      p.then((next) => {
        if (conts.has(contKey(r.end, stop))) launchEager(k, next, stop);
      }, () => undefined);
      conts.set(contKey(r.end, stop), { k, p });
    };

    // Chunk k >= 1 starts at bit chunkBit(k): at the k-th checkpoint, or after the last one every C bytes.
    const cps = this.checkpoints;
    const lastCpByte = cps.length > 0 ? Math.floor(cps[cps.length - 1]!.bit / 8) : 0;
    const chunkBit = (k: number): number => (k <= cps.length ? cps[k - 1]!.bit : 8 * (lastCpByte + (k - cps.length) * C));
    const sameWindow = (cp: GzipCheckpoint, known: number): boolean => cp.out === memberOut && cp.window.length === known && Buffer.from(cp.window.buffer, cp.window.byteOffset, known).equals(Buffer.from(window.buffer, window.byteOffset + WINDOW - known, known));

    // Launches the speculative jobs, ahead of the output by at most maxAhead.
    const feeder = async () => {
      while (!this.stopped) {
        while (specs.size + conts.size >= maxAhead && !this.stopped) await new Promise<void>((r) => (specWake = r));
        const k = nextSpec;
        const startBit = chunkBit(k);
        const stop = chunkBit(k + 1);
        const start = Math.floor(startBit / 8);
        const want = Math.ceil(stop / 8) + this.overrun;
        await this.ready(want);
        if (this.stopped) return;
        if (this.ended && start >= this.written) return;
        const end = Math.min(this.written, want);
        const { data, lease } = this.copyInput(start, end);
        nextSpec++;
        const cp = k <= cps.length ? cps[k - 1]! : undefined;
        // At a checkpoint: decode from it with its window. Else: search for a boundary from the chunk's start.
        const from: JobStart = cp ? { kind: St.Block, bit: cp.bit, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 } : { kind: -1, bit: 8 * start, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 };
        const p = pool.run(
          { ...from, data, dataOffset: start, final: this.ended && end === this.written, stopKey: stop, cap: this.cap, window: cp ? cp.window : null },
          lease,
          false,
          this.owner,
        );
        p.then((r) => {
          if (specs.has(k) && r.status !== Status.NoStart && r.status !== Status.Error) launchEager(k, r, stop);
        }, () => undefined);
        specs.set(k, p);
        notifyLaunch();
      }
    };
    let launched: (() => void)[] = [];
    const notifyLaunch = () => {
      const ws = launched;
      launched = [];
      for (const w of ws) w();
    };
    /** Chunk k's speculative job, or undefined when there will be none. */
    const specFor = async (k: number): Promise<JobResult | undefined> => {
      for (;;) {
        const p = specs.get(k);
        if (p) return p;
        if (this.stopped || feederDone || nextSpec > k) return undefined;
        await new Promise<void>((r) => launched.push(r));
      }
    };
    const dropSpec = (k: number, keepConts = false) => {
      specs.delete(k);
      if (!keepConts) {
        for (const [key, c] of conts) {
          if (c.k !== k) continue;
          conts.delete(key);
          c.p.then((r) => pool.release(r), () => undefined);
        }
      }
      const w = specWake;
      specWake = undefined;
      w?.();
    };
    let feederDone = false;
    const feeding = feeder()
      .catch((e: unknown) => {
        this.destroy(e as Error);
      })
      .finally(() => {
        feederDone = true;
        notifyLaunch();
      });

    let cursor: JobStart = { kind: St.Member, bit: 0, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 };
    let cursorKey: number | undefined = 0;
    let k = 1;
    let stopKey = 8 * C;
    let growth = 0;
    let window: Uint8Array = new Uint8Array(WINDOW);
    let memberOut = 0;
    let crc = 0;
    const native = nativeInflate()!;
    try {
      for (;;) {
        if (this.stopped) return;
        let r: JobResult | undefined;
        let rStop = stopKey;
        if (cursorKey !== undefined) {
          stopKey = Infinity;
          for (;;) {
            // Run up to chunk k's start without waiting for its guess; once there, the guess decides.
            const kBit = chunkBit(k);
            if (cursorKey < kBit && !(this.ended && Math.floor(kBit / 8) >= this.written)) {
              stopKey = kBit;
              break;
            }
            const s = await specFor(k);
            if (s === undefined) break;
            const cp = k <= cps.length ? cps[k - 1]! : undefined;
            const fits = cp ? cursor.kind === St.Block && sameWindow(cp, Math.min(memberOut, WINDOW)) : matches(s, cursor);
            if (s.status !== Status.NoStart && s.status !== Status.Error && s.startKey === cursorKey && fits) {
              r = s;
              rStop = chunkBit(k + 1);
              stats.guessesUsed++;
              if (cp) stats.checkpointsUsed++;
              dropSpec(k++, true);
            } else if (s.status === Status.NoStart || s.status === Status.Error || s.startKey <= cursorKey) {
              // A false boundary, or the right place in a state the guess did not assume (a last block),
              // or a checkpoint that does not fit.
              stats.guessesDropped++;
              if (cp) stats.checkpointsDropped++;
              pool.release(s);
              dropSpec(k++);
              continue;
            } else {
              stopKey = s.startKey;
            }
            break;
          }
        }
        const eager: { k: number; p: Promise<JobResult> } | undefined = cursorKey === undefined ? conts.get(contKey(cursor, stopKey)) : undefined;
        if (!r && eager) {
          conts.delete(contKey(cursor, stopKey));
          const w = specWake;
          specWake = undefined;
          w?.();
          rStop = stopKey;
          stats.eagerJobs++;
          if (eagerKnown.delete(eager.p)) stats.eagerKnownWindow++;
          r = await eager.p;
        }
        if (!r) {
          const from = Math.floor(cursor.bit / 8);
          const want = Math.max(stopKey === Infinity ? Infinity : Math.ceil(stopKey / 8) + this.overrun, from + C * 2 ** growth);
          await this.ready(want);
          if (this.stopped) return;
          const end = Math.min(this.written, want);
          rStop = stopKey;
          stats.exactJobs++;
          // The window is known here (all output so far is resolved): the job writes plain bytes.
          const known = Math.min(memberOut, WINDOW);
          const { data, lease } = this.copyInput(from, end);
          r = await pool.run(
            { ...cursor, data, dataOffset: from, final: this.ended && end === this.written, stopKey, cap: this.cap, window: window.slice(WINDOW - known) },
            lease,
            true,
            this.owner,
          );
          const progressed = r.out16.length + r.out8.length > 0 || r.end.bit !== cursor.bit || r.end.kind !== cursor.kind;
          if (r.status === Status.Need && !progressed) {
            if (this.ended && end === this.written) throw corrupt('unexpected end of file', cursor.bit);
            growth++;
          } else {
            growth = 0;
          }
        }
        if (r.status === Status.Error) throw corrupt(ERROR_TEXT[r.error] ?? `error ${r.error}`, r.end.bit);
        const stuck = r.out16.length + r.out8.length === 0 && r.end.kind === cursor.kind && r.end.bit === cursor.bit;
        if ((r.status === Status.Stop && r.key === cursorKey && stuck) || (r.status === Status.Cap && stuck)) {
          throw new FastpullError('INTERNAL', `parallel gunzip: no progress at compressed bit ${cursor.bit}`);
        }

        // Resolve the markers against the window and check members.
        const parts: Buffer[] = [];
        const n16 = r.out16.length;
        if (n16 > 0) {
          stats.markedBytes += n16;
          const b = Buffer.allocUnsafe(n16);
          const bad = native.resolveMarkers(r.out16, n16, window, WINDOW - Math.min(memberOut, WINDOW), b);
          if (bad >= 0) throw corrupt('invalid distance too far back', r.startKey);
          parts.push(b);
        }
        // Copied out in 256 KiB buffers (as zlib's output comes) so the job's buffers can be used again.
        for (let at = 0; at < r.out8.length; at += OUTPUT_PIECE) {
          const piece = Buffer.allocUnsafe(Math.min(OUTPUT_PIECE, r.out8.length - at));
          native.copyBytes(piece, 0, r.out8, at, piece.length);
          parts.push(piece);
        }
        const total = n16 + r.out8.length;
        // The decode threads computed the CRC of the byte part per member segment; combine them.
        if (n16 > 0) {
          crc = zlib.crc32(parts[0]!, crc);
          memberOut += n16;
        }
        let segStart = n16;
        for (let m = 0; m < r.members.length; m += 3) {
          const endAt = r.members[m]!;
          crc = native.crc32Combine(crc, r.crcs[m / 3]!, endAt - segStart);
          memberOut += endAt - segStart;
          if (crc !== r.members[m + 1]) throw corrupt('incorrect data check', r.end.bit);
          if (memberOut % 2 ** 32 !== r.members[m + 2]) throw corrupt('incorrect length check', r.end.bit);
          crc = 0;
          memberOut = 0;
          segStart = endAt;
        }
        crc = native.crc32Combine(crc, r.crcs[r.members.length / 3]!, total - segStart);
        memberOut += total - segStart;
        window = slideWindow(window, parts);
        pool.release(r); // the slot goes to other jobs: nothing below reads r.out16 or r.out8
        for (const p of parts) await this.pushOut(p);

        switch (r.status) {
          case Status.End:
            return;
          case Status.Stop:
            cursor = { kind: r.end.kind, bit: r.end.bit, btype: r.end.btype, bfinal: r.end.bfinal, left: 0, hdr: null, hdrBit: 0 };
            cursorKey = r.key;
            stopKey = rStop;
            break;
          default:
            // Cap or Need: go on from the exact state, towards the same stop.
            cursor = r.end;
            cursorKey = undefined;
            stopKey = rStop;
        }
        this.release(Math.min(Math.floor(cursor.bit / 8), Math.floor(chunkBit(nextSpec) / 8)));
      }
    } finally {
      this.stopped = true;
      pool.drop(this.owner);
      const w = specWake;
      specWake = undefined;
      w?.();
      for (const wt of this.waiters.splice(0)) wt.resolve();
      await feeding;
      if (!this.destroyed && this.failed === undefined) this.pieces.length = 0;
    }
  }
}

/** Whether a search's start is the boundary the cursor stands on. */
function matches(s: JobResult, cursor: JobStart): boolean {
  if (s.startKind === St.Member) return cursor.kind === St.Member;
  if (cursor.kind !== St.Block || cursor.bfinal !== 0) return false;
  return s.startKind === St.Stored ? cursor.btype === 0 : cursor.btype === 2;
}

function corrupt(reason: string, bit: number): FastpullError {
  return new FastpullError('INVALID_LAYER', `corrupt gzip stream: ${reason} (near compressed byte ${Math.floor(bit / 8)})`, {
    details: { compressedOffset: Math.floor(bit / 8) },
  });
}

/**
 * The last 32 KiB of a job's output (less where its current member began later), when every one of those
 * bytes is known without the window before the job: after a member start, or once its byte part began
 * (the decoder writes bytes only after 32 KiB of symbols without a marker). Else null.
 */
export function knownTail(r: Pick<JobResult, 'out16' | 'out8' | 'members'>): Uint8Array | null {
  const n16 = r.out16.length;
  const n8 = r.out8.length;
  if (r.members.length > 0) {
    // The last member ended in this job: its successor's bytes are all in the byte part.
    const start = r.members[r.members.length - 3]! - n16;
    return r.out8.slice(Math.max(start, n8 - WINDOW));
  }
  if (n8 >= WINDOW) return r.out8.slice(n8 - WINDOW);
  if (n8 === 0 || n16 < WINDOW - n8) return null;
  const tail = new Uint8Array(WINDOW);
  const from = n16 - (WINDOW - n8);
  for (let i = from; i < n16; i++) {
    const v = r.out16[i]!;
    if (v > 255) return null;
    tail[i - from] = v;
  }
  tail.set(r.out8, WINDOW - n8);
  return tail;
}

/** The last 32 KiB of `window` followed by `parts`. */
export function slideWindow(window: Uint8Array, parts: readonly Buffer[]): Uint8Array {
  const next = new Uint8Array(WINDOW);
  let fill = WINDOW;
  for (let i = parts.length - 1; i >= 0 && fill > 0; i--) {
    const p = parts[i]!;
    const take = Math.min(fill, p.length);
    next.set(p.subarray(p.length - take), fill - take);
    fill -= take;
  }
  if (fill > 0) next.set(window.subarray(WINDOW - fill), 0);
  return next;
}
