// Unpacks one layer blob in a single pass: digest of the blob, decompression, diffID and extraction together.
import fs from 'node:fs';
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import { applyLayer, type ApplyLimits, type ApplyStats } from './apply.js';
import { WatermarkView } from '../content/watermark.js';
import { createDecompressor, decompressorCpuMs, MAGIC_BYTES, resolveCompression } from './decompress.js';
import { defaultHashMode, HashTap, type HashMode, type HashTapResult } from './hash-tap.js';
import type { InflaterChoice } from './inflater.js';
import { nativeHash } from './native.js';
import type { WritebackMode } from './writeback.js';
import type { ParallelGunzipStream } from './pargzip.js';
import { parseZtoc, type GzipCheckpoint } from './ztoc.js';

/** Read size for layer blobs: large reads keep syscalls and stream hops per byte low. */
export const BLOB_READ_CHUNK = 1024 * 1024;

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
   * Follow a blob that is still being downloaded: read only below this watermark (the buffer of a
   * content `Watermark`), waiting for it to advance, until `size` bytes are read. Without it the
   * blob file is read as it is.
   */
  follow?: { watermark: SharedArrayBuffer; size: number };
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
}

/** What {@link unpackLayer} computed. Nothing is compared: the caller checks both digests before committing. */
export interface UnpackedLayer {
  /** sha256 of the blob as read (compare with the manifest's layer digest). */
  blobDigest: Digest;
  /** sha256 of the uncompressed tar (compare with the config's rootfs.diff_ids entry). */
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
  /** CPU of hashing the tar, as {@link blobHashCpuMs}. */
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

/**
 * Reads the blob once: sha256 of the compressed bytes -> decompressor (by magic bytes, checked
 * against `mediaType`) -> sha256 of the uncompressed tar (the diffID) -> {@link applyLayer} into
 * `dest`. Returns both digests and sizes; it compares nothing.
 *
 * Errors: UNSUPPORTED_MEDIA_TYPE (not a layer type, or zstd), INVALID_LAYER (corrupt compression
 * or tar), HOSTILE_LAYER, NOT_FOUND (no blob), NO_SPACE, ABORTED, INTERNAL.
 *
 * @example
 * const r = await unpackLayer({ blobPath: '/tmp/layer.tar.gz', mediaType: MediaTypes.OCI_LAYER_GZIP, dest: '/tmp/rootfs' });
 * if (r.diffID !== expectedDiffID) throw new Error('not the layer the config names');
 * console.log(r.timings.blobHashCpuMs, r.timings.inflateCpuMs, r.timings.tarHashCpuMs, r.timings.threadCpuMs, r.timings.writerCpuMs);
 */
export async function unpackLayer(options: UnpackLayerOptions): Promise<UnpackedLayer> {
  const { blobPath, mediaType, dest, signal, onBytes } = options;
  const what = `unpacking layer ${blobPath}`;
  throwIfAborted(signal, what);
  const started = performance.now();
  const waited = { ms: 0 };

  let file: fs.promises.FileHandle;
  try {
    file = await fs.promises.open(blobPath, 'r');
  } catch (e) {
    throw fromFsError(e, `${what}: opening the blob`, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'NOT_FOUND' : 'INTERNAL');
  }
  let source: Readable;
  let decompressor: Transform;
  let checkpoints: readonly GzipCheckpoint[] | undefined;
  try {
    const head = Buffer.alloc(MAGIC_BYTES);
    const { bytesRead } = await file.read(head, 0, MAGIC_BYTES, 0);
    let headBytes = bytesRead;
    if (options.follow) {
      // The first bytes may not have landed yet: wait for them before choosing a decoder.
      const view = new WatermarkView(options.follow.watermark);
      const want = Math.min(MAGIC_BYTES, options.follow.size);
      const t = performance.now();
      while (view.value < want && !view.failed) {
        throwIfAborted(signal, what);
        await view.waitPast(view.value, 250);
      }
      waited.ms += performance.now() - t;
      headBytes = (await file.read(head, 0, want, 0)).bytesRead;
    }
    const size = options.follow ? options.follow.size : (await file.stat()).size;
    checkpoints = options.ztoc && options.inflater === 'parallel' ? ztocCheckpoints(options.ztoc) : undefined;
    decompressor = createDecompressor(resolveCompression(mediaType, head.subarray(0, headBytes), what), {
      ...(options.inflater ? { inflater: options.inflater } : {}),
      size,
      ...(checkpoints ? { checkpoints } : {}),
    });
    source = options.follow
      ? Readable.from(followFile(file, new WatermarkView(options.follow.watermark), options.follow.size, what, signal, waited), { objectMode: false, highWaterMark: BLOB_READ_CHUNK })
      : file.createReadStream({ start: 0, highWaterMark: BLOB_READ_CHUNK }); // closes the file when done
  } catch (e) {
    await file.close();
    throw isFastpullError(e) ? e : fromFsError(e, `${what}: reading the blob`);
  }

  const hashMode = options.hashMode ?? defaultHashMode();
  const compressed = new HashTap({ mode: hashMode, ...(onBytes ? { onBytes } : {}) });
  const uncompressed = new HashTap({ mode: hashMode });
  const clock = nativeHash();
  const cpuStart = clock?.threadCpuNs();
  let stats: ApplyStats | undefined;
  let blob: HashTapResult;
  let tar: HashTapResult;
  try {
    await pipeline(
      source,
      compressed,
      decompressor,
      uncompressed,
      async (tar: AsyncIterable<Buffer>) => {
        stats = await applyLayer(tar, dest, {
          ...(signal ? { signal } : {}),
          ...(options.layer ? { layer: options.layer } : {}),
          ...(options.limits ? { limits: options.limits } : {}),
          ...(options.rootless !== undefined ? { rootless: options.rootless } : {}),
          ...(options.writeback !== undefined ? { writeback: options.writeback } : {}),
        });
      },
      signal ? { signal } : {},
    );
    [blob, tar] = await Promise.all([compressed.result(), uncompressed.result()]);
  } catch (e) {
    // No hashing of this layer outlives the call, whatever stopped it.
    await Promise.all([compressed.settled(), uncompressed.settled()]);
    if (isFastpullError(e)) {
      // The external inflater reports corrupt input without knowing which layer it was fed.
      if (e.code === 'INVALID_LAYER' && !e.message.startsWith(what)) {
        throw new FastpullError(e.code, `${what}: ${e.message}`, { cause: e, details: { ...e.details, compressedBytesRead: compressed.bytes } });
      }
      throw e;
    }
    if (signal?.aborted) throw abortError(signal, what);
    const code = (e as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && code.startsWith('Z_')) {
      throw new FastpullError('INVALID_LAYER', `${what}: corrupt gzip stream: ${(e as Error).message}`, {
        cause: e,
        details: { compressedBytesRead: compressed.bytes },
      });
    }
    throw fromFsError(e, what);
  } finally {
    // A followed blob is read through the handle directly; a plain read stream closed it already.
    if (options.follow) await file.close().catch(() => undefined);
  }
  if (stats === undefined) throw new FastpullError('INTERNAL', `${what}: extraction ended without a result`);
  const totalMs = performance.now() - started;
  const verifyMs = blob.blockedMs + tar.blockedMs;
  const parallel = (decompressor as Partial<ParallelGunzipStream>).stats;
  const inflateCpuMs = decompressorCpuMs(decompressor);
  return {
    ...(checkpoints && parallel ? { checkpointsUsed: parallel.checkpointsUsed } : {}),
    blobDigest: blob.digest,
    diffID: tar.digest,
    compressedSize: blob.bytes,
    uncompressedSize: tar.bytes,
    stats,
    timings: {
      totalMs,
      waitMs: waited.ms,
      verifyMs,
      extractMs: stats.extractMs,
      decompressMs: Math.max(0, totalMs - waited.ms - verifyMs - stats.extractMs),
      hashMode: compressed.mode,
      blobHashCpuMs: blob.cpuMs,
      tarHashCpuMs: tar.cpuMs,
      ...(clock && cpuStart !== undefined ? { threadCpuMs: (clock.threadCpuNs() - cpuStart) / 1e6 } : {}),
      ...(inflateCpuMs !== undefined ? { inflateCpuMs } : {}),
      ...(stats.writerCpuMs !== undefined ? { writerCpuMs: stats.writerCpuMs } : {}),
    },
  };
}

/** A zTOC's checkpoints, or undefined when it does not parse (it is only a hint). */
function ztocCheckpoints(blob: Uint8Array): readonly GzipCheckpoint[] | undefined {
  try {
    return parseZtoc(blob).checkpoints;
  } catch {
    return undefined;
  }
}

/**
 * Reads a blob that is still arriving: never past the watermark, waiting (without blocking the
 * thread) for it to move, until `size` bytes were read. The caller closes the file.
 */
async function* followFile(file: fs.promises.FileHandle, view: WatermarkView, size: number, what: string, signal: AbortSignal | undefined, waited: { ms: number }): AsyncGenerator<Buffer> {
  {
    let pos = 0;
    while (pos < size) {
      let mark = view.value;
      if (mark <= pos) {
        const t = performance.now();
        while (mark <= pos) {
          if (view.failed) throw new FastpullError('ABORTED', `${what}: the download of the blob stopped`);
          throwIfAborted(signal, what);
          await view.waitPast(pos, 250);
          mark = view.value;
        }
        waited.ms += performance.now() - t;
      }
      const len = Math.min(BLOB_READ_CHUNK, mark - pos);
      const buf = Buffer.allocUnsafe(len);
      const { bytesRead } = await file.read(buf, 0, len, pos);
      if (bytesRead === 0) throw new FastpullError('INTERNAL', `${what}: blob file ends at ${pos}, before its watermark ${mark}`);
      pos += bytesRead;
      yield bytesRead === len ? buf : buf.subarray(0, bytesRead);
    }
  }
}
