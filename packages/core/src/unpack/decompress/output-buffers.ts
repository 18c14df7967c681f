// Output buffers of one decoder that are filled again once the reader released every byte in them.

/** Bytes of released buffers a decoder keeps to fill again (16 of 1 MiB); more that come back are left to the garbage collector. */
export const OUTPUT_SPARE_BYTES = 16 * 1024 * 1024;

/**
 * Bytes of buffers pushed but not yet released that a decoder remembers (32 of 1 MiB): a pass's
 * reader holds about 12 MiB at most (the tar's hash queue of 8 MiB, the decoder's read-ahead, the
 * reader's own), and the oldest of more is left to the garbage collector, so that a reader that
 * stops releasing holds nothing here.
 */
export const OUTPUT_RETIRED_BYTES = 32 * 1024 * 1024;

/**
 * A decoder's output buffers, filled again once its reader said it holds no byte of them any more.
 * The decoder takes a buffer ({@link take}), fills it and pushes views of it downstream; once it
 * pushed the last byte it will put there, it retires the buffer with the output offset past that
 * byte ({@link retire}). The reader releases an offset ({@link release}) once it holds no byte
 * before it, nor any view of one; every retired buffer whose bytes all lie before it is then taken
 * again. A fresh buffer per output dies young but is freed only when V8 collects its holders, and
 * counts as external memory that makes V8 collect more often; taken again, its pages are already
 * there. A reader that released too early would see its bytes change: the layer's diffID catches
 * that in the tar's hash, and the rule above (nothing behind a released offset is held) is what
 * keeps file contents right, which no digest checks after they are written.
 * @example
 * const out = new OutputBuffers(1 << 20);
 * const buf = out.take(); // fill it, push views of it
 * out.retire(buf, bytesPushedSoFar);
 * out.release(readerDoneUpTo); // buf is take()'s again once readerDoneUpTo >= bytesPushedSoFar
 */
export class OutputBuffers {
  private readonly retired: { buf: Buffer; end: number }[] = [];
  private readonly spare: Buffer[] = [];
  private released = 0;
  private allocated = 0;
  private recycled = 0;
  /** Spare buffers kept, at most ({@link OUTPUT_SPARE_BYTES} of them). */
  readonly spareMax: number;
  /** Retired buffers remembered, at most ({@link OUTPUT_RETIRED_BYTES} of them). */
  readonly retiredMax: number;

  constructor(
    /** Bytes of each buffer. */
    readonly size: number,
  ) {
    if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`OutputBuffers: size ${size}`);
    this.spareMax = Math.max(1, Math.floor(OUTPUT_SPARE_BYTES / size));
    this.retiredMax = Math.max(1, Math.floor(OUTPUT_RETIRED_BYTES / size));
  }

  /** A buffer of {@link size} bytes to fill: a released one when there is one, else a new one. */
  take(): Buffer {
    const buf = this.spare.pop();
    if (buf !== undefined) {
      this.recycled++;
      return buf;
    }
    this.allocated++;
    return Buffer.allocUnsafe(this.size);
  }

  /** `buf` (from {@link take}) holds no output at or past offset `end`: it is spare once `end` is released. */
  retire(buf: Buffer, end: number): void {
    this.retired.push({ buf, end });
    if (this.retired.length > this.retiredMax) this.retired.shift();
    this.recycle();
  }

  /** The reader holds no output byte before `upTo` any more, nor a view of one. Offsets only count forward. */
  release(upTo: number): void {
    if (!(upTo > this.released)) return;
    this.released = upTo;
    this.recycle();
  }

  /** Forgets every buffer (the decoder is done): nothing is taken again. */
  clear(): void {
    this.retired.length = 0;
    this.spare.length = 0;
  }

  /** Buffers allocated so far, and takes that got a released one instead. */
  get counts(): { allocated: number; recycled: number } {
    return { allocated: this.allocated, recycled: this.recycled };
  }

  private recycle(): void {
    const { retired } = this;
    while (retired.length > 0 && retired[0]!.end <= this.released) {
      const { buf } = retired.shift()!;
      if (this.spare.length < this.spareMax) this.spare.push(buf);
    }
  }
}
