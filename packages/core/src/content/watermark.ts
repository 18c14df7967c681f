// The watermark of an ingest: how many bytes from offset 0 have landed without a gap. Chunks land in
// any order; readers (the unpacker, possibly on another thread) follow the watermark, never reading a
// byte before it is on disk. Shared through a SharedArrayBuffer so a worker can wait on it.
//
// The same memory carries the release of bytes already read: the reader asks to free a prefix of
// the file (its blocks and pages, so that a blob deleted at commit is never written to disk), and
// may free it only once the writer has granted it, that is once the ingest's resume record no
// longer lists those bytes. A crash at any moment then leaves a record that claims only bytes the
// file still holds.

/** Layout of the shared buffer: BigInt64 slots. */
const SLOT_MARK = 0;
const SLOT_STATE = 1;
/** Bytes from offset 0 the reader is done with and asks to free. */
const SLOT_RELEASE_ASKED = 2;
/** Bytes from offset 0 the writer's record no longer claims: the reader may free them. */
const SLOT_RELEASE_GRANTED = 3;
/** 1 while the reader punches a hole in the file: a write to it would wait for the punch. */
const SLOT_PUNCHING = 4;
/**
 * Bytes from offset 0 the reader that frees the file behind it has read (its blob hash holds
 * them); 0 until it starts, {@link READER_DONE} once it frees nothing more. The writer may pace the
 * download to it.
 */
const SLOT_READER = 5;
const SLOTS = 6;

/** {@link WatermarkView.reader} of a reader that frees nothing more: the download need not wait for it. */
export const READER_DONE = Number.MAX_SAFE_INTEGER;

/** State slot values. */
export const WatermarkState = { OPEN: 0n, FAILED: 1n } as const;

/**
 * The read side of a {@link Watermark}, usable on any thread that was handed its buffer.
 * @example
 * const view = new WatermarkView(buffer); // in a worker, from watermark.buffer
 * let seen = 0;
 * while (seen < size && !view.failed) {
 *   await view.waitPast(seen);
 *   seen = view.value; // bytes [0, seen) may be read now
 * }
 */
export class WatermarkView {
  protected readonly slots: BigInt64Array;

  /** @param buffer - the shared memory of a {@link Watermark}. */
  constructor(readonly buffer: SharedArrayBuffer) {
    this.slots = new BigInt64Array(buffer);
  }

  /** Bytes from offset 0 on disk without a gap. */
  get value(): number {
    return Number(Atomics.load(this.slots, SLOT_MARK));
  }

  /** True once the writer failed: no more bytes will come. */
  get failed(): boolean {
    return Atomics.load(this.slots, SLOT_STATE) !== WatermarkState.OPEN;
  }

  /**
   * Resolves once the watermark is past `seen` or the writer failed. Never blocks the thread
   * (Atomics.waitAsync); `timeoutMs` bounds one wait so a reader re-checks its abort signal.
   */
  async waitPast(seen: number, timeoutMs = 1000): Promise<void> {
    const expected = BigInt(seen);
    if (Atomics.load(this.slots, SLOT_MARK) !== expected || this.failed) return;
    const r = Atomics.waitAsync(this.slots, SLOT_MARK, expected, timeoutMs);
    if (r.async) await r.value;
  }

  /** The reader is done with bytes [0, `end`) and asks to free them (never moves back). */
  askRelease(end: number): void {
    if (end > Number(Atomics.load(this.slots, SLOT_RELEASE_ASKED))) Atomics.store(this.slots, SLOT_RELEASE_ASKED, BigInt(end));
  }

  /** Bytes from offset 0 the reader asked to free. */
  get releaseAsked(): number {
    return Number(Atomics.load(this.slots, SLOT_RELEASE_ASKED));
  }

  /** Bytes from offset 0 the reader may free: no resume record claims them any more. */
  get releaseGranted(): number {
    return Number(Atomics.load(this.slots, SLOT_RELEASE_GRANTED));
  }

  /**
   * Whether the reader is punching a hole in the file now. A punch holds the file's inode lock, for
   * as long as the filesystem takes to free (and maybe trim) the blocks, and a write to the same
   * file waits for it: the writer then writes off its thread.
   */
  get punching(): boolean {
    return Atomics.load(this.slots, SLOT_PUNCHING) !== 0n;
  }

  /** Bytes from offset 0 the reader that frees the file behind it has read (see SLOT_READER). */
  get reader(): number {
    return Number(Atomics.load(this.slots, SLOT_READER));
  }

  /** The reader has read the first `n` bytes (never moves back), or frees nothing more ({@link READER_DONE}). */
  setReader(n: number): void {
    if (n > this.reader) Atomics.store(this.slots, SLOT_READER, BigInt(n));
  }

  /** The reader starts (true) or ended (false) a punch. */
  setPunching(on: boolean): void {
    Atomics.store(this.slots, SLOT_PUNCHING, on ? 1n : 0n);
  }
}

/**
 * The write side: records landed ranges, in any order, and publishes the contiguous prefix.
 * @example
 * const w = new Watermark(100);
 * w.add(50, 100); // w.value is 0
 * w.add(0, 50); // w.value is 100
 */
export class Watermark extends WatermarkView {
  /** Landed ranges beyond the watermark, sorted, disjoint, as [start, end). */
  private pending: [number, number][] = [];
  private mark = 0;

  /** @param size - the size of the blob being written. */
  constructor(readonly size: number) {
    super(new SharedArrayBuffer(SLOTS * 8));
  }

  /** A watermark already at `size`: for blobs that are complete on disk. */
  static complete(size: number): Watermark {
    const w = new Watermark(size);
    w.add(0, size);
    return w;
  }

  /** Records that bytes [start, end) are on disk. */
  add(start: number, end: number): void {
    if (end <= start) return;
    if (start <= this.mark) {
      if (end > this.mark) this.advance(end);
      return;
    }
    // Insert or merge into the pending list (short: one entry per chunk in flight at most).
    const p = this.pending;
    let i = 0;
    while (i < p.length && p[i]![1] < start) i++;
    let s = start;
    let e = end;
    let j = i;
    while (j < p.length && p[j]![0] <= e) {
      s = Math.min(s, p[j]![0]);
      e = Math.max(e, p[j]![1]);
      j++;
    }
    p.splice(i, j - i, [s, e]);
  }

  /**
   * The ranges on disk, sorted and disjoint, as [start, end): the prefix first, then the rest.
   * `from`: leave out bytes before it (those the reader may free, see {@link grantRelease}).
   */
  ranges(from = 0): [number, number][] {
    const all = [...(this.mark > 0 ? [[0, this.mark] as [number, number]] : []), ...this.pending.map(([a, b]) => [a, b] as [number, number])];
    return all.filter(([, b]) => b > from).map(([a, b]) => [Math.max(a, from), b]);
  }

  /**
   * Grants the reader's pending ask to free bytes, if any: `record(from)` must first persist a
   * record that claims nothing before `from` (it throws to refuse, and nothing is granted). Returns
   * the bytes from offset 0 granted in all.
   */
  grantRelease(record: (from: number) => void): number {
    const asked = this.releaseAsked;
    if (asked > this.releaseGranted) {
      record(asked);
      Atomics.store(this.slots, SLOT_RELEASE_GRANTED, BigInt(asked));
    }
    return this.releaseGranted;
  }

  /** Marks the ingest failed: readers waiting on it wake up and stop. */
  fail(): void {
    Atomics.store(this.slots, SLOT_STATE, WatermarkState.FAILED);
    Atomics.notify(this.slots, SLOT_MARK);
  }

  private advance(to: number): void {
    let mark = to;
    while (this.pending.length > 0 && this.pending[0]![0] <= mark) {
      mark = Math.max(mark, this.pending.shift()![1]);
    }
    this.mark = mark;
    Atomics.store(this.slots, SLOT_MARK, BigInt(mark));
    Atomics.notify(this.slots, SLOT_MARK);
  }
}
