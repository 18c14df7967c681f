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
import { nativeFs } from './native.js';

/**
 * Files of at least this many bytes are written direct. Each such file waits for its last write
 * before the next entry: from 1 MiB up, the ML bench image took 5.24-6.23 s against 4.65-5.30 s
 * from 8 MiB up (and 4.90-5.37 s all buffered).
 */
export const DIRECT_MIN = 8 * 1024 * 1024;
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
/** Free buffers kept for the next large file: one file's worth (a layer writes one large file at a time). */
const KEEP_FREE = DIRECT_DEPTH;

/** The addon's calls that direct writes need. */
export interface DirectIo {
  alignSkip(buffer: Buffer, align: number): number;
  setDirectIo(fd: number, on: boolean): boolean;
}

let io: DirectIo | null | undefined;

/**
 * The calls, or undefined where the addon lacks them or FASTPULL_DIRECT_WRITES=0 turns direct
 * writes off (then every file is written through the page cache, as before).
 */
export function directIo(): DirectIo | undefined {
  if (io === undefined) {
    const m = process.env.FASTPULL_DIRECT_WRITES === '0' ? undefined : (nativeFs() as Partial<DirectIo>);
    io = typeof m?.alignSkip === 'function' && typeof m.setDirectIo === 'function' ? (m as DirectIo) : null;
  }
  return io ?? undefined;
}

const free: Buffer[] = [];

function takeBuffer(calls: DirectIo): Buffer {
  const kept = free.pop();
  if (kept !== undefined) return kept;
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
  private readonly bufs: Buffer[] = [];
  private readonly inFlight: (Promise<void> | undefined)[] = [];
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

  /** Resolves once no write of this file is in flight, and gives the buffers back. Never rejects. */
  async settle(): Promise<void> {
    await Promise.all(this.inFlight);
    for (const b of this.bufs.splice(0)) if (free.length < KEEP_FREE) free.push(b);
    this.inFlight.length = 0;
  }

  /** The buffer being filled, or undefined while its earlier write is in flight. */
  private current(): Buffer | undefined {
    if (this.error !== undefined) throw this.error;
    if (this.inFlight[this.slot] !== undefined) return undefined;
    return (this.bufs[this.slot] ??= takeBuffer(this.calls));
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
    this.slot = (slot + 1) % DIRECT_DEPTH;
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
