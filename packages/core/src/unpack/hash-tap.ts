// Hashes and counts a stream as it passes: SHA-256 on the libuv pool through the addon, or inline with node:crypto.
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { FastpullError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import { nativeHash, type NativeHash, type NativeSha256 } from '../native/addon.js';

/**
 * Where a {@link HashTap} hashes. 'pool': the addon's SHA-256 as libuv pool work, so the thread that
 * parses the tar never hashes and hashing runs beside decompression and extraction. 'inline':
 * node:crypto on the stream's own thread, between the stages (the fallback without the addon).
 */
export type HashMode = 'pool' | 'inline';

/**
 * Bytes passed downstream but not yet hashed before the tap holds the stream back. Hashing at
 * about a GB/s empties it in milliseconds; a bound keeps memory flat when hashing is the slowest
 * stage, and room for a few 1 MiB reads lets one batch run while the next gathers.
 */
export const HASH_QUEUE_BYTES = 8 * 1024 * 1024;

/** Options of {@link HashTap}. */
export interface HashTapOptions {
  /** Called with the total of bytes seen so far, as each chunk passes. */
  onBytes?: (total: number) => void;
  /** Default {@link defaultHashMode}. */
  mode?: HashMode;
  /** Default {@link HASH_QUEUE_BYTES}. */
  queueBytes?: number;
  /**
   * Keep hashing what was queued when the stream is cut by an error, so that {@link finish} can
   * complete the digest from the rest of the input; the owner then calls {@link finish} or
   * {@link discard}.
   */
  keepOnError?: boolean;
  /**
   * Called with each chunk once it is hashed (only when hashing succeeded): the tap reads it no
   * more.
   */
  onHashed?: (chunk: Buffer) => void;
}

/** What a {@link HashTap} saw. */
export interface HashTapResult {
  digest: Digest;
  bytes: number;
  /** CPU spent hashing: the pool threads' own CPU clock, or (inline) the time of node:crypto's calls. */
  cpuMs: number;
  /** How long the stream waited on hashing: inline, all of it; on the pool, only when the queue was full or at the end. */
  blockedMs: number;
}

/**
 * The mode a tap gets by default: 'pool' where the addon's SHA-256 is there, else 'inline'. The
 * inline way is what runs without the addon; a comparison asks for it by the tap's `mode`
 * (bench:stages does).
 */
export function defaultHashMode(): HashMode {
  return nativeHash() ? 'pool' : 'inline';
}

/** Bytes all taps of this thread were given to hash. */
let given = 0;

/**
 * Bytes every {@link HashTap} of this thread was given to hash so far, all taps together: how a test
 * tells how many times a pass hashed its bytes (an uncompressed layer's once, a compressed one's
 * blob and tar).
 * @example
 * const before = hashedBytes();
 * await unpackLayer({ blobPath, mediaType: MediaTypes.OCI_LAYER, dest });
 * console.log(hashedBytes() - before); // the blob's size
 */
export function hashedBytes(): number {
  return given;
}

/**
 * A pass-through Transform that hashes what flows through it. On the pool each chunk goes
 * downstream at once and joins a queue that one batch at a time hashes, in order, off this thread;
 * the stream is held back only while more than `queueBytes` wait. {@link result} waits for the
 * queue and gives the digest. A tap destroyed mid-stream drops what is queued; {@link settled}
 * says when the batch already on the pool is done.
 */
export class HashTap extends Transform {
  readonly mode: HashMode;
  bytes = 0;
  private cpuMs = 0;
  private blockedMs = 0;
  private readonly limit: number;
  private readonly inline?: Hash;
  private readonly native?: { lib: NativeHash; handle: NativeSha256 };
  private queue: Buffer[] = [];
  /** Bytes queued or on the pool. */
  private pending = 0;
  private running = false;
  private stopped = false;
  private failed: Error | undefined;
  private held: (() => void) | undefined;
  private idle: (() => void)[] = [];

  constructor(private readonly options: HashTapOptions = {}) {
    super();
    this.limit = options.queueBytes ?? HASH_QUEUE_BYTES;
    const lib = (options.mode ?? defaultHashMode()) === 'pool' ? nativeHash() : undefined;
    const handle = lib?.sha256Create();
    if (lib && handle) {
      this.mode = 'pool';
      this.native = { lib, handle };
    } else {
      this.mode = 'inline';
      this.inline = createHash('sha256');
    }
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    given += chunk.length;
    this.options.onBytes?.(this.bytes);
    if (this.inline) {
      const t = performance.now();
      this.inline.update(chunk);
      const ms = performance.now() - t;
      this.cpuMs += ms;
      this.blockedMs += ms;
      this.options.onHashed?.(chunk);
      callback(null, chunk);
      return;
    }
    if (this.failed) {
      callback(this.failed);
      return;
    }
    if (chunk.length > 0) {
      this.queue.push(chunk);
      this.pending += chunk.length;
      this.pump();
    }
    this.push(chunk);
    if (this.pending <= this.limit) {
      callback();
      return;
    }
    const t = performance.now();
    this.held = () => {
      this.blockedMs += performance.now() - t;
      callback(this.failed ?? null);
    };
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A tap that saw its whole stream is destroyed when done with it; only a cut stream drops its
    // queue, unless its owner means to finish the digest.
    if ((error || !this.writableFinished) && !this.options.keepOnError) this.stop();
    callback(error);
  }

  /** Drops what is queued and hashes nothing more (what is on the pool now still ends: see {@link settled}). */
  discard(): void {
    this.stop();
  }

  /**
   * After the stream was cut (with `keepOnError`): hashes `rest`, the input that follows the
   * {@link bytes} seen, and gives the digest of the whole. Throws when hashing failed or the tap
   * was discarded.
   */
  async finish(rest: AsyncIterable<Uint8Array>): Promise<HashTapResult> {
    for await (const chunk of rest) {
      if (this.stopped || this.failed) break;
      const b = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      this.bytes += b.length;
      given += b.length;
      if (this.inline) {
        this.inline.update(b);
        continue;
      }
      this.queue.push(b);
      this.pending += b.length;
      this.pump();
      while (this.pending > this.limit && !this.stopped && !this.failed) await this.settled();
    }
    return this.result();
  }

  /** Bytes passed on but not yet hashed (queued or on the pool). */
  get pendingBytes(): number {
    return this.pending;
  }

  /** Whether a batch of this tap is on the pool now. */
  get busy(): boolean {
    return this.running;
  }

  /** Resolves once no batch of this tap is on the pool (at once inline). */
  settled(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Waits for every byte seen to be hashed, then digests; call once, after the stream ended. */
  async result(): Promise<HashTapResult> {
    if (this.inline) return { digest: `sha256:${this.inline.digest('hex')}`, bytes: this.bytes, cpuMs: this.cpuMs, blockedMs: this.blockedMs };
    const t = performance.now();
    while (this.running || (this.queue.length > 0 && !this.stopped)) await this.settled();
    this.blockedMs += performance.now() - t;
    if (this.failed) throw this.failed;
    if (this.stopped) throw new FastpullError('INTERNAL', 'sha256: the stream was destroyed before it was hashed');
    const { lib, handle } = this.native!;
    return { digest: `sha256:${lib.sha256Digest(handle).toString('hex')}`, bytes: this.bytes, cpuMs: this.cpuMs, blockedMs: this.blockedMs };
  }

  /** Sends what is queued as one batch unless one is already on the pool. */
  private pump(): void {
    if (this.running || this.stopped || this.queue.length === 0) return;
    const { lib, handle } = this.native!;
    const batch = this.queue;
    const size = batch.reduce((n, b) => n + b.length, 0);
    this.queue = [];
    this.running = true;
    lib.sha256Update(handle, batch, (error, cpuNs) => {
      this.running = false;
      this.cpuMs += cpuNs / 1e6;
      this.pending -= size;
      if (error && !this.failed) {
        this.failed = new FastpullError('INTERNAL', `sha256 of a stream after ${this.bytes} bytes: ${error.message}`, { cause: error });
        this.stop();
        this.destroy(this.failed);
      }
      if (!error && this.options.onHashed) for (const b of batch) this.options.onHashed(b);
      this.pump();
      if (this.held && (this.pending <= this.limit || this.failed)) {
        const release = this.held;
        this.held = undefined;
        release();
      }
      if (!this.running) for (const resolve of this.idle.splice(0)) resolve();
    });
  }

  private stop(): void {
    this.stopped = true;
    this.pending -= this.queue.reduce((n, b) => n + b.length, 0);
    this.queue = [];
  }
}
