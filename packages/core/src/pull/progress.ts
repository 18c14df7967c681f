// One layer's progress as `layer` events: a state machine whose states only move forward, even
// though the download and the unpack pass that follows it report in any order.
import type { Digest } from '../oci/digest.js';
import type { LayerState, PullEvent } from './types.js';

/** A 'fetching' event of a layer comes after this many more bytes... */
export const PROGRESS_STEP = 4 * 1024 * 1024;
/** ...or this many milliseconds, whichever comes first, so slow and small layers show movement too. */
export const PROGRESS_INTERVAL_MS = 100;

/** Each state's place in a layer's life; `exists` ends it straight from `waiting`. */
const RANK: Record<LayerState, number> = { waiting: 0, fetching: 1, extracting: 2, verifying: 3, committed: 4, exists: 4 };

/**
 * Reports one layer of a pull. The unpack pass starts while the download still runs, so the two
 * signals `unpackStarted` and `fetchDone` come in either order: the layer is `extracting` once both
 * have come (or, with nothing to download, once the pass starts). A call that would move the layer
 * back, or repeat its state, emits nothing; so does a late `fetched` from a download that is done.
 */
export class LayerProgress {
  private current: LayerState | undefined;
  private downloading = false;
  private downloaded = false;
  private unpacking = false;
  private fetchedBytes = 0;
  private reportedBytes = 0;
  private reportedAt = 0;
  /** Compressed bytes the unpack pass has consumed, once it reported any. */
  private unpackedBytes: number | undefined;
  private reportedUnpacked = 0;

  constructor(
    private readonly layer: { readonly index: number; readonly digest: Digest; readonly size: number },
    private readonly onProgress: ((event: PullEvent) => void) | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The last state reported, or undefined before the first. */
  get state(): LayerState | undefined {
    return this.current;
  }

  /** Waiting: for a download or unpack slot, or for another pull of the same layer. */
  waiting(): void {
    this.move('waiting', 0);
  }

  /** A download starts, with `resumed` bytes already on disk from an earlier pull. */
  fetchStarted(resumed: number): void {
    this.downloading = true;
    this.fetchedBytes = resumed;
    this.reportedBytes = resumed;
    this.reportedAt = this.now();
    this.move('fetching', resumed);
  }

  /** `n` more bytes landed: a `fetching` event every PROGRESS_STEP bytes or PROGRESS_INTERVAL_MS, and at the end. */
  fetched(n: number): void {
    this.fetchedBytes += n;
    if (this.current !== 'fetching') return;
    const now = this.now();
    const { fetchedBytes, reportedBytes } = this;
    if (fetchedBytes - reportedBytes >= PROGRESS_STEP || now - this.reportedAt >= PROGRESS_INTERVAL_MS || fetchedBytes === this.layer.size) {
      this.reportedBytes = fetchedBytes;
      this.reportedAt = now;
      this.emit('fetching', fetchedBytes);
    }
  }

  /** Every byte of the blob is on disk. */
  fetchDone(): void {
    this.downloaded = true;
    if (this.unpacking) this.move('extracting', this.layer.size);
  }

  /** The unpack pass has a slot and starts (possibly while the download runs). */
  unpackStarted(): void {
    this.unpacking = true;
    this.unpackedBytes ??= 0;
    if (!this.downloading || this.downloaded) this.move('extracting', this.layer.size);
  }

  /**
   * The unpack pass has consumed `total` compressed bytes of the blob. Once the layer is
   * `extracting`, an `extracting` event carries it every PROGRESS_STEP bytes or
   * PROGRESS_INTERVAL_MS, and at the end; before that (the pass follows a running download, whose
   * bytes are the news) it is only kept for the first `extracting` event.
   */
  unpackProgress(total: number): void {
    if (total <= (this.unpackedBytes ?? -1)) return;
    this.unpackedBytes = total;
    if (this.current !== 'extracting') return;
    const now = this.now();
    if (total - this.reportedUnpacked >= PROGRESS_STEP || now - this.reportedAt >= PROGRESS_INTERVAL_MS || total === this.layer.size) {
      this.reportedAt = now;
      this.emit('extracting', this.layer.size);
    }
  }

  /** The pass is over: both digests are checked and the snapshot committed. */
  verifying(): void {
    this.move('verifying', this.layer.size);
  }

  /** The snapshot is committed. */
  committed(): void {
    this.move('committed', this.layer.size);
  }

  /** The snapshot was already in the store. */
  exists(): void {
    this.move('exists', this.layer.size);
  }

  private move(state: LayerState, bytes: number): void {
    if (this.current !== undefined && RANK[state] <= RANK[this.current]) return;
    this.current = state;
    this.emit(state, bytes);
  }

  private emit(state: LayerState, bytes: number): void {
    const { index, digest, size } = this.layer;
    if (state === 'extracting' && this.unpackedBytes !== undefined) {
      this.reportedUnpacked = this.unpackedBytes;
      this.reportedAt = this.now();
      this.onProgress?.({ type: 'layer', index, digest, state, bytes, total: size, unpacked: this.unpackedBytes });
      return;
    }
    this.onProgress?.({ type: 'layer', index, digest, state, bytes, total: size });
  }
}
