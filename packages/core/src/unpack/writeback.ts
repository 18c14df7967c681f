// Starts the write-back of extracted files' pages while they are written, so that the flush before
// the snapshot's commit (snapshots/durable.ts) finds them written, or on their way.
import { nativeSync, type NativeSync } from './native.js';

/**
 * What the extractor starts. `large`: sync_file_range of each 8 MiB step of the files that reach one
 * (a small file started alone becomes a tiny request of its own, which measured slower than leaving
 * it to the final flush, which writes them in bulk). `all`: sync_file_range of every file as it is
 * closed. `progressive`: `large`, plus a syncfs of the filesystem, not waited for, each time the
 * layer has written another 32 MiB (at most one at a time), so that trees of small files are written
 * while extraction goes on.
 */
export type WritebackMode = 'large' | 'all' | 'progressive';

/**
 * Bytes of a large file written between two write-back starts: enough for large requests, small
 * enough that the device starts on a large file long before its last byte.
 */
export const WRITEBACK_STEP = 8 * 1024 * 1024;
/** Bytes a layer writes between two background syncfs calls in `progressive` mode. */
export const PROGRESSIVE_STEP = 32 * 1024 * 1024;

/** The write-back of one layer being extracted into `root`. */
export class LayerWriteback {
  private written = 0;
  private flushedAt = 0;
  private inFlight = false;

  private constructor(
    readonly native: NativeSync,
    readonly mode: WritebackMode,
    private readonly root: string,
  ) {}

  /** One for the layer when a mode is given and the addon has the calls; else undefined. */
  static open(mode: WritebackMode | undefined, root: string): LayerWriteback | undefined {
    const native = mode === undefined ? undefined : nativeSync();
    return native === undefined || mode === undefined ? undefined : new LayerWriteback(native, mode, root);
  }

  /** The write-back of a file of this layer being written through `fd`. */
  file(fd: number): FileWriteback {
    return new FileWriteback(this, fd);
  }

  /** `n` more bytes of the layer were written. */
  wrote(n: number): void {
    this.written += n;
    if (this.mode !== 'progressive' || this.inFlight || this.written - this.flushedAt < PROGRESSIVE_STEP) return;
    this.flushedAt = this.written;
    this.inFlight = true;
    // A hint only: the flush before the commit waits for everything and reports what fails.
    this.native.syncfs(this.root).then(
      () => void (this.inFlight = false),
      () => void (this.inFlight = false),
    );
  }
}

/** Write-back of one file being written; a hint only: its failures are left for the flush to report. */
export class FileWriteback {
  private started = 0;
  private written = 0;

  constructor(
    private readonly layer: LayerWriteback,
    private readonly fd: number,
  ) {}

  /** Bytes up to `end` are written: starts their write-back once a step's worth has gathered. */
  wrote(end: number): void {
    this.layer.wrote(end - this.written);
    this.written = end;
    if (end - this.started >= WRITEBACK_STEP) this.start(this.started, end - this.started);
  }

  /** The file is complete: starts the write-back of what is not started yet (of a large file only, unless in `all` mode). */
  end(): void {
    if (this.layer.mode === 'all' || this.started > 0) this.start(this.started, 0);
  }

  private start(offset: number, nbytes: number): void {
    try {
      this.layer.native.startWriteback(this.fd, offset, nbytes);
    } catch {
      // The flush before the commit writes these pages anyway, and reports what fails.
    }
    if (nbytes > 0) this.started = offset + nbytes;
  }
}
