// What the parts of one parallel gunzip share: where its chunks start, its settings and services, and its counters.
import type { CompressedInput } from './pargzip-input.js';
import type { InflatePool, SlotLease } from './pargzip-pool.js';
import type { GzipCheckpoint } from './ztoc.js';

/** Counters of one parallel decode, for benchmarks and tests. */
export interface ParallelGunzipStats {
  /** Jobs whose guessed start was confirmed and used. */
  guessesUsed: number;
  /** Jobs whose guess was dropped (false boundary, no boundary, or no match). */
  guessesDropped: number;
  /** Jobs run from a known state (the first, continuations, and the spans after a dropped guess). */
  exactJobs: number;
  /**
   * Output bytes those exact jobs decoded: the output waits for each of them in turn, so this part
   * of the stream is decoded one job after another, however many threads the pool has.
   */
  exactBytes: number;
  /** Output bytes that were written as 16-bit symbols (markers possible) and resolved afterwards. */
  markedBytes: number;
  /** Continuations of guesses launched before the output reached them. */
  eagerJobs: number;
  /** Of those, the ones that started with a known window (no markers): the guess's last 32 KiB were all bytes. */
  eagerKnownWindow: number;
  /** Chunks that started at a given checkpoint and were used (they count as guesses used too). */
  checkpointsUsed: number;
  /** Checkpoints whose window or place did not fit the stream. */
  checkpointsDropped: number;
}

/**
 * Where chunks start. Chunk 0 is the stream's start; chunk k >= 1 starts at the k-th checkpoint, or,
 * past the last one, every `chunk` compressed bytes after it.
 */
export class ChunkPlan {
  private readonly lastCheckpointByte: number;

  /** `checkpoints`: in order, past the start of the stream. */
  constructor(
    readonly checkpoints: readonly GzipCheckpoint[],
    readonly chunk: number,
  ) {
    this.lastCheckpointByte = checkpoints.length > 0 ? Math.floor(checkpoints[checkpoints.length - 1]!.bit / 8) : 0;
  }

  /** The compressed bit where chunk k (>= 1) starts. */
  bit(k: number): number {
    const cps = this.checkpoints;
    return k <= cps.length ? cps[k - 1]!.bit : 8 * (this.lastCheckpointByte + (k - cps.length) * this.chunk);
  }

  /** The checkpoint chunk k starts at, if it starts at one. */
  checkpoint(k: number): GzipCheckpoint | undefined {
    return k <= this.checkpoints.length ? this.checkpoints[k - 1] : undefined;
  }
}

/** One stream's decode: its settings, the services its parts use, and its counters. */
export interface DecodeContext {
  readonly pool: InflatePool;
  /** Owns this stream's jobs and slots in the pool. */
  readonly owner: object;
  readonly input: CompressedInput;
  readonly plan: ChunkPlan;
  readonly stats: ParallelGunzipStats;
  /** Most symbols per job. */
  readonly cap: number;
  /** Bytes past a chunk's end a job gets, for the block that crosses it. */
  readonly overrun: number;
  /** Jobs worth running ahead of the output at once: the pool's threads, as far as its budget allows. */
  readonly ahead: number;
  /** Whether the stream stopped (destroyed, failed, or done): every part then winds down. */
  stopped(): boolean;
  /** A slot for a job, holding a copy of input bytes [from, to) (past the budget if need be: for the job the output waits for). */
  copyInput(from: number, to: number): { data: Uint8Array; lease: SlotLease };
  /** Like copyInput, but undefined when the budget has no room for the slot (for speculative jobs). */
  tryCopyInput(from: number, to: number): { data: Uint8Array; lease: SlotLease } | undefined;
}
