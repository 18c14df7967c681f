// The download step of a layer: its blob comes from the content store when it is there, else it is
// fetched into an ingest with ranged requests while the unpacker follows the bytes that landed.
import { setMaxListeners } from 'node:events';
import type { Ingest } from '../content/store.js';
import { Watermark } from '../content/watermark.js';
import { throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import type { ImageLayer } from '../images/store.js';
import type { RegistryClient } from '../registry/client.js';
import { DEFAULT_CHUNK_SIZE, fetchBlob } from '../registry/fetch.js';
import type { ByteThrottle } from '../registry/ratelimit.js';
import type { FetchScheduler } from '../registry/scheduler.js';
import type { Store } from '../store/root.js';
import type { BlobReleaseOptions } from '../unpack/layer.js';
import { sleep } from '../util/retry.js';
import type { Tuning } from '../tuning.js';
import { hasBlob } from './plan.js';
import type { LayerProgress } from './progress.js';
import type { PullTicket } from './priority.js';
import type { PullOptions } from './types.js';
import type { ProgressWatch } from './watchdog.js';

/**
 * Bytes the unpacker frees at a time, behind what it hashed, of a blob that is dropped after the
 * commit: the page cache's dirty pages of the blob then go without ever being written to disk. Each
 * step costs a save of the resume record and one fallocate(2).
 */
export const RELEASE_STEP = 8 * 1024 * 1024;
/**
 * How far the download must be ahead of the unpacker for it to free bytes: less, and the pull
 * waits on the network (freeing gains nothing there, and a stopped pull keeps every byte).
 */
export const RELEASE_LEAD = 4 * RELEASE_STEP;
/** How often the unpacker's asks to free bytes are granted. */
const RELEASE_GRANT_MS = 50;
/**
 * How far past the unpack pass a blob that it frees behind it is downloaded (see
 * LayerDownload.pace); a pull's Tuning.downloadLead sets another (0: no limit, for measuring).
 * 16 ranges of the default 16 MiB: as many as run at once, so a network with long round trips keeps
 * every connection busy, while the device writes less of a blob that is freed soon after
 * (docs/architecture.md, "Figures behind the defaults").
 */
export const DOWNLOAD_LEAD = 256 * 1024 * 1024;
/** How often a range held back looks again. */
const PACE_TICK_MS = 10;

/** What a layer's download needs from its pull. */
export interface DownloadContext {
  readonly store: Store;
  readonly client: RegistryClient;
  readonly ref: Reference;
  readonly scheduler: FetchScheduler;
  /** The pull's signal: it stops every download of the pull. */
  readonly signal: AbortSignal;
  /** The pull's no-progress timeout, fed by every download. */
  readonly watch: ProgressWatch;
  /** The pull's priority: where its requests queue among other pulls'. */
  readonly ticket: PullTicket;
  /** The pull's network rate limit; absent: none. */
  readonly throttle?: ByteThrottle;
  readonly options: Pick<
    PullOptions,
    'chunkSize' | 'stragglerFloor' | 'stragglerWindowMs' | 'stallTimeoutMs' | 'onRetry' | 'onStraggler' | 'observer' | 'tuning'
  >;
}

/**
 * One layer's blob while it is unpacked. Lifecycle: `start` opens it (a committed blob, or an
 * ingest, resumed when a dead pull left one, with its download running); then `keep` (commit the
 * verified ingest as a blob) and `discard` (drop the ingest once the snapshot is committed) as the
 * commit step decides; `close` always, last: it stops the download, waits for it, and puts away
 * an ingest still open (kept for a resume when the pull was stopped from outside, else dropped).
 */
export class LayerDownload {
  private ingest: Ingest | undefined;
  private readonly stop = new AbortController();
  private granting: NodeJS.Timeout | undefined;
  /** Whether the download waits for the unpack pass (see {@link pace}); undefined until {@link releasing} decides. */
  private paced: boolean | undefined;
  /** The pull's measuring knobs (download lead, blob release). */
  private tuning: Tuning | undefined;
  /** Start offsets of the ranges {@link pace} holds back now. */
  private readonly held = new Set<number>();

  private constructor(
    private readonly store: Store,
    private readonly layer: ImageLayer,
    /** The file the unpacker reads: the committed blob, or the ingest's data file. */
    readonly blobPath: string,
    /** How much of `blobPath` has landed without a gap. */
    readonly watermark: Watermark,
    ingest: Ingest | undefined,
  ) {
    this.ingest = ingest;
    this.fromStore = ingest === undefined;
  }

  /** True when the blob came from the content store (nothing is downloaded). */
  readonly fromStore: boolean;

  /**
   * The lowest start offset of a range held back for the unpack pass now, or undefined when none is
   * (what a trace or a test reads to tell a paced download from a slow one).
   */
  get heldFrom(): number | undefined {
    return this.held.size === 0 ? undefined : Math.min(...this.held);
  }

  /** Settles with the download's wall time in ms (0 when the blob was in the store), or its error. */
  done: Promise<number> = Promise.resolve(0);

  /** Opens the layer's blob and, when it is not in the store, starts downloading it; `index`: its position, for the observer. */
  static async start(ctx: DownloadContext, desc: Descriptor, layer: ImageLayer, progress: LayerProgress, index = 0): Promise<LayerDownload> {
    const { store } = ctx;
    if (await hasBlob(store, layer)) return new LayerDownload(store, layer, store.content.blobPath(layer.digest), Watermark.complete(layer.size), undefined);
    const ingest = await store.content.newIngest(desc);
    const d = new LayerDownload(store, layer, ingest.path, ingest.watermark, ingest);
    d.tuning = ctx.options.tuning;
    d.done = d.fetch(ctx, desc, ingest, progress, index);
    // Awaited by the unpack step (or by close): a failure while the layer is busy elsewhere is not
    // an unhandled rejection.
    d.done.catch(() => undefined);
    return d;
  }

  private async fetch(ctx: DownloadContext, desc: Descriptor, ingest: Ingest, progress: LayerProgress, index: number): Promise<number> {
    const { options } = ctx;
    const { observer } = options;
    const resumed = ingest.resumed.reduce((n, [a, b]) => n + b - a, 0);
    // Timed from before the `fetching` event, so that a span drawn from that event for fetchMs
    // holds every request of the download, whatever the event's listeners take.
    const t0 = performance.now();
    progress.fetchStarted(resumed);
    if (resumed > 0) observer?.bytes?.(index, resumed, true);
    const onRange = observer?.range;
    const observed = observer?.bytes;
    const ended = ctx.watch.start();
    const signal = AbortSignal.any([ctx.signal, this.stop.signal]);
    // Every range held back by pace() waits on it: as many listeners as ranges in flight, not a leak.
    setMaxListeners(0, signal);
    try {
      await fetchBlob(ctx.client, ctx.ref, desc, ingest, {
        have: ingest.resumed,
        chunkSize: options.chunkSize ?? DEFAULT_CHUNK_SIZE,
        ...(options.stragglerFloor !== undefined ? { stragglerFloor: options.stragglerFloor } : {}),
        ...(options.stragglerWindowMs !== undefined ? { stragglerWindowMs: options.stragglerWindowMs } : {}),
        ...(options.stallTimeoutMs !== undefined ? { stallTimeoutMs: options.stallTimeoutMs } : {}),
        scheduler: ctx.scheduler,
        rank: ctx.ticket,
        ...(ctx.throttle ? { throttle: ctx.throttle } : {}),
        signal,
        ...(options.onRetry ? { onRetry: options.onRetry } : {}),
        ...(options.onStraggler ? { onStraggler: options.onStraggler } : {}),
        ...(onRange ? { onRange: (r) => onRange(index, r) } : {}),
        pace: (start) => this.pace(start, signal),
        onBytes: (n) => {
          ctx.watch.bytes();
          progress.fetched(n);
          observed?.(index, n, false);
        },
      });
    } catch (e) {
      // Wakes the unpacker that follows this blob, so it stops too.
      this.watermark.fail();
      throw e;
    } finally {
      ended();
    }
    progress.fetchDone();
    return performance.now() - t0;
  }

  /**
   * Holds a range of the blob back while it starts more than {@link DOWNLOAD_LEAD} past what the
   * unpack pass has read, when that pass frees the blob behind it (see {@link releasing}); resolves
   * at once otherwise, or once the pass is done freeing. Bytes downloaded far ahead of the pass sit
   * dirty in the page cache until a flush of the store's filesystem (each snapshot's, or the
   * kernel's own when they pile up) writes them to the disk, only for the pass to free them soon
   * after: the disk then writes the blob as well as the layer's files.
   */
  private pace(start: number, signal: AbortSignal): Promise<void> | undefined {
    const lead = this.tuning?.downloadLead ?? DOWNLOAD_LEAD;
    if (this.paced === false || lead === 0 || start - this.watermark.reader <= lead) return undefined;
    return (async () => {
      this.held.add(start);
      try {
        while (this.paced !== false && start - this.watermark.reader > lead) {
          throwIfAborted(signal, 'pacing the download');
          await sleep(PACE_TICK_MS, signal);
        }
      } finally {
        this.held.delete(start);
      }
    })();
  }

  /** True while an ingest is open (it is dropped on commit, or put away by close). */
  get downloading(): boolean {
    return this.ingest !== undefined;
  }

  /**
   * How the unpacker may free the blob's bytes it has hashed (UnpackLayerOptions follow.release),
   * or undefined: only a download's own ingest, never kept, is freed, and the pull's tuning may
   * keep every byte (Tuning.blobRelease, to measure the difference). Asking for it starts granting
   * the unpacker's asks until the ingest is closed.
   */
  releasing(keepBlob: boolean): BlobReleaseOptions | undefined {
    const ingest = this.ingest;
    if (!ingest || keepBlob || this.tuning?.blobRelease === false) {
      this.paced = false;
      return undefined;
    }
    // Each grant saves the resume record first: a few small writes a second at most.
    this.granting ??= setInterval(() => ingest.grantRelease(), RELEASE_GRANT_MS).unref();
    this.paced = true;
    return { step: RELEASE_STEP, lead: RELEASE_LEAD };
  }

  private takeIngest(): Ingest | undefined {
    this.paced = false;
    clearInterval(this.granting);
    this.granting = undefined;
    const ingest = this.ingest;
    this.ingest = undefined;
    return ingest;
  }

  /** Commits the downloaded blob (verified: `digest` is what the unpack pass computed) to the content store. */
  async keep(digest: Digest): Promise<void> {
    const ingest = this.takeIngest();
    if (!ingest) return;
    await this.store.content.commit(ingest, digest);
  }

  /** Drops the ingest: the layer's snapshot is committed and the blob is not kept. */
  async discard(): Promise<void> {
    const ingest = this.takeIngest();
    if (!ingest) return;
    await this.store.content.abort(ingest);
  }

  /**
   * The blob failed to verify. A committed blob that no longer hashes right was damaged on disk:
   * it is removed so the next pull fetches a good copy instead of failing on it forever. (A bad
   * download is dropped by `close`.)
   */
  async dropDamaged(): Promise<void> {
    if (this.fromStore) await this.store.content.delete(this.layer.digest);
  }

  /**
   * Stops the download and waits until no write can land any more; an ingest still open is then
   * suspended for the next pull to resume when `stoppedFromOutside` (the caller aborted, another
   * layer failed, no progress), else dropped (this layer failed itself).
   */
  async close(stoppedFromOutside: boolean): Promise<void> {
    this.stop.abort();
    await this.done.catch(() => undefined);
    const ingest = this.takeIngest();
    if (ingest) await (stoppedFromOutside ? this.store.content.suspend(ingest) : this.store.content.abort(ingest));
  }
}
