// The output side of the parallel gunzip: a job's symbols and bytes made plain, the 32 KiB window, each member's CRC-32 and length.
import zlib from 'node:zlib';
import { FastpullError } from '../../errors.js';
import { nativeInflate, WINDOW, type JobResult } from './pargzip-job.js';
import type { ParallelGunzipStats } from './pargzip-plan.js';
import type { GzipCheckpoint } from './ztoc.js';

/** Size of the output buffers the stream emits. */
export const OUTPUT_PIECE = 256 * 1024;

/**
 * The output so far, as far as the next job needs it: the current member's last 32 KiB (its window),
 * its length and its running CRC-32. Jobs are taken strictly in stream order.
 */
export class MemberOutput {
  /** The last 32 KiB of output; of the current member only its last {@link memberOut} bytes count. */
  private window: Uint8Array = new Uint8Array(WINDOW);
  /** Bytes of the current member so far. */
  private memberOut = 0;
  /** CRC-32 of the current member so far. */
  private crc = 0;
  private readonly native = nativeInflate()!;

  constructor(private readonly stats: ParallelGunzipStats) {}

  /** The current member's bytes before the next job (its last 32 KiB at most): that job then writes plain bytes. */
  knownWindow(): Uint8Array {
    return this.window.slice(WINDOW - Math.min(this.memberOut, WINDOW));
  }

  /** Whether the output so far ends where `cp` says and with its window. */
  fits(cp: GzipCheckpoint): boolean {
    const known = Math.min(this.memberOut, WINDOW);
    return (
      cp.out === this.memberOut &&
      cp.window.length === known &&
      Buffer.from(cp.window.buffer, cp.window.byteOffset, known).equals(Buffer.from(this.window.buffer, this.window.byteOffset + WINDOW - known, known))
    );
  }

  /**
   * Takes the next job's output: markers resolved against the window, bytes copied out in pieces of
   * at most 256 KiB (as zlib's output comes, so the job's slot can be used again), every member that
   * ended in it checked. Each piece goes, from its start, into a buffer from `buffer(length)` (at
   * least that long; default: a new one of that length), one buffer per piece, in order.
   * INVALID_LAYER for a distance before the member, a wrong CRC-32 or length.
   */
  take(r: JobResult, buffer: (length: number) => Buffer = (length) => Buffer.allocUnsafe(length)): Buffer[] {
    const native = this.native;
    const parts: Buffer[] = [];
    const n16 = r.out16.length;
    if (n16 > 0) {
      this.stats.markedBytes += n16;
      // A marker names a place in the window before the job, never in the job's own output: the
      // symbols resolve piece by piece against the same window.
      const windowStart = WINDOW - Math.min(this.memberOut, WINDOW);
      for (let at = 0; at < n16; at += OUTPUT_PIECE) {
        const len = Math.min(OUTPUT_PIECE, n16 - at);
        const piece = buffer(len).subarray(0, len);
        if (native.resolveMarkers(r.out16.subarray(at, at + len), len, this.window, windowStart, piece) >= 0)
          throw corrupt('invalid distance too far back', r.startKey);
        this.crc = zlib.crc32(piece, this.crc);
        parts.push(piece);
      }
      this.memberOut += n16;
    }
    for (let at = 0; at < r.out8.length; at += OUTPUT_PIECE) {
      const len = Math.min(OUTPUT_PIECE, r.out8.length - at);
      const piece = buffer(len).subarray(0, len);
      native.copyBytes(piece, 0, r.out8, at, len);
      parts.push(piece);
    }
    const total = n16 + r.out8.length;
    // The decode threads computed the CRC of the byte part per member segment; combine them.
    let segStart = n16;
    for (let m = 0; m < r.members.length; m += 3) {
      const endAt = r.members[m]!;
      this.crc = native.crc32Combine(this.crc, r.crcs[m / 3]!, endAt - segStart);
      this.memberOut += endAt - segStart;
      if (this.crc !== r.members[m + 1]) throw corrupt('incorrect data check', r.end.bit);
      if (this.memberOut % 2 ** 32 !== r.members[m + 2]) throw corrupt('incorrect length check', r.end.bit);
      this.crc = 0;
      this.memberOut = 0;
      segStart = endAt;
    }
    this.crc = native.crc32Combine(this.crc, r.crcs[r.members.length / 3]!, total - segStart);
    this.memberOut += total - segStart;
    this.window = slideWindow(this.window, parts);
    return parts;
  }
}

/** INVALID_LAYER for a corrupt stream, naming the compressed byte near `bit`. */
export function corrupt(reason: string, bit: number): FastpullError {
  return new FastpullError('INVALID_LAYER', `corrupt gzip stream: ${reason} (near compressed byte ${Math.floor(bit / 8)})`, {
    details: { compressedOffset: Math.floor(bit / 8) },
  });
}

/**
 * The last 32 KiB of a job's output (less where its current member began later), when every one of those
 * bytes is known without the window before the job: after a member start, or once its byte part began
 * (the decoder writes bytes only after 32 KiB of symbols without a marker). Else null.
 */
export function knownTail(r: Pick<JobResult, 'out16' | 'out8' | 'members'>): Uint8Array | null {
  const n16 = r.out16.length;
  const n8 = r.out8.length;
  if (r.members.length > 0) {
    // The last member ended in this job: its successor's bytes are all in the byte part.
    const start = r.members[r.members.length - 3]! - n16;
    return r.out8.slice(Math.max(start, n8 - WINDOW));
  }
  if (n8 >= WINDOW) return r.out8.slice(n8 - WINDOW);
  if (n8 === 0 || n16 < WINDOW - n8) return null;
  const tail = new Uint8Array(WINDOW);
  const from = n16 - (WINDOW - n8);
  for (let i = from; i < n16; i++) {
    const v = r.out16[i]!;
    if (v > 255) return null;
    tail[i - from] = v;
  }
  tail.set(r.out8, WINDOW - n8);
  return tail;
}

/** The last 32 KiB of `window` followed by `parts`. */
export function slideWindow(window: Uint8Array, parts: readonly Buffer[]): Uint8Array {
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
