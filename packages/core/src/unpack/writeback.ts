// Starts the write-back of extracted files' pages while they are written (sync_file_range), so that
// the flush before the snapshot's commit (snapshots/durable.ts) finds them written, or on their way.
import { nativeSync, type NativeSync } from './native.js';

/**
 * Which files' write-back the extractor starts: `large`, each 8 MiB step of files that reach one
 * (a small file started alone becomes a tiny request of its own, which measured slower than leaving
 * it to the final flush, which writes them in bulk); `all`, every file as it is closed.
 */
export type WritebackMode = 'large' | 'all';

/**
 * Bytes of a large file written between two write-back starts: enough for large requests, small
 * enough that the device starts on a large file long before its last byte.
 */
export const WRITEBACK_STEP = 8 * 1024 * 1024;

/** Write-back of one file being written; a hint only: its failures are left for the flush to report. */
export class FileWriteback {
  private started = 0;

  private constructor(
    private readonly native: NativeSync,
    private readonly fd: number,
    private readonly mode: WritebackMode,
  ) {}

  /** One for `fd` when a mode is given and the addon has sync_file_range; else undefined. */
  static open(fd: number, mode: WritebackMode | undefined): FileWriteback | undefined {
    const native = mode === undefined ? undefined : nativeSync();
    return native === undefined || mode === undefined ? undefined : new FileWriteback(native, fd, mode);
  }

  /** Bytes up to `end` are written: starts their write-back once a step's worth has gathered. */
  wrote(end: number): void {
    if (end - this.started >= WRITEBACK_STEP) this.start(this.started, end - this.started);
  }

  /** The file is complete: starts the write-back of what is not started yet (of a large file only, in `large` mode). */
  end(): void {
    if (this.mode === 'all' || this.started > 0) this.start(this.started, 0);
  }

  private start(offset: number, nbytes: number): void {
    try {
      this.native.startWriteback(this.fd, offset, nbytes);
    } catch {
      // The flush before the commit writes these pages anyway, and reports what fails.
    }
    if (nbytes > 0) this.started = offset + nbytes;
  }
}
