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
import { Transform, type TransformCallback } from 'node:stream';
import { FastpullError } from '../../errors.js';
import { DecodeCursor } from './pargzip-cursor.js';
import { Guesses } from './pargzip-guesses.js';
import { CompressedInput } from './pargzip-input.js';
import { JobSlot, nativeInflate, WINDOW } from './pargzip-job.js';
import { MemberOutput, OUTPUT_PIECE } from './pargzip-output.js';
import { OutputBuffers } from './output-buffers.js';
import { ChunkPlan, type DecodeContext, type ParallelGunzipStats } from './pargzip-plan.js';
import { type InflatePool, sharedInflatePool, type SlotLease } from './pargzip-pool.js';
import type { GzipCheckpoint } from './ztoc.js';

export { InflatePool, sharedInflatePool, type SlotLease } from './pargzip-pool.js';
export { DEFAULT_INFLATE_SLOT_BYTES, InflateBudget, type InflateBudgetLimits } from './pargzip-budget.js';
export { knownTail, slideWindow } from './pargzip-output.js';
export type { ParallelGunzipStats } from './pargzip-plan.js';

/**
 * Compressed bytes per chunk, at most. A guess decodes its chunk only up to {@link JOB_CAP} symbols;
 * what a chunk inflates to past that is decoded by exact jobs the output waits for one after another
 * ({@link ParallelGunzipStats.exactBytes}), which no number of threads speeds up. 1 MiB covers
 * layers that inflate up to about 4x; larger chunks leave more of a layer to exact jobs, while a
 * chunk's search for a boundary costs about the same CPU whatever its size (docs/architecture.md,
 * "Figures behind the defaults"). On 2 cores a pull is bound by CPU; on many the serial part is what
 * bounds a layer.
 */
export const PARGZIP_CHUNK = 1024 * 1024;
/** Compressed bytes per chunk, at least. */
const MIN_CHUNK = 256 * 1024;

/** Bytes past a chunk's end a job gets, for the block that crosses it (at most; see overrun). */
const OVERRUN = 512 * 1024;
/** Most symbols one job writes before it stops (a continuation goes on from there). */
const JOB_CAP = 4 * 1024 * 1024;
/** Most symbols of a job that starts at a checkpoint (its span is known). */
const MAX_CHECKPOINT_JOB = 16 * 1024 * 1024;

/** Options of {@link createParallelGunzip}. */
export interface ParallelGunzipOptions {
  /** Decode threads; default the pool's. */
  pool?: InflatePool;
  /** Compressed bytes per chunk (at least 1 KiB); default: the stream's size split four ways per thread, 256 KiB to {@link PARGZIP_CHUNK}. */
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
  /** Called with each input chunk once no job will read it again (every chunk, once the stream ended well; not those held when it failed or was destroyed). */
  onInputDone?: (chunk: Uint8Array) => void;
  /**
   * Fill output buffers again once the reader released them ({@link ParallelGunzipStream.releaseOutput}),
   * instead of a fresh 256 KiB buffer per piece; default false. Only for a reader that releases what
   * it is done with, and never holds a view of output behind what it released.
   */
  reuseOutput?: boolean;
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
  /**
   * CPU milliseconds of this stream's decode jobs so far, each on the clock of the thread that ran it
   * (guesses that were dropped count too); undefined without the addon's thread clock.
   */
  readonly cpuMs: number | undefined;
  /**
   * With `reuseOutput`: the reader holds no byte of the output before offset `upTo` (counted from the
   * stream's first output byte) any more, nor a view of one, so every output buffer all of whose bytes
   * lie before it may be filled again. Offsets only count forward. Does nothing without `reuseOutput`.
   */
  releaseOutput(upTo: number): void;
  /** Output buffers allocated so far, and ones filled again instead (with `reuseOutput`). */
  readonly outputBuffers: { allocated: number; recycled: number };
}

class ParallelGunzip extends Transform implements ParallelGunzipStream {
  /** Counters, final once the stream has ended. */
  readonly stats: ParallelGunzipStats = {
    guessesUsed: 0,
    guessesDropped: 0,
    exactJobs: 0,
    exactBytes: 0,
    markedBytes: 0,
    eagerJobs: 0,
    eagerKnownWindow: 0,
    checkpointsUsed: 0,
    checkpointsDropped: 0,
  };
  private readonly pool: InflatePool;
  private readonly chunk: number;
  private cap: number;
  private readonly overrun: number;
  /** Checkpoints in order, past the start of the stream. */
  private readonly checkpoints: readonly GzipCheckpoint[];
  /** Input bytes of the slots this stream asks for: its largest chunk and the overrun. */
  private readonly slotInput: number;
  /** Jobs worth running ahead of the output: the pool's threads, as far as its budget's slots go. */
  private readonly ahead: number;
  /** Compressed bytes written and kept; waiting for some releases a held write. */
  private readonly input: CompressedInput;
  private heldWrite: TransformCallback | undefined;
  // Output flow control.
  private pullWaiter: (() => void) | undefined;
  private finished: Promise<void> | undefined;
  private failed: Error | undefined;
  private stopped = false;
  private readonly owner = {};
  /** The output's buffers (taken again once released, with `reuseOutput`). */
  private readonly outputs = new OutputBuffers(OUTPUT_PIECE);
  private readonly reuse: boolean;
  /** Output bytes pushed so far. */
  private pushed = 0;

  get outputBuffers(): { allocated: number; recycled: number } {
    return this.outputs.counts;
  }

  releaseOutput(upTo: number): void {
    if (this.reuse) this.outputs.release(upTo);
  }

  get cpuMs(): number | undefined {
    return this.pool.cpuMs(this.owner);
  }

  constructor(options: ParallelGunzipOptions) {
    super({ readableHighWaterMark: 1024 * 1024, writableHighWaterMark: 1024 * 1024 });
    this.input = new CompressedInput(() => this.releaseWrite(), options.onInputDone);
    this.reuse = options.reuseOutput ?? false;
    if (!nativeInflate()) throw new FastpullError('INTERNAL', 'parallel gunzip: the native decoder is not built (`pnpm --filter @fastpull/core build:native`)');
    this.pool = options.pool ?? sharedInflatePool();
    const threads = Math.max(1, this.pool.threads);
    const chunkSize = options.chunkSize;
    this.chunk =
      chunkSize !== undefined
        ? Math.max(1024, chunkSize)
        : options.size
          ? Math.min(PARGZIP_CHUNK, Math.max(MIN_CHUNK, Math.ceil(options.size / (threads * 4))))
          : PARGZIP_CHUNK;
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
    // One slot stays for the job the output waits for; each job ahead needs another.
    const slots = Math.floor(this.pool.budget.slotBytes / JobSlot.bytes(this.cap, this.slotInput));
    this.ahead = Math.max(1, Math.min(threads, this.pool.budget.maxRunning, slots - 1));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.input.append(chunk);
    this.finished ??= this.decode().then(
      () => undefined,
      (e: unknown) => {
        this.failed = e as Error;
        this.destroy(e as Error);
      },
    );
    // Hold the writer once enough is buffered, unless the decoder waits for more.
    if (this.input.buffered > this.bufferLimit() && !this.input.waiting) this.heldWrite = callback;
    else callback();
  }

  override _flush(callback: TransformCallback): void {
    this.input.end();
    this.finished ??= this.decode().then(
      () => undefined,
      (e: unknown) => {
        this.failed = e as Error;
      },
    );
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
    this.input.close();
    this.pullWaiter?.();
    this.releaseWrite();
    callback(error);
  }

  /**
   * Compressed bytes kept before the writer is held: the job the output waits for and the guesses
   * ahead of it, one chunk each, and the overrun. Twice as many chunks and two more held more memory
   * and were no faster (docs/architecture.md, "Figures behind the defaults").
   */
  private bufferLimit(): number {
    return (this.ahead + 1) * this.chunk + this.overrun;
  }

  private releaseWrite(): void {
    const cb = this.heldWrite;
    this.heldWrite = undefined;
    cb?.();
  }

  /** A slot for a job, holding a copy of input bytes [from, to); undefined when not `force`d and the budget has no room. */
  private copyInput(from: number, to: number, force: boolean): { data: Uint8Array; lease: SlotLease } | undefined {
    // Slots are asked for at the size of the largest chunk, so that one fits every job of the stream
    // and is reused, instead of a fresh (page-faulting) slot for each larger span.
    const want = Math.max(to - from, this.slotInput);
    const lease = force ? this.pool.takeSlot(this.owner, this.cap, want) : this.pool.tryTakeSlot(this.owner, this.cap, want);
    if (lease === undefined) return undefined;
    const out = lease.slot.input.subarray(0, to - from);
    if (this.input.copy(out, from, to) !== to - from) {
      this.pool.release(lease);
      throw new FastpullError('INTERNAL', `parallel gunzip: input bytes ${from}-${to} are no longer kept`);
    }
    return { data: out, lease };
  }

  /** Forgets input below `low`. */
  private release(low: number): void {
    this.input.forget(low);
    if (this.input.buffered <= this.bufferLimit()) this.releaseWrite();
  }

  /** Waits until the reader wants more. */
  private async pushOut(buf: Buffer): Promise<void> {
    if (this.stopped) return;
    if (!this.push(buf)) await new Promise<void>((resolve) => (this.pullWaiter = resolve));
  }

  /**
   * Decodes the stream: guesses run ahead on the pool's threads ({@link Guesses}); the cursor takes
   * jobs in stream order ({@link DecodeCursor}); their output is made plain and checked
   * ({@link MemberOutput}) and pushed, and input no job will read again is let go.
   */
  private async decode(): Promise<void> {
    const ctx: DecodeContext = {
      pool: this.pool,
      owner: this.owner,
      input: this.input,
      plan: new ChunkPlan(this.checkpoints, this.chunk),
      stats: this.stats,
      cap: this.cap,
      overrun: this.overrun,
      ahead: this.ahead,
      stopped: () => this.stopped,
      copyInput: (from, to) => this.copyInput(from, to, true)!,
      tryCopyInput: (from, to) => this.copyInput(from, to, false),
    };
    const guesses = new Guesses(ctx);
    const output = new MemberOutput(this.stats);
    const cursor = new DecodeCursor(ctx, guesses, output);
    const launching = guesses.run((e) => this.destroy(e));
    try {
      for (;;) {
        if (this.stopped) return;
        const job = await cursor.next();
        if (job === undefined) return;
        cursor.check(job.r);
        // Reusing: each piece in a buffer of OUTPUT_PIECE bytes taken from `outputs`, kept here in
        // the pieces' order; else one of the piece's own length.
        const taken: Buffer[] = [];
        const parts = output.take(
          job.r,
          this.reuse
            ? () => {
                const buf = this.outputs.take();
                taken.push(buf);
                return buf;
              }
            : undefined,
        );
        this.pool.release(job.r); // the slot goes to other jobs: nothing below reads the job's output
        for (let i = 0; i < parts.length; i++) {
          this.pushed += parts[i]!.length;
          // Every byte of the piece's buffer is pushed: it may be filled again once the reader is past them.
          if (this.reuse) this.outputs.retire(taken[i]!, this.pushed);
          await this.pushOut(parts[i]!);
        }
        if (!cursor.advance(job)) return;
        this.release(Math.min(cursor.byte, Math.floor(ctx.plan.bit(guesses.next) / 8)));
      }
    } finally {
      this.stopped = true;
      this.pool.drop(this.owner);
      guesses.wakeLauncher();
      this.input.close();
      this.outputs.clear();
      await launching;
      if (!this.destroyed && this.failed === undefined) this.input.clear();
    }
  }
}
