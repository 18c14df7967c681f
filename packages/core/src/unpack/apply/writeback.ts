// Starts the write-back of extracted files while they are written, so that the flush before the
// snapshot's commit (snapshots/durable.ts) finds little left to write and waits little.
import { nativeSync, type NativeSync } from '../../native/addon.js';
import type { WritebackMode } from '../../snapshots/durable.js';

/**
 * Bytes of a large file written between two write-back starts, and bytes a layer writes between two
 * background syncfs calls: enough for large requests, small enough that little is left at the end.
 */
export const WRITEBACK_STEP = 8 * 1024 * 1024;
/** What a file costs at least in write-back (a block, its inode and its name); sizes round up to it. */
const BLOCK = 4096;

/** The write-back of one layer being extracted into `root`. */
export class LayerWriteback {
  private written = 0;
  private flushedAt = 0;
  private inFlight: Promise<void> | undefined;

  private constructor(
    readonly native: NativeSync,
    private readonly root: string,
  ) {}

  /** One for the layer when a mode is given and the addon has the calls; else undefined. */
  static open(mode: WritebackMode | undefined, root: string): LayerWriteback | undefined {
    const native = mode === undefined ? undefined : nativeSync();
    return native === undefined ? undefined : new LayerWriteback(native, root);
  }

  /** The write-back of a file of this layer being written through `fd`. */
  file(fd: number): FileWriteback {
    return new FileWriteback(this, fd);
  }

  /**
   * A file of `size` bytes is written: counted in whole blocks, at least one, so that a tree of tiny
   * files (whose inodes are most of the write-back) starts flushes as a large file does.
   */
  wrote(size: number): void {
    this.written += Math.max(BLOCK, Math.ceil(size / BLOCK) * BLOCK);
    if (this.inFlight !== undefined || this.written - this.flushedAt < WRITEBACK_STEP) return;
    this.flushedAt = this.written;
    // A hint only: its failure is left to the flush before the commit, which waits for everything.
    this.inFlight = this.native.syncfs(this.root).then(
      () => void (this.inFlight = undefined),
      () => void (this.inFlight = undefined),
    );
  }

  /** Resolves once no background syncfs of this layer runs (none is left behind the layer's end). */
  async settled(): Promise<void> {
    await this.inFlight;
  }
}

/** Write-back of one file being written; a hint only: its failures are left for the flush to report. */
export class FileWriteback {
  private started = 0;

  constructor(
    private readonly layer: LayerWriteback,
    private readonly fd: number,
  ) {}

  /** Bytes up to `end` are written: starts their write-back once a step's worth has gathered. */
  wrote(end: number): void {
    if (end - this.started >= WRITEBACK_STEP) this.start(this.started, end - this.started);
  }

  /**
   * The file is complete at `size` bytes: a large one's write-back is started to its end, and only
   * its inode then counts towards the layer's next syncfs, since its data has a write-back of its
   * own. A syncfs writes every dirty page of the filesystem, the downloaded blob's too, which the
   * pass frees soon after (docs/architecture.md, "3. Fetch"): counting whole large files, the
   * syncfs wrote the blob as well as the files ("Figures behind the defaults").
   */
  end(size: number): void {
    const own = this.started > 0;
    if (own) this.start(this.started, 0);
    this.layer.wrote(own ? 0 : size);
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
