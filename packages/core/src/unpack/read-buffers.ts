// Read buffers of one blob that come back for the next read once every stage that reads them is done.

/** Spare buffers a {@link ReadBuffers} keeps at most; more that come back are left to the garbage collector. */
export const READ_BUFFERS_SPARE = 16;

/**
 * Buffers that a blob is read into, handed out again once each of its readers said it is done
 * with the chunk it got. A pass reads a blob in 1 MiB chunks that the blob's hash and the decoder
 * each hold for milliseconds; fresh buffers become garbage that V8 frees only when it collects their
 * holders, and a chunk that waited in a queue across a young collection lives on in the old
 * generation until a full one: through a 4 GiB layer the dead read buffers of the unpack thread
 * reached 27 MiB. Recycled, a pass holds about as many buffers as its queues do.
 *
 * Each chunk handed out counts its readers; a reader's {@link ReadBuffers.reader} callback says it
 * is done with a chunk (again for the same chunk changes nothing), and the last one's makes the
 * chunk's buffer spare. A chunk a reader never gives back is garbage as before. A reader that gives
 * a chunk back while it still reads it would read the next chunk's bytes: the blob's digest or the
 * layer's diffID then fails, so such a bug can fail a pull but never pass a wrong layer.
 * @example
 * const buffers = new ReadBuffers(1 << 20, 2);
 * const hashed = buffers.reader(0);
 * const decoded = buffers.reader(1);
 * const buf = buffers.take();
 * const chunk = buffers.lend(buf, await readInto(buf));
 * hashed(chunk);
 * decoded(chunk); // buf is the next take()'s again
 */
export class ReadBuffers {
  private readonly spare: Buffer[] = [];
  /** Chunks out, by the view handed out: the whole buffer and a bit per reader still to give it back. */
  private readonly out = new WeakMap<Uint8Array, { buf: Buffer; left: number }>();
  private allocated = 0;
  private recycled = 0;

  constructor(
    /** Bytes of each buffer. */
    readonly size: number,
    /** How many readers give each chunk back (1 to 30). */
    readonly readers: number,
    private readonly keep = READ_BUFFERS_SPARE,
  ) {
    if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`ReadBuffers: size ${size}`);
    if (!Number.isInteger(readers) || readers < 1 || readers > 30) throw new RangeError(`ReadBuffers: readers ${readers}`);
  }

  /** A buffer of {@link size} bytes to read into: a spare one when one came back, else a new one. */
  take(): Buffer {
    const buf = this.spare.pop();
    if (buf) {
      this.recycled++;
      return buf;
    }
    this.allocated++;
    return Buffer.allocUnsafeSlow(this.size);
  }

  /**
   * Hands out the first `length` bytes of `buf` (which {@link take} gave) as a chunk for the
   * readers; `buf` comes back to {@link take} once each reader gave the chunk back.
   */
  lend(buf: Buffer, length: number): Buffer {
    const chunk = length === buf.length ? buf : buf.subarray(0, length);
    this.out.set(chunk, { buf, left: (1 << this.readers) - 1 });
    return chunk;
  }

  /** The callback reader `index` (0 to readers - 1) calls with each chunk it is done with; other chunks are ignored. */
  reader(index: number): (chunk: Uint8Array) => void {
    if (!Number.isInteger(index) || index < 0 || index >= this.readers) throw new RangeError(`ReadBuffers: reader ${index} of ${this.readers}`);
    const bit = 1 << index;
    return (chunk) => {
      const lent = this.out.get(chunk);
      if (!lent || (lent.left & bit) === 0) return;
      lent.left &= ~bit;
      if (lent.left !== 0) return;
      this.out.delete(chunk);
      if (this.spare.length < this.keep) this.spare.push(lent.buf);
    };
  }

  /** Buffers allocated so far, and takes that got a spare one instead. */
  get counts(): { allocated: number; recycled: number } {
    return { allocated: this.allocated, recycled: this.recycled };
  }
}
