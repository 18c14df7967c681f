// Freeing a followed blob's bytes behind the unpack pass, so that a blob dropped after its layer's
// commit is mostly never written to disk.
import { FastpullError } from '../errors.js';
import { READER_DONE, type WatermarkView } from '../content/watermark.js';
import type { PunchHole } from '../native/addon.js';

/**
 * How a pass frees the bytes of a blob it follows: each time another `step` bytes were hashed it
 * asks the watermark's writer to free them, and punches a hole over what the writer has granted
 * (see Watermark: the writer's resume record stops claiming them first). It frees only while the
 * download is at least `lead` bytes ahead of the pass, or complete: a pass that waits on the
 * network would gain nothing from it (the disk keeps up), and a stopped pull then resumes every
 * byte it fetched. Where the download runs ahead, the pass is what the pull waits for, its disk
 * writes of the blob are the cost, and fetching the freed bytes again after a stop is quick.
 */
export interface BlobReleaseOptions {
  /** Bytes freed at a time: a positive multiple of 4096. */
  step: number;
  /** Bytes the download must be ahead of the pass (unless complete) for it to free any; default 4 steps. */
  lead?: number;
}

/** Holes are punched in whole filesystem blocks: release steps and offsets are multiples of this. */
const RELEASE_ALIGN = 4096;

/**
 * Frees a followed blob's bytes behind the pass, as {@link BlobReleaseOptions} says. Bytes are freed
 * only once the blob's hash holds them, so the hash can still be finished from the rest of the file.
 * One hole is punched at a time, on a pool thread: the pass goes on meanwhile (on a filesystem that
 * discards freed blocks at once, a punch over bytes already written back waits on the device). The
 * first punch the filesystem refuses ends the freeing; the bytes stay, which costs only disk writes.
 */
export class BlobRelease {
  /** Bytes from offset 0 freed. */
  released = 0;

  /** Bytes from offset 0 the writer granted to free (freed or not yet). */
  get granted(): number {
    return this.view.releaseGranted;
  }
  private asked = 0;
  /** Bytes from offset 0 the blob's hash holds, whole blocks. */
  private hashedEnd = 0;
  private off = false;
  private punching: Promise<void> | undefined;
  private readonly step: number;
  private readonly lead: number;

  constructor(
    private readonly fd: number,
    private readonly view: WatermarkView,
    private readonly size: number,
    options: BlobReleaseOptions,
    private readonly punch: PunchHole,
  ) {
    this.step = options.step;
    this.lead = options.lead ?? 4 * options.step;
  }

  /** The blob's hash holds (hashed, or queued to be) the first `hashed` bytes. */
  hashed(hashed: number): void {
    if (this.off) return;
    this.view.setReader(hashed);
    const end = (this.hashedEnd = hashed - (hashed % RELEASE_ALIGN));
    const landed = this.view.value;
    if (end - this.asked >= this.step && (landed >= this.size || landed - hashed >= this.lead)) this.view.askRelease((this.asked = end));
    this.next();
  }

  /** Punches over what was granted and not freed yet, a step or more, unless a punch runs. */
  private next(): void {
    if (this.off || this.punching !== undefined) return;
    const granted = Math.min(this.view.releaseGranted, this.hashedEnd);
    if (granted - this.released < this.step) return;
    // The download writes off its thread meanwhile: its writes to this file would wait for the punch.
    this.view.setPunching(true);
    this.punching = this.punch(this.fd, this.released, granted - this.released)
      .then(
        () => void (this.released = granted),
        () => {
          this.off = true;
          this.view.setReader(READER_DONE);
        },
      )
      .finally(() => {
        this.view.setPunching(false);
        this.punching = undefined;
        this.next();
      });
  }

  /** Starts no more punches; resolves once none runs. */
  async stop(): Promise<void> {
    this.off = true;
    this.view.setReader(READER_DONE);
    while (this.punching !== undefined) await this.punching;
  }
}

/** Throws INVALID_ARGUMENT unless `options` (when given) has a step and a lead {@link BlobRelease} can use. */
export function checkReleaseOptions(options: BlobReleaseOptions | undefined, what: string): void {
  if (options === undefined) return;
  const { step, lead = 0 } = options;
  if (!Number.isSafeInteger(step) || step <= 0 || step % RELEASE_ALIGN !== 0 || !Number.isSafeInteger(lead) || lead < 0) {
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `${what}: release step ${step}, lead ${lead}: want a positive multiple of ${RELEASE_ALIGN} and a lead of 0 or more`,
    );
  }
}
