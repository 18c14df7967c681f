// What one unpack pass (layer.ts) takes and gives: its options, its result, and its timings.
import type { Digest } from '../oci/digest.js';
import type { ApplyLimits, ApplyStats } from './apply/apply.js';
import type { BlobReleaseOptions } from './blob-release.js';
import type { InflaterChoice } from './decompress/inflater.js';
import type { HashMode } from './hash-tap.js';
import type { Tuning } from '../tuning.js';
import type { WritebackMode } from '../snapshots/durable.js';

/** Options of {@link unpackLayer}. */
export interface UnpackLayerOptions {
  /** The layer blob, compressed as it came from the registry. */
  blobPath: string;
  /** The layer's media type from the manifest. */
  mediaType: string;
  /** The layer's active snapshot directory: existing and empty. */
  dest: string;
  /** Stops the unpack with ABORTED. */
  signal?: AbortSignal;
  /** Called as the blob is read, with the total of compressed bytes read so far. */
  onBytes?: (compressedBytesRead: number) => void;
  /**
   * With `follow`: called with true when the pass has read all that landed and starts waiting for
   * the download, and with false when it goes on (or stops). The unpack pool lends the slot of a
   * pass that mostly waits.
   */
  onWait?: (waiting: boolean) => void;
  /**
   * Follow a blob that is still being downloaded: read only below this watermark (the buffer of a
   * content `Watermark`), waiting for it to advance, until `size` bytes are read. Without it the
   * blob file is read as it is.
   */
  follow?: {
    watermark: SharedArrayBuffer;
    size: number;
    /**
     * Free the blob's bytes once hashed (see {@link BlobReleaseOptions}), so that a blob dropped after
     * its layer's commit is never written to disk. Only for a blob nobody else reads and nobody
     * keeps (the pull's own ingest); off where the addon or the filesystem cannot punch holes. A
     * pass that fails after freeing bytes still tells the blob's digest (see
     * {@link BLOB_DIGEST_DETAIL}).
     */
    release?: BlobReleaseOptions;
  };
  /** Which gzip decoder to use; default 'auto'. */
  inflater?: InflaterChoice;
  /**
   * The layer's SOCI zTOC, when the registry has one: the parallel inflater starts chunks at its
   * checkpoints instead of guessing (each checkpoint is verified before use). Other inflaters ignore
   * it, and so does the parallel one when it does not parse.
   */
  ztoc?: Uint8Array;
  /** Names the layer (its digest) in error messages. */
  layer?: string;
  /** Limits on what one layer may hold; defaults in DEFAULT_APPLY_LIMITS. */
  limits?: Partial<ApplyLimits>;
  /** Most bytes of tar a compressed blob may inflate to per blob byte (at least 64 MiB); default DEFAULT_MAX_INFLATE_RATIO. */
  maxInflateRatio?: number;
  /** Lay the layer out for a rootless overlay mount (see ApplyOptions.rootless). */
  rootless?: boolean;
  /** Start files' write-back as they are written (see ApplyOptions.writeback). */
  writeback?: WritebackMode;
  /**
   * Where both SHA-256s run: default 'pool' (libuv pool threads, beside decompression and
   * extraction) where the addon has it, else 'inline' (on this thread, between the stages); see
   * defaultHashMode.
   */
  hashMode?: HashMode;
  /**
   * Measuring knobs (tuning.ts) from the program's entry point: the pass reads ISA-L's thread, the
   * parallel decoder's chunk and slot memory, and the writer threads. Default none.
   */
  tuning?: Tuning;
}

/** What {@link unpackLayer} computed. Nothing is compared: the caller checks both digests before committing. */
export interface UnpackedLayer {
  /** sha256 of the blob as read (compare with the manifest's layer digest). */
  blobDigest: Digest;
  /**
   * sha256 of the uncompressed tar (compare with the config's rootfs.diff_ids entry); for an
   * uncompressed blob, which is its tar, the blob digest itself (hashed once).
   */
  diffID: Digest;
  /** Bytes of the blob read. */
  compressedSize: number;
  /** Bytes of the tar (the uncompressed layer). */
  uncompressedSize: number;
  /** What extraction did, and what the layers below must settle. */
  stats: ApplyStats;
  /** Where the pass spent its time; the stages overlap, so only `totalMs` is wall time. */
  timings: UnpackTimings;
  /** zTOC checkpoints the parallel inflater started chunks from (absent when it had no zTOC that parsed). */
  checkpointsUsed?: number;
  /** Bytes of the blob freed as the pass went (see UnpackLayerOptions.follow.release); 0 when none. */
  releasedBytes: number;
  /**
   * The blob's read buffers when they were recycled (a followed blob whose decoder says when it is
   * done with its input, see ReadBuffers): buffers allocated, and reads into one that came back.
   */
  readBuffers?: { allocated: number; recycled: number };
  /**
   * The decoder's output buffers when it fills them again once the tar's hash and the extraction
   * are past them (the in-process ISA-L decoder on its own thread, the parallel one): buffers
   * allocated, and ones filled again instead.
   */
  outputBuffers?: { allocated: number; recycled: number };
}

/**
 * Time of one unpack pass by what it was doing, in milliseconds. The pass is a pipeline whose
 * stages run on this thread (tar parsing and file writes), on libuv pool threads (both SHA-256s in
 * 'pool' mode, node:zlib and ISA-L's decode calls) and in decoder processes or threads, so they
 * overlap; the wall times (`*Ms`) are measured where each stage holds up this thread, decompression
 * is what remains, and the CPU times (`*CpuMs`) are each stage's own thread CPU clock. unpackLayer
 * always sets the hashing fields (`threadCpuMs` where the addon is, `inflateCpuMs` where the decoder
 * has a clock, `writerCpuMs` where the addon has writer threads); timings made elsewhere may lack them. Their sum set against `totalMs` shows how many
 * cores the pass kept busy.
 */
export interface UnpackTimings {
  /** Wall time of the pass. */
  totalMs: number;
  /** Waiting for the download to bring the next bytes. */
  waitMs: number;
  /** Held up by SHA-256 of the blob and of the tar: all of it inline; on the pool, only a full queue and the final digests. */
  verifyMs: number;
  /** Reading tar headers and writing files. */
  extractMs: number;
  /** The rest: decompressing, or waiting for the decoder. */
  decompressMs: number;
  /** Where the hashing ran. */
  hashMode?: HashMode;
  /** CPU of hashing the blob (pool threads' clock; inline, the time of the calls). */
  blobHashCpuMs?: number;
  /** CPU of hashing the tar, as {@link blobHashCpuMs}; 0 for an uncompressed blob (its tar is not hashed again). */
  tarHashCpuMs?: number;
  /**
   * CPU of the thread that ran the pass: tar parsing, file writes and stream plumbing (and inline
   * hashing). Absent without the addon's thread clock.
   */
  threadCpuMs?: number;
  /**
   * CPU of decompressing, on the decoder's own threads' clocks: the in-process ISA-L stage's decode
   * thread, or the parallel gunzip's decode threads (their jobs). Absent for node:zlib (libuv pool
   * threads shared with other work: no clock per stream), an external igzip or pigz (another
   * process), zstd and uncompressed layers.
   */
  inflateCpuMs?: number;
  /**
   * CPU of the addon's writer threads making the layer's small files (up to 1 MiB, no sparse map, no
   * extended attributes), on their own clocks: see {@link ApplyStats.writerCpuMs}. 0 when no file
   * went to them; absent where the addon has no writer threads (every file is then in threadCpuMs).
   */
  writerCpuMs?: number;
}
