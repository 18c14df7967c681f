// The output order of the parallel gunzip: where decoding stands, and which job continues it (a guess, a continuation, or an exact decode).
import { FastpullError } from '../../errors.js';
import { ERROR_TEXT, St, Status, type JobResult, type JobStart } from './pargzip-job.js';
import type { Guesses } from './pargzip-guesses.js';
import { corrupt, type MemberOutput } from './pargzip-output.js';
import type { DecodeContext } from './pargzip-plan.js';

/** A job that continues the output, and the stop it decoded towards. */
export interface NextJob {
  r: JobResult;
  stop: number;
}

/**
 * The exact decoder state the output has reached, and the choice of the job that continues from it,
 * in this order:
 * 1. At a block boundary, the next chunk's guess, when it started exactly here (same bit, same kind of
 *    boundary, or a checkpoint whose window is the output's): deflate is deterministic, so it then
 *    decoded the real stream. A guess that started before here, or found no start, is dropped.
 * 2. Mid-block (after a job stopped at its cap or data end), the eager continuation from this exact
 *    state, when one was launched.
 * 3. Else an exact job from here, with the known window, urgent in the pool, up to the next guess's
 *    start (or the next chunk's, if its guess is not known yet).
 */
export class DecodeCursor {
  private at: JobStart = { kind: St.Member, bit: 0, btype: 0, bfinal: 0, left: 0, hdr: null, hdrBit: 0 };
  /** The boundary key of {@link at} when it is a boundary (after a Stop), else undefined (mid-block). */
  private key: number | undefined = 0;
  /** The next chunk whose guess may continue the output. */
  private k = 1;
  /** The stop the next exact job or continuation decodes towards. */
  private stopKey: number;
  /** Times the span of an exact job that needed more input was doubled in a row. */
  private growth = 0;

  constructor(
    private readonly ctx: DecodeContext,
    private readonly guesses: Guesses,
    private readonly output: MemberOutput,
  ) {
    this.stopKey = 8 * ctx.plan.chunk;
  }

  /** The compressed byte the cursor stands in: no later job reads input below it. */
  get byte(): number {
    return Math.floor(this.at.bit / 8);
  }

  /** The job that continues the output; undefined when the stream stopped meanwhile. */
  async next(): Promise<NextJob | undefined> {
    if (this.key !== undefined) {
      const guess = await this.fromGuess();
      if (guess) return guess;
    } else {
      const eager = this.guesses.takeContinuation(this.at, this.stopKey);
      if (eager) return { r: await eager, stop: this.stopKey };
    }
    return this.exact();
  }

  /** Refuses a job that failed or made no progress. */
  check(r: JobResult): void {
    if (r.status === Status.Error) throw corrupt(ERROR_TEXT[r.error] ?? `error ${r.error}`, r.end.bit);
    const stuck = r.out16.length + r.out8.length === 0 && r.end.kind === this.at.kind && r.end.bit === this.at.bit;
    if ((r.status === Status.Stop && r.key === this.key && stuck) || (r.status === Status.Cap && stuck)) {
      throw new FastpullError('INTERNAL', `parallel gunzip: no progress at compressed bit ${this.at.bit}`);
    }
  }

  /** Moves to where `job` ended; false at the end of the stream. */
  advance({ r, stop }: NextJob): boolean {
    switch (r.status) {
      case Status.End:
        return false;
      case Status.Stop:
        this.at = { kind: r.end.kind, bit: r.end.bit, btype: r.end.btype, bfinal: r.end.bfinal, left: 0, hdr: null, hdrBit: 0 };
        this.key = r.key;
        break;
      default:
        // Cap or Need: go on from the exact state, towards the same stop.
        this.at = r.end;
        this.key = undefined;
    }
    this.stopKey = stop;
    return true;
  }

  /**
   * At a boundary: chunk k's guess when it starts here. Runs up to chunk k's start without waiting for
   * its guess; once there, the guess decides (and sets the stop of an exact job to its start).
   */
  private async fromGuess(): Promise<NextJob | undefined> {
    const { ctx, guesses } = this;
    const { plan, input, stats } = ctx;
    const key = this.key!;
    this.stopKey = Infinity;
    for (;;) {
      const kBit = plan.bit(this.k);
      if (key < kBit && !(input.ended && Math.floor(kBit / 8) >= input.written)) {
        this.stopKey = kBit;
        return undefined;
      }
      const s = await guesses.guessFor(this.k);
      if (s === undefined) return undefined;
      const cp = plan.checkpoint(this.k);
      const fits = cp ? this.at.kind === St.Block && this.output.fits(cp) : matches(s, this.at);
      if (s.status !== Status.NoStart && s.status !== Status.Error && s.startKey === key && fits) {
        stats.guessesUsed++;
        if (cp) stats.checkpointsUsed++;
        guesses.used(this.k++);
        return { r: s, stop: plan.bit(this.k) };
      }
      if (s.status === Status.NoStart || s.status === Status.Error || s.startKey <= key) {
        // A false boundary, or the right place in a state the guess did not assume (a last block),
        // or a checkpoint that does not fit.
        stats.guessesDropped++;
        if (cp) stats.checkpointsDropped++;
        ctx.pool.release(s);
        guesses.dropped(this.k++);
        continue;
      }
      this.stopKey = s.startKey;
      return undefined;
    }
  }

  /** An exact job from here: the window is known (all output so far is resolved), so it writes plain bytes. */
  private async exact(): Promise<NextJob | undefined> {
    const { ctx } = this;
    const { input } = ctx;
    const from = this.byte;
    const stop = this.stopKey;
    const want = Math.max(stop === Infinity ? Infinity : Math.ceil(stop / 8) + ctx.overrun, from + ctx.plan.chunk * 2 ** this.growth);
    await input.ready(want);
    if (ctx.stopped()) return undefined;
    const end = Math.min(input.written, want);
    ctx.stats.exactJobs++;
    const { data, lease } = ctx.copyInput(from, end);
    const r = await ctx.pool.run(
      { ...this.at, data, dataOffset: from, final: input.ended && end === input.written, stopKey: stop, cap: ctx.cap, window: this.output.knownWindow() },
      lease,
      true,
      ctx.owner,
    );
    ctx.stats.exactBytes += r.out16.length + r.out8.length;
    const progressed = r.out16.length + r.out8.length > 0 || r.end.bit !== this.at.bit || r.end.kind !== this.at.kind;
    if (r.status === Status.Need && !progressed) {
      if (input.ended && end === input.written) throw corrupt('unexpected end of file', this.at.bit);
      this.growth++;
    } else {
      this.growth = 0;
    }
    return { r, stop };
  }
}

/** Whether a search's start is the boundary the cursor stands on. */
function matches(s: JobResult, at: JobStart): boolean {
  if (s.startKind === St.Member) return at.kind === St.Member;
  if (at.kind !== St.Block || at.bfinal !== 0) return false;
  return s.startKind === St.Stored ? at.btype === 0 : at.btype === 2;
}
