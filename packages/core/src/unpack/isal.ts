// gunzip in process through ISA-L (native/fastpull_isal.c, linked against the system's libisal): a stream stage like node:zlib's, with ISA-L's faster decoder.
import { createRequire } from 'node:module';
import { Transform, type TransformCallback } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { FastpullError } from '../errors.js';

/** An inflater in the addon: opaque, one gzip stream from its start. */
interface IsalHandle {
  readonly __isalHandle: never;
}

/** The addon built from `native/fastpull_isal.c`. Every call fills in the Int32Array given to create(). */
interface IsalAddon {
  create(result: Int32Array): IsalHandle;
  /** Decodes on the inflater's own thread (started by the first call); `done(true)` once the result is filled in (false: never ran). */
  inflate(z: IsalHandle, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number, done: (ran: boolean) => void): void;
  /** The same on this thread. */
  inflateSync(z: IsalHandle, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void;
  /** Ends the inflater's thread (after the call under way); a later inflate starts another. */
  close(z: IsalHandle): void;
  /**
   * CPU nanoseconds of the decoding so far, on the clock of the thread that ran it: the decode
   * thread's (wake-ups included), plus the time of sync calls. Absent in a build from an older source.
   */
  cpuNs?(z: IsalHandle): number;
}

// The addon's result slots and phases (fastpull_isal.c).
const R_ERROR = 0;
const R_CONSUMED = 1;
const R_PRODUCED = 2;
const R_PHASE = 3;
const R_MEMBERS = 4;
const PH_BETWEEN = 2;
const PH_PADDING = 3;

/** What each error of the addon means, in zlib's words where zlib has one. */
const ERRORS: Readonly<Record<number, string>> = {
  [-1]: 'invalid deflate block',
  [-2]: 'invalid code in deflate data',
  [-3]: 'invalid distance too far back',
  [-4]: 'incorrect header check',
  [-5]: 'unknown compression method',
  [-6]: 'incorrect data check (CRC-32 or length of a member)',
  [-100]: 'unknown header flags set',
};

/**
 * Output buffer of one decode call. Each call is a hop to the decode thread and back, and each buffer a
 * push through the streams: at 1 MiB a GiB takes 1,024 of each instead of 4,096 at 256 KiB, which
 * cut the stage's CPU per GiB of incompressible data by about a quarter (bench:decoders, bench/README.md).
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

// src/unpack/ and dist/unpack/ are both two levels below the package root, so one relative path serves both.
const ADDON_URL = new URL('../../native/build/Release/fastpull_isal.node', import.meta.url);

let addon: IsalAddon | null | undefined;
let why: string | undefined;

function load(): IsalAddon | undefined {
  if (addon !== undefined) return addon ?? undefined;
  const file = fileURLToPath(ADDON_URL);
  try {
    const m = createRequire(import.meta.url)(file) as Partial<IsalAddon> | null;
    if (typeof m?.create === 'function' && typeof m.inflate === 'function' && typeof m.inflateSync === 'function' && typeof m.close === 'function') return (addon = m as IsalAddon);
    why = `${file} lacks create, inflate, inflateSync or close (a build from an older source)`;
  } catch (e) {
    const notBuilt = (e as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND';
    why = notBuilt
      ? `${file} was not built: libisal was not found when the native addon was built (Debian/Ubuntu package libisal-dev, then \`npm rebuild @fastpull/core\`)`
      : `cannot load ${file}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
  }
  addon = null;
  return undefined;
}

/** Whether the in-process ISA-L inflater can run here (its addon was built against libisal and loads). */
export function isalAvailable(): boolean {
  return load() !== undefined;
}

/** Why the in-process ISA-L inflater cannot run here, or undefined when it can. */
export function isalUnavailableReason(): string | undefined {
  load();
  return why;
}

/**
 * Benchmark-only: FASTPULL_ISAL_THREAD=reader makes the default decode on the reading thread instead
 * of the stage's own decode thread (bench/README.md compares the two).
 */
const DEFAULT_SYNC = process.env.FASTPULL_ISAL_THREAD === 'reader';

/** Options of {@link createIsalGunzip}. */
export interface IsalGunzipOptions {
  /** Decode on this thread instead of the stage's own decode thread; default false. */
  sync?: boolean;
  /** Size of each output buffer; default {@link ISAL_CHUNK_SIZE}. */
  chunkSize?: number;
}

/**
 * A Transform that gunzips through ISA-L in this process. It takes what node:zlib's createGunzip
 * takes, with the same outcome: concatenated members (empty ones too), and after a member either
 * another member, the end, or a zero byte after which the rest is ignored (padding; node:zlib does
 * the same when the rest arrives in the same write). Every member's CRC-32 and ISIZE are checked.
 * Corrupt or truncated input destroys the stage with INVALID_LAYER ("corrupt gzip stream: isal: ...").
 *
 * Each decode call runs on the stage's own decode thread (unless `sync`), so the thread that reads
 * the output goes on with the previous chunk meanwhile. Memory is bounded: one input chunk is decoded in output
 * steps of `chunkSize`, and decoding stops while more than about 2 MiB of output waits for the reader.
 * INVALID_ARGUMENT when the addon is not available ({@link isalAvailable}).
 * @example
 * await pipeline(fs.createReadStream('layer.tar.gz'), createIsalGunzip(), fs.createWriteStream('layer.tar'));
 */
export function createIsalGunzip(options: IsalGunzipOptions = {}): IsalGunzipStream {
  const a = load();
  if (a === undefined) {
    throw new FastpullError('INVALID_ARGUMENT', `inflater isal was asked for but the in-process ISA-L inflater is not available: ${why}; use auto or zlib instead`, {
      details: { inflater: 'isal' },
    });
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
}

class IsalGunzip extends Transform implements IsalGunzipStream {
  private readonly result = new Int32Array(5);
  private readonly z: IsalHandle;
  private readonly chunkSize: number;
  private readonly sync: boolean;
  /** The chunk being decoded, how far, and the callback that releases it. */
  private input: Uint8Array = EMPTY;
  private inOffset = 0;
  private pending: TransformCallback | undefined;
  private out: Buffer | undefined;
  private outOffset = 0;
  /** Whether decoding waits for the reader (the stage holds READ_AHEAD bytes). */
  private waiting = false;
  /** Whether a call runs on the decode thread; then `idle` runs when it ends. */
  private busy = false;
  private idle: (() => void) | undefined;
  private compressedBytes = 0;
  private phase = 0;

  constructor(
    private readonly addon: IsalAddon,
    options: IsalGunzipOptions,
  ) {
    super({ readableHighWaterMark: READ_AHEAD });
    this.chunkSize = options.chunkSize ?? ISAL_CHUNK_SIZE;
    this.sync = options.sync ?? DEFAULT_SYNC;
    this.z = addon.create(this.result);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.input = chunk;
    this.inOffset = 0;
    this.pending = callback;
    this.step();
  }

  override _flush(callback: TransformCallback): void {
    this.addon.close(this.z); // nothing more to decode: the decode thread can go now
    if (this.phase === PH_BETWEEN || this.phase === PH_PADDING) callback();
    else callback(this.corrupt('unexpected end of file'));
  }

  override _read(size: number): void {
    if (this.waiting) {
      this.waiting = false;
      this.step();
    }
    super._read(size);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A call on the decode thread still writes into the buffers: finish only after it has returned.
    const finish = () => {
      this.addon.close(this.z);
      callback(error);
    };
    if (this.busy) this.idle = finish;
    else finish();
  }

  /** Runs decode calls until the chunk is used up, the reader must catch up, or a call is under way on the decode thread. */
  private step(): void {
    for (;;) {
      if (this.destroyed) return;
      if (this.out === undefined || this.out.length - this.outOffset < MIN_ROOM) {
        this.out = Buffer.allocUnsafe(this.chunkSize);
        this.outOffset = 0;
      }
      const args = [this.z, this.input, this.inOffset, this.input.length - this.inOffset, this.out, this.outOffset, this.out.length - this.outOffset] as const;
      if (!this.sync) {
        this.busy = true;
        try {
          this.addon.inflate(...args, this.done);
        } catch (e) {
          // Not queued (the addon could not create or queue the call): nothing runs, so fail the stage.
          this.busy = false;
          this.destroy(new FastpullError('INTERNAL', `inflating with isal: ${e instanceof Error ? e.message : String(e)}`, { cause: e }));
        }
        return;
      }
      this.addon.inflateSync(...args);
      if (!this.after()) return;
    }
  }

  get cpuMs(): number | undefined {
    return this.addon.cpuNs ? this.addon.cpuNs(this.z) / 1e6 : undefined;
  }

  private readonly done = (ran: boolean): void => {
    this.busy = false;
    const idle = this.idle;
    this.idle = undefined;
    if (idle) idle();
    else if (!ran) this.destroy(new FastpullError('INTERNAL', 'inflating with isal: the decode call was cancelled'));
    else if (this.after()) this.step();
  };

  /** Takes one call's result; true when the next call should follow at once. */
  private after(): boolean {
    if (this.destroyed) return false;
    const r = this.result;
    const room = this.out!.length - this.outOffset;
    this.inOffset += r[R_CONSUMED]!;
    this.compressedBytes += r[R_CONSUMED]!;
    this.phase = r[R_PHASE]!;
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
    this.input = EMPTY;
    callback?.(error);
  }

  private corrupt(what: string, isalError?: number): FastpullError {
    return new FastpullError('INVALID_LAYER', `corrupt gzip stream: isal: ${what}`, {
      details: { inflater: 'isal', compressedBytes: this.compressedBytes, members: this.result[R_MEMBERS], ...(isalError !== undefined ? { isalError } : {}) },
    });
  }
}
