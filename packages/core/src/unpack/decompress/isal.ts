// gunzip in process through ISA-L (native/fastpull_isal.c, linked against the system's libisal): a stream stage like node:zlib's, with ISA-L's faster decoder.
import { Transform, type TransformCallback } from 'node:stream';
import { FastpullError } from '../../errors.js';
import {
  ERRORS,
  isalUnavailableReason,
  loadIsal,
  MAX_RECORDS,
  PH_BETWEEN,
  PH_PADDING,
  R_CONSUMED,
  R_ERROR,
  R_MEMBERS,
  R_PHASE,
  R_PRODUCED,
  REC_CONSUMED,
  REC_DONE,
  REC_END,
  REC_ERROR,
  REC_MEMBERS,
  REC_PHASE,
  REC_PRODUCED,
  RECORD,
  type IsalAddon,
  type IsalHandle,
} from './isal-addon.js';
import { OutputBuffers } from './output-buffers.js';

export { isalAvailable, isalUnavailableReason } from './isal-addon.js';

/**
 * Size of each output buffer. Each buffer is a push through the streams (and was, before the decode
 * thread streamed, a hop to it and back): at 1 MiB a GiB takes 1,024 of each instead of 4,096 at
 * 256 KiB, which cut the stage's CPU per GiB of incompressible data by about a quarter
 * (bench:decoders, bench/README.md).
 */
export const ISAL_CHUNK_SIZE = 1024 * 1024;

/**
 * Decoded bytes the stage holds before it stops decoding until its reader takes some: two output
 * buffers, so that the next one is decoded on the decode thread while the reader works on this one.
 */
const READ_AHEAD = 2 * ISAL_CHUNK_SIZE;

/** Below this much room left in the current output buffer, the next call gets a fresh one. */
const MIN_ROOM = 32 * 1024;

const EMPTY = new Uint8Array(0);

/** Options of {@link createIsalGunzip}. */
export interface IsalGunzipOptions {
  /** Decode on this thread instead of the stage's own decode thread; default false. */
  sync?: boolean;
  /** Size of each output buffer; default {@link ISAL_CHUNK_SIZE}. */
  chunkSize?: number;
  /**
   * Called with each input chunk once the decoder used all of it: it reads the chunk no more.
   * Not called for a chunk it stopped in (an error, or the stream destroyed).
   */
  onInputDone?: (chunk: Uint8Array) => void;
  /**
   * Fill output buffers again once the reader said it is done with them
   * ({@link IsalGunzipStream.releaseOutput}), instead of a fresh buffer each; default false. Only
   * the stage's own decode thread (not `sync`) reuses them.
   */
  reuseOutput?: boolean;
}

/**
 * A Transform that gunzips through ISA-L in this process. It takes what node:zlib's createGunzip
 * takes, with the same outcome: concatenated members (empty ones too), and after a member either
 * another member, the end, or a zero byte after which the rest is ignored (padding; node:zlib does
 * the same when the rest arrives in the same write). Every member's CRC-32 and ISIZE are checked.
 * Corrupt or truncated input destroys the stage with INVALID_LAYER ("corrupt gzip stream: isal: ...").
 *
 * Decoding runs on the stage's own decode thread (unless `sync`), which goes from one queued span to
 * the next without waiting for the thread that reads the output: that thread goes on with what came
 * before meanwhile. Memory is bounded: two input chunks and two output buffers of `chunkSize` at a
 * time, and no new output buffer while about 2 MiB of output waits for the reader. Output comes in
 * whole buffers of `chunkSize` (the last one shorter) on the decode thread; `sync` pushes what each
 * call decoded.
 * INVALID_ARGUMENT when the addon is not available ({@link isalAvailable}).
 * @example
 * await pipeline(fs.createReadStream('layer.tar.gz'), createIsalGunzip(), fs.createWriteStream('layer.tar'));
 */
export function createIsalGunzip(options: IsalGunzipOptions = {}): IsalGunzipStream {
  const a = loadIsal();
  if (a === undefined) {
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `inflater isal was asked for but the in-process ISA-L inflater is not available: ${isalUnavailableReason()}; use auto or zlib instead`,
      {
        details: { inflater: 'isal' },
      },
    );
  }
  return new IsalGunzip(a, options);
}

/** The stream {@link createIsalGunzip} returns: a Transform that knows the CPU its decoding took. */
export interface IsalGunzipStream extends Transform {
  /**
   * CPU milliseconds of the decoding so far, on the clock of the thread that ran it (the stage's decode
   * thread, or the reading thread's time in the calls when `sync`); final once the stream has ended or
   * was destroyed. Undefined where the addon predates the clock.
   */
  readonly cpuMs: number | undefined;
  /**
   * With `reuseOutput`: the reader holds no byte of the output before offset `upTo` (counted from
   * the stream's first output byte) any more, nor any view of one: every output buffer all of whose
   * bytes lie before it may be filled again. A buffer given back while something still reads it
   * would change those bytes under the reader. Offsets only count forward; a smaller one changes
   * nothing. Does nothing without `reuseOutput`.
   */
  releaseOutput(upTo: number): void;
  /** Output buffers allocated so far, and ones filled again instead (with `reuseOutput`). */
  readonly outputBuffers: { allocated: number; recycled: number };
}

/** An output span queued to the decode thread: `read` bytes of it were pushed so far. */
interface OutSpan {
  buf: Buffer;
  read: number;
}

/**
 * Input chunks the decode thread holds before the stage takes no more until the oldest is used up:
 * the next one is there when the decode thread finishes one, without a round trip.
 */
const INPUT_CHUNKS = 2;

/** Output spans queued to the decode thread at once (while the reader keeps up). */
const OUTPUT_SPANS = 2;

class IsalGunzip extends Transform implements IsalGunzipStream {
  private readonly result = new Int32Array(5);
  private readonly z: IsalHandle;
  private readonly chunkSize: number;
  private readonly sync: boolean;
  private readonly reuse: boolean;
  private readonly onInputDone: ((chunk: Uint8Array) => void) | undefined;
  private compressedBytes = 0;
  /** Output bytes pushed so far: the offset of the next one. */
  private produced = 0;
  private members = 0;
  private phase = 0;
  /** Whether decoding waits for the reader (the stage holds READ_AHEAD bytes). */
  private waiting = false;

  // On this thread (`sync`): the chunk being decoded, how far, and the callback that releases it.
  private input: Uint8Array = EMPTY;
  private inOffset = 0;
  private pending: TransformCallback | undefined;
  private out: Buffer | undefined;
  private outOffset = 0;

  // On the decode thread: the input chunks it holds (oldest first) and how much of the oldest it used,
  // the callback of the chunk that waits for room, the output spans it fills, and _flush's callback.
  private readonly queued: Uint8Array[] = [];
  private usedOfOldest = 0;
  private held: TransformCallback | undefined;
  private readonly spans: OutSpan[] = [];
  private flushed: TransformCallback | undefined;

  /** Output spans: filled again once released (with `reuse`), else each one new. */
  private readonly outputs: OutputBuffers;
  private readonly records = new Float64Array(MAX_RECORDS * RECORD);
  /** Whether the decode thread was closed (a notification queued before may still come). */
  private threadClosed = false;

  constructor(
    private readonly addon: IsalAddon,
    options: IsalGunzipOptions,
  ) {
    super({ readableHighWaterMark: READ_AHEAD });
    this.chunkSize = options.chunkSize ?? ISAL_CHUNK_SIZE;
    this.sync = options.sync ?? false;
    this.reuse = (options.reuseOutput ?? false) && !this.sync;
    this.outputs = new OutputBuffers(this.chunkSize);
    this.onInputDone = options.onInputDone;
    this.z = this.sync ? addon.create(this.result) : addon.create(this.result, () => this.collect());
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.sync) {
      this.input = chunk;
      this.inOffset = 0;
      this.pending = callback;
      this.step();
      return;
    }
    if (chunk.length === 0) {
      callback();
      return;
    }
    try {
      this.addon.input(this.z, chunk, 0, chunk.length);
    } catch (e) {
      callback(this.internal(e));
      return;
    }
    this.queued.push(chunk);
    this.feed();
    if (this.queued.length < INPUT_CHUNKS) callback();
    else this.held = callback;
  }

  override _flush(callback: TransformCallback): void {
    if (this.sync) {
      this.addon.close(this.z);
      callback(this.endError());
      return;
    }
    // The decode thread may still hold input: the end is known once it has decoded everything.
    this.flushed = callback;
    try {
      this.addon.end(this.z);
    } catch (e) {
      this.flushed = undefined;
      callback(this.internal(e));
      return;
    }
    this.feed();
  }

  override _read(size: number): void {
    if (this.waiting) {
      this.waiting = false;
      if (this.sync) this.step();
      else this.feed();
    }
    super._read(size);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // Returns once the decode thread is gone: nothing writes into the spans after it.
    this.close();
    this.queued.length = 0;
    this.spans.length = 0;
    this.outputs.clear();
    this.held = undefined;
    this.flushed = undefined;
    callback(error);
  }

  get cpuMs(): number | undefined {
    return this.addon.cpuNs ? this.addon.cpuNs(this.z) / 1e6 : undefined;
  }

  get outputBuffers(): { allocated: number; recycled: number } {
    return this.outputs.counts;
  }

  releaseOutput(upTo: number): void {
    if (this.reuse) this.outputs.release(upTo);
  }

  private close(): void {
    this.threadClosed = true;
    this.addon.close(this.z);
  }

  /** Queues output spans to the decode thread while the reader keeps up. */
  private feed(): void {
    while (!this.threadClosed && !this.destroyed && !this.waiting && this.spans.length < OUTPUT_SPANS) {
      const buf = this.outputs.take();
      try {
        this.addon.output(this.z, buf, 0, buf.length);
      } catch (e) {
        this.destroy(this.internal(e));
        return;
      }
      this.spans.push({ buf, read: 0 });
    }
  }

  /** Takes the decode thread's records: pushes what it decoded, releases the input it used up. */
  private collect(): void {
    const r = this.records;
    for (;;) {
      if (this.threadClosed || this.destroyed) return;
      const n = this.addon.take(this.z, r);
      for (let i = 0; i < n; i++) {
        if (this.destroyed) return;
        const at = i * RECORD;
        const consumed = r[at + REC_CONSUMED]!;
        this.compressedBytes += consumed;
        this.phase = r[at + REC_PHASE]!;
        this.members = r[at + REC_MEMBERS]!;
        const produced = r[at + REC_PRODUCED]!;
        if (produced > 0) {
          const span = this.spans[0]!;
          this.produced += produced;
          if (!this.push(span.buf.subarray(span.read, span.read + produced))) this.waiting = true;
          span.read += produced;
        }
        if (r[at + REC_DONE] === 1) {
          const span = this.spans.shift()!;
          // Every byte it got is pushed: it may be filled again once the reader is past them.
          if (this.reuse) this.outputs.retire(span.buf, this.produced);
        }
        if (consumed > 0) this.used(consumed);
        const error = r[at + REC_ERROR]!;
        if (error !== 0) {
          this.destroy(this.corrupt(ERRORS[error] ?? `ISA-L error ${error}`, error));
          return;
        }
        if (r[at + REC_END] === 1) {
          const callback = this.flushed;
          this.flushed = undefined;
          this.close(); // everything is decoded: the decode thread can go now
          callback?.(this.endError());
          return;
        }
      }
      if (n < MAX_RECORDS) break;
    }
    this.feed();
  }

  /** The decode thread used up `n` more input bytes: lets go of the chunks it finished, and takes the next. */
  private used(n: number): void {
    this.usedOfOldest += n;
    while (this.queued.length > 0 && this.usedOfOldest >= this.queued[0]!.length) {
      const chunk = this.queued.shift()!;
      this.usedOfOldest -= chunk.length;
      this.onInputDone?.(chunk);
    }
    if (this.held && this.queued.length < INPUT_CHUNKS) {
      const callback = this.held;
      this.held = undefined;
      callback();
    }
  }

  /** Runs decode calls on this thread until the chunk is used up or the reader must catch up. */
  private step(): void {
    for (;;) {
      if (this.destroyed) return;
      if (this.out === undefined || this.out.length - this.outOffset < MIN_ROOM) {
        this.out = this.outputs.take();
        this.outOffset = 0;
      }
      this.addon.inflateSync(this.z, this.input, this.inOffset, this.input.length - this.inOffset, this.out, this.outOffset, this.out.length - this.outOffset);
      if (!this.after()) return;
    }
  }

  /** Takes one call's result; true when the next call should follow at once. */
  private after(): boolean {
    if (this.destroyed) return false;
    const r = this.result;
    const room = this.out!.length - this.outOffset;
    this.inOffset += r[R_CONSUMED]!;
    this.compressedBytes += r[R_CONSUMED]!;
    this.phase = r[R_PHASE]!;
    this.members = r[R_MEMBERS]!;
    const produced = r[R_PRODUCED]!;
    let more = true;
    if (produced > 0) {
      more = this.push(this.out!.subarray(this.outOffset, this.outOffset + produced));
      this.outOffset += produced;
    }
    const error = r[R_ERROR]!;
    if (error !== 0) {
      this.release(this.corrupt(ERRORS[error] ?? `ISA-L error ${error}`, error));
      return false;
    }
    // A full output buffer may leave decoded bytes inside the decoder: call again even without input.
    if (this.inOffset < this.input.length || produced === room) {
      if (more) return true;
      this.waiting = true;
      return false;
    }
    this.release();
    return false;
  }

  private release(error?: Error): void {
    const callback = this.pending;
    this.pending = undefined;
    if (!error && this.input !== EMPTY) this.onInputDone?.(this.input);
    this.input = EMPTY;
    callback?.(error);
  }

  /** At the end of the input: undefined after a whole member (or padding), else what is missing. */
  private endError(): FastpullError | undefined {
    return this.phase === PH_BETWEEN || this.phase === PH_PADDING ? undefined : this.corrupt('unexpected end of file');
  }

  private internal(e: unknown): FastpullError {
    return new FastpullError('INTERNAL', `inflating with isal: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }

  private corrupt(what: string, isalError?: number): FastpullError {
    return new FastpullError('INVALID_LAYER', `corrupt gzip stream: isal: ${what}`, {
      details: { inflater: 'isal', compressedBytes: this.compressedBytes, members: this.members, ...(isalError !== undefined ? { isalError } : {}) },
    });
  }
}
