// Large files' data written with O_DIRECT: from the extractor's memory to the device, past the page
// cache. A buffered write costs the kernel a page allocation and a copy per 4 KiB, dirty accounting,
// and later the write-back and the reclaim of every page; with O_DIRECT the device reads the bytes
// where they are. On a 2-core VM, 2 GiB written in 1 MiB writes took 0.72-2.64 s of system CPU
// buffered and 0.09-0.12 s direct, in about the same time; on a pull that is short of cores, that
// CPU is what the decoder and the hashes wait for.
//
// The bytes a file gets are copied into aligned buffers of DIRECT_CHUNK bytes (O_DIRECT needs the
// memory, the offset and the length aligned), written at their offsets on libuv's pool, up to
// DIRECT_DEPTH at once, so the extraction goes on while the device writes. The last piece is padded
// to the alignment with zeros and the file truncated to its size. A filesystem without direct I/O
// (fcntl answers EINVAL), or one that refuses a direct write with EINVAL, gets buffered writes.
import fs from 'node:fs';
import { isMainThread, workerData } from 'node:worker_threads';
import { positiveEnv } from '../util/env.js';
import { nativeFs } from './native.js';

/**
 * Files of at least this many bytes are written direct by default (FASTPULL_DIRECT_MIN_MIB sets it,
 * at least 8 MiB): weights shards, not a layer's libraries and data files. Each such file waits for
 * its last write before the next entry, and in a layer of mixed files its writes queue behind the
 * flushes of the small ones: in `pnpm bench` the ML image (whose largest layer has files of 22 to
 * 256 MiB among thousands of small ones) took 5.53-5.80 s from 8 MiB up against 4.69-5.16 s all
 * buffered (pairs 1.07-1.22x); from 128 MiB up, 4.65-5.19 s against 5.00-5.43 s (0.88-1.04x, CLI, 3
 * pairs); from 1 MiB up, 5.24-6.23 s. The layers of 4 GiB in 256 MiB files gain either way.
 */
export const DIRECT_MIN = 128 * 1024 * 1024;
/** The least FASTPULL_DIRECT_MIN_MIB may set: below it a file is not worth the buffers. */
export const DIRECT_MIN_FLOOR = 8 * 1024 * 1024;

/** Whether a file of `size` bytes is to be written direct (before {@link directIo} says whether it can be). */
export function directSize(size: number): boolean {
  if (size < DIRECT_MIN_FLOOR) return false;
  const mib = positiveEnv(process.env.FASTPULL_DIRECT_MIN_MIB);
  return size >= (mib !== undefined ? Math.max(DIRECT_MIN_FLOOR, mib * 1024 * 1024) : DIRECT_MIN);
}
/** Bytes of one direct write, and of each buffer. */
export const DIRECT_CHUNK = 4 * 1024 * 1024;
/**
 * Direct writes of one file in flight at once: the device works while the next buffer fills, and a
 * slow moment of the device does not stop the extraction at once. One layer of 4 GiB of fp16
 * weights (2-core VM, alternating, 3 runs each): 4 x 4 MiB 18.1-19.3 s, 16 x 1 MiB 19.2-21.3 s,
 * 8 x 1 MiB 19.5-21.6 s; 4 x 1 MiB 19.5-21.4 s against buffered writes' 22.8-24.4 s.
 */
export const DIRECT_DEPTH = 4;
/** What memory, offsets and lengths of direct writes are aligned to: the largest logical block Linux knows. */
const ALIGN = 4096;
/**
 * Buffers the process's direct writers hold at most, in use or kept for the next large file, over
 * all unpack threads: 16 MiB. A writer gets what is left of it, up to {@link DIRECT_DEPTH}, and at
 * least one buffer. Without it each unpack thread kept four of its own: the ML bench image with
 * four layers unpacked at once (`--inflater parallel --unpack-concurrency 4`) peaked at 336-341 MiB
 * against 268-277 MiB with buffered writes.
 */
export const DIRECT_BUDGET = 4;

/** The addon's calls that direct writes need. */
export interface DirectIo {
  alignSkip(buffer: Buffer, align: number): number;
  setDirectIo(fd: number, on: boolean): boolean;
}

let io: DirectIo | null | undefined;

/**
 * The calls, where FASTPULL_DIRECT_WRITES=1 turns direct writes on and the addon has them; else
 * undefined (every file is written through the page cache). Off by default: `pnpm bench`'s ML image,
 * whose largest layer has one 256 MiB file among thousands of small ones, took 4.91-5.68 s with it
 * against 4.62-4.95 s without (pairs 1.06-1.16x, 4 pairs, CPU 6.50-7.83 s against 6.27-6.35 s),
 * and why was not found; one layer of 4 GiB in 256 MiB files gains (above).
 */
export function directIo(): DirectIo | undefined {
  if (io === undefined) {
    const m = process.env.FASTPULL_DIRECT_WRITES === '1' ? (nativeFs() as Partial<DirectIo>) : undefined;
    io = typeof m?.alignSkip === 'function' && typeof m.setDirectIo === 'function' ? (m as DirectIo) : null;
  }
  return io ?? undefined;
}

/** This thread's buffers kept for its next large file (counted in the process's budget). */
const free: Buffer[] = [];

let budget: Int32Array | undefined;

/**
 * The count of direct-write buffers that exist in the process (held or kept): created on the main
 * thread, handed to the unpack workers as `workerData.directBudget` ({@link directBudgetWorkerData}).
 */
function processBudget(): Int32Array {
  if (budget === undefined) {
    const given = isMainThread ? undefined : (workerData as { directBudget?: unknown } | null | undefined)?.directBudget;
    budget = new Int32Array(given instanceof SharedArrayBuffer ? given : new SharedArrayBuffer(4));
  }
  return budget;
}

/** What an unpack worker's `workerData` carries so that its direct writers share this process's budget. */
export function directBudgetWorkerData(): { directBudget: SharedArrayBuffer } {
  return { directBudget: processBudget().buffer as SharedArrayBuffer };
}

/** Buffers of direct writes that exist in the process now, held or kept (at most {@link DIRECT_BUDGET} once writers settle). */
export function directBuffersHeld(): number {
  return Atomics.load(processBudget(), 0);
}

/** Counts up to `want` more buffers in the budget: how many it had room for. */
function reserve(want: number): number {
  const b = processBudget();
  for (;;) {
    const held = Atomics.load(b, 0);
    const got = Math.min(want, Math.max(0, DIRECT_BUDGET - held));
    if (got === 0 || Atomics.compareExchange(b, 0, held, held + got) === held) return got;
  }
}

function newBuffer(calls: DirectIo): Buffer {
  const raw = Buffer.allocUnsafeSlow(DIRECT_CHUNK + ALIGN);
  const skip = calls.alignSkip(raw, ALIGN);
  return raw.subarray(skip, skip + DIRECT_CHUNK);
}

/** pwrite(2) on libuv's pool: the bytes written. */
export type WriteAt = (fd: number, buf: Buffer, length: number, position: number) => Promise<number>;

function pwrite(fd: number, buf: Buffer, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, buf, 0, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * The data of one file, written direct where the filesystem lets it. Feed it with {@link add},
 * finish with {@link end}; {@link settle} before closing the fd, whatever happened (writes may be
 * in flight on the pool).
 */
export class DirectWriter {
  private readonly bufs: Buffer[];
  private readonly inFlight: (Promise<void> | undefined)[] = [];
  /** Buffers this writer fills in turn (1 to {@link DIRECT_DEPTH}), as the budget allowed. */
  readonly depth: number;
  /** Buffers counted in the budget for this writer and not made yet. */
  private unmade: number;
  private slot = 0;
  private fill = 0;
  /** File offset of the current buffer's first byte. */
  private position = 0;
  private direct: boolean;
  private error: unknown;

  /** Sets the fd to O_DIRECT; {@link isDirect} says whether the filesystem took it. `write` is for tests. */
  constructor(
    private readonly calls: DirectIo,
    private readonly fd: number,
    private readonly writeAt: WriteAt = pwrite,
  ) {
    this.direct = calls.setDirectIo(fd, true);
    this.bufs = this.direct ? free.splice(0, DIRECT_DEPTH) : [];
    this.unmade = this.direct ? reserve(DIRECT_DEPTH - this.bufs.length) : 0;
    if (this.direct && this.bufs.length + this.unmade === 0) {
      // Over the budget by one buffer rather than no direct write at all.
      Atomics.add(processBudget(), 0, 1);
      this.unmade = 1;
    }
    this.depth = Math.max(1, this.bufs.length + this.unmade);
  }

  /** Whether writes still go direct (false once the filesystem refused). */
  get isDirect(): boolean {
    return this.direct;
  }

  /**
   * Copies `chunk` in (it is free once this returns or settles). A promise only when a buffer's
   * earlier write had to be waited for.
   */
  add(chunk: Buffer): Promise<void> | undefined {
    let at = 0;
    while (at < chunk.length) {
      const buf = this.current();
      if (buf === undefined) return this.waitSlot().then(() => this.add(chunk.subarray(at)));
      const n = Math.min(DIRECT_CHUNK - this.fill, chunk.length - at);
      chunk.copy(buf, this.fill, at, at + n);
      this.fill += n;
      at += n;
      if (this.fill === DIRECT_CHUNK) this.submit(DIRECT_CHUNK);
    }
    return undefined;
  }

  /** Writes what is left, waits for every write, and sets the file's size. */
  async end(size: number): Promise<void> {
    if (this.fill > 0) {
      const buf = this.current() ?? (await this.waitSlot(), this.current()!);
      const padded = Math.ceil(this.fill / ALIGN) * ALIGN;
      buf.fill(0, this.fill, padded);
      this.submit(padded);
    }
    await this.settle();
    if (this.error !== undefined) throw this.error;
    if (this.position !== size) fs.ftruncateSync(this.fd, size);
  }

  /**
   * Resolves once no write of this file is in flight, and gives the buffers back: kept for this
   * thread's next large file while the process holds no more than its budget. Never rejects.
   */
  async settle(): Promise<void> {
    await Promise.all(this.inFlight);
    this.inFlight.length = 0;
    const b = processBudget();
    Atomics.sub(b, 0, this.unmade);
    this.unmade = 0;
    free.push(...this.bufs.splice(0));
    while (free.length > 0 && (free.length > DIRECT_DEPTH || Atomics.load(b, 0) > DIRECT_BUDGET)) {
      free.pop();
      Atomics.sub(b, 0, 1);
    }
  }

  /** The buffer being filled, or undefined while its earlier write is in flight. */
  private current(): Buffer | undefined {
    if (this.error !== undefined) throw this.error;
    if (this.inFlight[this.slot] !== undefined) return undefined;
    let buf = this.bufs[this.slot];
    if (buf === undefined) {
      buf = this.bufs[this.slot] = newBuffer(this.calls);
      this.unmade--;
    }
    return buf;
  }

  private async waitSlot(): Promise<void> {
    await this.inFlight[this.slot];
    if (this.error !== undefined) throw this.error;
  }

  private submit(length: number): void {
    const slot = this.slot;
    const done = this.write(this.bufs[slot]!, length, this.position).then(
      () => void (this.inFlight[slot] = undefined),
      (err: unknown) => {
        this.inFlight[slot] = undefined;
        this.error ??= err;
      },
    );
    this.inFlight[slot] = done;
    this.position += length;
    this.fill = 0;
    this.slot = (slot + 1) % this.depth;
  }

  private async write(buf: Buffer, length: number, position: number): Promise<void> {
    let off = 0;
    while (off < length) {
      let n: number;
      try {
        n = await this.writeAt(this.fd, buf.subarray(off), length - off, position + off);
      } catch (err) {
        // A filesystem that took O_DIRECT at fcntl but refuses this write: the rest goes buffered.
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL' || !this.direct) throw err;
        this.direct = false;
        this.calls.setDirectIo(this.fd, false);
        continue;
      }
      if (n === 0) throw Object.assign(new Error('write wrote nothing'), { code: 'EIO', syscall: 'write' });
      off += n;
    }
  }
}
