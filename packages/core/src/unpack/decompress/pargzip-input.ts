// The compressed bytes of one parallel gunzip, as written to it and kept until no job will read them again.
import { nativeInflate } from './pargzip-job.js';

/**
 * Compressed input from stream offset {@link kept} to {@link written}, in the pieces it came in.
 * Jobs copy spans of it into their slots; {@link ready} waits for a span to arrive.
 */
export class CompressedInput {
  /** Stream offset of the first byte kept. */
  kept = 0;
  /** Bytes written so far. */
  written = 0;
  /** No more bytes will come. */
  ended = false;
  private readonly pieces: Buffer[] = [];
  private readonly waiters: { end: number; resolve: () => void }[] = [];
  private closed = false;

  /**
   * `onWait`: someone waits for bytes not written yet (the writer must not be held then);
   * `onForget`: a piece written is kept no more (its bytes were copied wherever they were needed;
   * pieces kept when the input is closed are not told).
   */
  constructor(
    private readonly onWait: () => void,
    private readonly onForget?: (piece: Buffer) => void,
  ) {}

  /** Bytes kept. */
  get buffered(): number {
    return this.written - this.kept;
  }

  /** Whether someone waits for bytes. */
  get waiting(): boolean {
    return this.waiters.length > 0;
  }

  append(chunk: Buffer): void {
    if (chunk.length > 0) {
      this.pieces.push(chunk);
      this.written += chunk.length;
    }
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Resolves once bytes up to `end` were written, or the input ended, or it was closed. */
  ready(end: number): Promise<void> {
    if (this.ended || this.written >= end || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push({ end, resolve });
      this.onWait();
    });
  }

  /** Copies bytes [from, to) into `out`; returns how many it had (fewer when some are no longer kept). */
  copy(out: Uint8Array, from: number, to: number): number {
    const native = nativeInflate()!;
    let at = this.kept;
    let o = 0;
    for (const p of this.pieces) {
      const pEnd = at + p.length;
      if (pEnd > from && at < to) {
        const s = Math.max(from, at) - at;
        const e = Math.min(to, pEnd) - at;
        native.copyBytes(out, o, p, s, e - s);
        o += e - s;
      }
      at = pEnd;
      if (at >= to) break;
    }
    return o;
  }

  /** Forgets whole pieces below `low`. */
  forget(low: number): void {
    while (this.pieces.length > 0 && this.kept + this.pieces[0]!.length <= low) {
      const piece = this.pieces.shift()!;
      this.kept += piece.length;
      this.onForget?.(piece);
    }
  }

  /** Lets every waiter go, now and from now on. */
  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.resolve();
  }

  /** Forgets every piece (the decode is over). */
  clear(): void {
    for (const piece of this.pieces.splice(0)) this.onForget?.(piece);
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
}
