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
import { ERROR_TEXT, giveBuffers, nativeInflate, runJob, St, Status, WINDOW, type JobInput, type JobResult, type JobStart } from './pargzip-job.js';
import type { FromInflateWorker, ToInflateWorker } from './pargzip-worker.js';
import { compiledWorker } from './pool.js';

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
}

/**
 * Worker threads that run decode jobs, one at a time each, in order of priority: a job the output is
 * waiting for goes before speculative ones.
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
  private readonly all = new Set<Worker>();
  private readonly queue: { job: JobInput; urgent: boolean; owner: object; resolve: (r: JobResult) => void; reject: (e: Error) => void }[] = [];
  private busy = 0;
  private nextId = 1;
  private nextRecycle = 0;
  /** Job input buffers back from the workers, for {@link takeInput}. */
  private readonly inputs: ArrayBuffer[] = [];

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

  /** Runs a job; `urgent` ones go first. */
  run(job: JobInput, urgent: boolean, owner: object): Promise<JobResult> {
    if (!this.script) {
      return new Promise((resolve, reject) => {
        setImmediate(() => {
          try {
            resolve({ ...runJob(job), input: job.data.buffer as ArrayBuffer });
          } catch (e) {
            reject(e as Error);
          }
        });
      });
    }
    return new Promise((resolve, reject) => {
      const entry = { job, urgent, owner, resolve, reject };
      if (urgent) {
        const i = this.queue.findIndex((q) => !q.urgent);
        this.queue.splice(i < 0 ? this.queue.length : i, 0, entry);
      } else {
        this.queue.push(entry);
      }
      this.pump();
    });
  }

  /** A buffer of at least `bytes` for a job's input, reused when one came back. */
  takeInput(bytes: number): ArrayBuffer {
    const i = this.inputs.findIndex((b) => b.byteLength >= bytes && b.byteLength <= bytes * 2);
    return i >= 0 ? this.inputs.splice(i, 1)[0]! : new ArrayBuffer(bytes);
  }

  /** Hands a result's output buffers back to a decode thread, once their bytes are copied out. */
  recycle(result: JobResult): void {
    const buffers = [result.out16.buffer as ArrayBuffer, result.out8.buffer as ArrayBuffer];
    if (!this.script) {
      giveBuffers(buffers);
      if (result.input) this.keepInput(result.input);
      return;
    }
    const workers = [...this.all];
    if (workers.length === 0) return;
    const w = workers[this.nextRecycle++ % workers.length]!;
    w.postMessage({ id: 0, recycle: buffers } satisfies ToInflateWorker, buffers);
  }

  private keepInput(b: ArrayBuffer): void {
    if (this.inputs.length >= 8) this.inputs.shift();
    this.inputs.push(b);
  }

  /** Drops the queued (not yet running) jobs of `owner`; their promises never settle. */
  drop(owner: object): void {
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.queue[i]!.owner === owner) this.queue.splice(i, 1);
  }

  private pump(): void {
    while (this.busy < this.threads && this.queue.length > 0) {
      const entry = this.queue.shift()!;
      const worker = this.idle.pop() ?? this.spawn();
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
        if (msg.ok) {
          if (msg.input) this.keepInput(msg.input);
          entry.resolve(msg.result);
        }
        else entry.reject(new FastpullError('INTERNAL', `inflate worker: ${msg.message}`));
        this.pump();
      };
      const onError = (e: Error) => {
        finish();
        this.all.delete(worker);
        entry.reject(new FastpullError('INTERNAL', `inflate worker failed: ${e.message}`, { cause: e }));
        this.pump();
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      // The input buffer is the job's own (a view from its start): it moves to the worker and back.
      const transfer = entry.job.data.byteOffset === 0 ? [entry.job.data.buffer as ArrayBuffer] : [];
      worker.postMessage({ id, job: entry.job } satisfies ToInflateWorker, transfer);
    }
  }

  private spawn(): Worker {
    const worker = new Worker(this.script!);
    this.all.add(worker);
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
    await Promise.all([...this.all].map((w) => w.terminate()));
  }
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
  readonly stats: ParallelGunzipStats = { guessesUsed: 0, guessesDropped: 0, exactJobs: 0, markedBytes: 0, eagerJobs: 0 };
  private readonly pool: InflatePool;
  private readonly chunk: number;
  private readonly cap: number;
  private readonly overrun: number;
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

  /** A copy of input bytes [from, to), in a buffer of its own (it moves to a worker). */
  private copyInput(from: number, to: number): Uint8Array {
    const out = new Uint8Array(this.pool.takeInput(to - from), 0, to - from);
    let at = this.kept;
    let o = 0;
    for (const p of this.pieces) {
      const pEnd = at + p.length;
      if (pEnd > from && at < to) {
        const s = Math.max(from, at) - at;
        const e = Math.min(to, pEnd) - at;
        out.set(p.subarray(s, e), o);
        o += e - s;
      }
      at = pEnd;
      if (at >= to) break;
    }
    if (o !== to - from) throw new FastpullError('INTERNAL', `parallel gunzip: input bytes ${from}-${to} are no longer kept`);
    return out;
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
      const job: JobInput = { ...r.end, data: this.copyInput(from, to), dataOffset: from, final: this.ended && to === this.written, stopKey: stop, cap: this.cap, window: null };
      const p = pool.run(job, false, this.owner);
      p.then((next) => {
        if (conts.has(contKey(r.end, stop))) launchEager(k, next, stop);
      }, () => undefined);
      conts.set(contKey(r.end, stop), { k, p });
    };

    // Launches the speculative jobs, ahead of the output by at most maxAhead.
    const feeder = async () => {
      while (!this.stopped) {
        while (specs.size + conts.size >= maxAhead && !this.stopped) await new Promise<void>((r) => (specWake = r));
        const k = nextSpec;
        const start = k * C;
        await this.ready(start + C + this.overrun);
        if (this.stopped) return;
        if (this.ended && start >= this.written) return;
        const end = Math.min(this.written, start + C + this.overrun);
        const data = this.copyInput(start, end);
        nextSpec++;
        const p = pool.run(
          { data, dataOffset: start, final: this.ended && end === this.written, kind: -1, bit: 8 * start, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0, stopKey: 8 * (start + C), cap: this.cap, window: null },
          false,
          this.owner,
        );
        p.then((r) => {
          if (specs.has(k) && r.status !== Status.NoStart && r.status !== Status.Error) launchEager(k, r, 8 * (start + C));
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
      if (!keepConts) for (const [key, c] of conts) if (c.k === k) conts.delete(key);
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
            if (cursorKey < 8 * k * C && !(this.ended && k * C >= this.written)) {
              stopKey = 8 * k * C;
              break;
            }
            const s = await specFor(k);
            if (s === undefined) break;
            if (s.status !== Status.NoStart && s.status !== Status.Error && s.startKey === cursorKey && matches(s, cursor)) {
              r = s;
              rStop = 8 * (k + 1) * C;
              stats.guessesUsed++;
              dropSpec(k++, true);
            } else if (s.status === Status.NoStart || s.status === Status.Error || s.startKey <= cursorKey) {
              // A false boundary, or the right place in a state the guess did not assume (a last block).
              stats.guessesDropped++;
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
          r = await pool.run(
            { ...cursor, data: this.copyInput(from, end), dataOffset: from, final: this.ended && end === this.written, stopKey, cap: this.cap, window: window.slice(WINDOW - known) },
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
          piece.set(r.out8.subarray(at, at + piece.length));
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
        pool.recycle(r); // detaches r.out16 and r.out8: nothing below reads them
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
        this.release(Math.min(Math.floor(cursor.bit / 8), nextSpec * C));
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

/** The last 32 KiB of `window` followed by `parts`. */
function slideWindow(window: Uint8Array, parts: readonly Buffer[]): Uint8Array {
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
