// Unpacks one layer blob in a single pass: digest of the blob, decompression, diffID and extraction together.
import { BLOB_DIGEST_DETAIL, UNDIAGNOSED_CODES } from './pool/pass-codes.js';
import fs from 'node:fs';
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import { applyLayer, type ApplyLimits, type ApplyStats } from './apply/apply.js';
import { inflationBound } from './apply/limits.js';
import { READER_DONE, WatermarkView } from '../content/watermark.js';
import { createDecompressor, decompressorCpuMs, MAGIC_BYTES, outputReleaser, resolveCompression, tellsInputDone } from './decompress/decompress.js';
import { defaultHashMode, HashTap, type HashMode, type HashTapResult } from './hash-tap.js';
import type { InflaterChoice } from './decompress/inflater.js';
import type { Tuning } from '../tuning.js';
import { nativeHash, nativePunchHole, type PunchHole } from '../native/addon.js';
import type { WritebackMode } from '../snapshots/durable.js';
import type { IsalGunzipStream } from './decompress/isal.js';
import type { ParallelGunzipStream } from './decompress/pargzip.js';
import { ReadBuffers } from './read-buffers.js';
import { parseZtoc, type GzipCheckpoint } from './decompress/ztoc.js';

/** Read size for layer blobs: large reads keep syscalls and stream hops per byte low. */
export const BLOB_READ_CHUNK = 1024 * 1024;

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

export { BLOB_DIGEST_DETAIL, UNDIAGNOSED_CODES } from './pool/pass-codes.js';


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
  const waited = new WaitClock(options.onWait);

  const releasing = options.follow?.release;
  if (releasing !== undefined) {
    const { step, lead = 0 } = releasing;
    if (!Number.isSafeInteger(step) || step <= 0 || step % RELEASE_ALIGN !== 0 || !Number.isSafeInteger(lead) || lead < 0) {
      throw new FastpullError('INVALID_ARGUMENT', `${what}: release step ${step}, lead ${lead}: want a positive multiple of ${RELEASE_ALIGN} and a lead of 0 or more`);
    }
  }
  const punchHole = releasing !== undefined ? nativePunchHole() : undefined;
  let file: fs.promises.FileHandle;
  try {
    // Punching holes needs a descriptor open for writing.
    file = await fs.promises.open(blobPath, punchHole ? 'r+' : 'r');
  } catch (e) {
    throw fromFsError(e, `${what}: opening the blob`, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'NOT_FOUND' : 'INTERNAL');
  }
  let source: Readable;
  let decompressor: Transform;
  let checkpoints: readonly GzipCheckpoint[] | undefined;
  let maxInflatedBytes: number | undefined;
  // A followed blob's reads go into buffers that come back once its hash (reader 0) and its decoder
  // (reader 1) are done with them, where the decoder can tell.
  let buffers = options.follow ? new ReadBuffers(BLOB_READ_CHUNK, 2) : undefined;
  try {
    const head = Buffer.alloc(MAGIC_BYTES);
    const { bytesRead } = await file.read(head, 0, MAGIC_BYTES, 0);
    let headBytes = bytesRead;
    if (options.follow) {
      // The first bytes may not have landed yet: wait for them before choosing a decoder.
      const view = new WatermarkView(options.follow.watermark);
      const want = Math.min(MAGIC_BYTES, options.follow.size);
      const t = waited.start();
      try {
        while (view.value < want && !view.failed) {
          throwIfAborted(signal, what);
          await view.waitPast(view.value, 250);
        }
      } finally {
        waited.stop(t);
      }
      headBytes = (await file.read(head, 0, want, 0)).bytesRead;
    }
    const size = options.follow ? options.follow.size : (await file.stat()).size;
    checkpoints = options.ztoc && options.inflater === 'parallel' ? ztocCheckpoints(options.ztoc) : undefined;
    const compression = resolveCompression(mediaType, head.subarray(0, headBytes), what);
    if (compression !== 'none') maxInflatedBytes = inflationBound(size, options.maxInflateRatio);
    decompressor = createDecompressor(compression, {
      ...(options.inflater ? { inflater: options.inflater } : {}),
      size,
      ...(checkpoints ? { checkpoints } : {}),
      ...(buffers ? { onInputDone: buffers.reader(1) } : {}),
      reuseOutput: true,
      ...(options.tuning ? { tuning: options.tuning } : {}),
    });
    if (!tellsInputDone(decompressor)) buffers = undefined;
    source = options.follow
      ? Readable.from(followFile(file, new WatermarkView(options.follow.watermark), options.follow.size, what, signal, waited, 0, buffers), { objectMode: false, highWaterMark: BLOB_READ_CHUNK })
      : file.createReadStream({ start: 0, highWaterMark: BLOB_READ_CHUNK }); // closes the file when done
  } catch (e) {
    await file.close();
    throw isFastpullError(e) ? e : fromFsError(e, `${what}: reading the blob`);
  }

  const hashMode = options.hashMode ?? defaultHashMode();
  const release = punchHole && options.follow && releasing ? new BlobRelease(file.fd, new WatermarkView(options.follow.watermark), options.follow.size, releasing, punchHole) : undefined;
  const tapped = release ? (n: number) => (onBytes?.(n), release.hashed(n)) : onBytes;
  const compressed = new HashTap({
    mode: hashMode,
    ...(tapped ? { onBytes: tapped } : {}),
    ...(release ? { keepOnError: true } : {}),
    ...(buffers ? { onHashed: buffers.reader(0) } : {}),
  });
  // The decoder may fill an output buffer again once the tar's hash and the extraction are both past it.
  const releaseOutput = outputReleaser(decompressor);
  let tarHashed = 0;
  let tarApplied = 0;
  const released = releaseOutput && (() => releaseOutput(Math.min(tarHashed, tarApplied)));
  const uncompressed = new HashTap({
    mode: hashMode,
    ...(released ? { onHashed: (chunk: Buffer) => ((tarHashed += chunk.length), released()) } : {}),
  });
  const clock = nativeHash();
  const cpuStart = clock?.threadCpuNs();
  let stats: ApplyStats | undefined;
  let blob: HashTapResult;
  let tar: HashTapResult;
  // Whether the stream ran to its end: after that, only a final digest can fail.
  let piped = false;
  // The extraction, which a pipeline that failed upstream does not wait for.
  let applying: Promise<unknown> | undefined;
  try {
    await pipeline(
      source,
      compressed,
      decompressor,
      uncompressed,
      async (tar: AsyncIterable<Buffer>) => {
        stats = await (applying = applyLayer(tar, dest, {
          ...(signal ? { signal } : {}),
          ...(options.layer ? { layer: options.layer } : {}),
          ...(options.limits ? { limits: options.limits } : {}),
          ...(maxInflatedBytes !== undefined ? { maxInflatedBytes } : {}),
          ...(options.rootless !== undefined ? { rootless: options.rootless } : {}),
          ...(options.writeback !== undefined ? { writeback: options.writeback } : {}),
          ...(options.tuning?.writerThreads !== undefined ? { writerThreads: options.tuning.writerThreads } : {}),
          ...(released ? { onReleased: (offset: number) => ((tarApplied = offset), released()) } : {}),
        }));
      },
      signal ? { signal } : {},
    );
    piped = true;
    [blob, tar] = await Promise.all([compressed.result(), uncompressed.result()]);
  } catch (e) {
    // No file write outlives the call: the caller may remove `dest` next.
    await applying?.catch(() => undefined);
    const error = passError(e, what, compressed.bytes, signal);
    // Bytes granted to be freed: the caller cannot hash the blob again to tell a corrupt download
    // from a bad layer. Read the rest of it into the blob's hash here, which holds everything before.
    if (release && release.granted > 0 && !UNDIAGNOSED_CODES.has(error.code)) {
      const digest = piped
        ? undefined
        : await compressed
            .finish(followFile(file, new WatermarkView(options.follow!.watermark), options.follow!.size, what, signal, waited, compressed.bytes))
            .then((r) => (r.bytes === options.follow!.size ? r.digest : undefined))
            .catch(() => undefined);
      compressed.discard();
      await Promise.all([compressed.settled(), uncompressed.settled()]);
      if (digest) throw new FastpullError(error.code, error.message, { cause: error.cause, details: { ...error.details, [BLOB_DIGEST_DETAIL]: digest } });
      throw error;
    }
    // No hashing of this layer outlives the call, whatever stopped it.
    compressed.discard();
    await Promise.all([compressed.settled(), uncompressed.settled()]);
    throw error;
  } finally {
    // No punch outlives the pass: its bytes count in releasedBytes, and the caller may drop the blob next.
    await release?.stop();
    // A followed blob is read through the handle directly; a plain read stream closed it already.
    if (options.follow) await file.close().catch(() => undefined);
  }
  if (stats === undefined) throw new FastpullError('INTERNAL', `${what}: extraction ended without a result`);
  const totalMs = performance.now() - started;
  const verifyMs = blob.blockedMs + tar.blockedMs;
  const parallel = (decompressor as Partial<ParallelGunzipStream>).stats;
  const inflateCpuMs = decompressorCpuMs(decompressor);
  const outputBuffers = releaseOutput ? (decompressor as Partial<IsalGunzipStream | ParallelGunzipStream>).outputBuffers : undefined;
  return {
    ...(checkpoints && parallel ? { checkpointsUsed: parallel.checkpointsUsed } : {}),
    releasedBytes: release?.released ?? 0,
    ...(buffers ? { readBuffers: buffers.counts } : {}),
    ...(outputBuffers ? { outputBuffers } : {}),
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

/** The error a failed pass throws for `e`; `read`: compressed bytes read by then. */
function passError(e: unknown, what: string, read: number, signal: AbortSignal | undefined): FastpullError {
  if (isFastpullError(e)) {
    // The external inflater reports corrupt input without knowing which layer it was fed.
    if (e.code === 'INVALID_LAYER' && !e.message.startsWith(what)) {
      return new FastpullError(e.code, `${what}: ${e.message}`, { cause: e, details: { ...e.details, compressedBytesRead: read } });
    }
    return e;
  }
  if (signal?.aborted) return abortError(signal, what);
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('Z_')) {
    return new FastpullError('INVALID_LAYER', `${what}: corrupt gzip stream: ${(e as Error).message}`, { cause: e, details: { compressedBytesRead: read } });
  }
  return fromFsError(e, what);
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

/** The time a pass spent waiting for the download's bytes; tells `onWait` as each wait starts and ends. */
class WaitClock {
  ms = 0;
  constructor(private readonly onWait?: (waiting: boolean) => void) {}

  /** A wait starts: returns its start, for {@link stop}. */
  start(): number {
    this.onWait?.(true);
    return performance.now();
  }

  stop(started: number): void {
    this.ms += performance.now() - started;
    this.onWait?.(false);
  }
}

/**
 * Reads a blob that is still arriving: never past the watermark, waiting (without blocking the
 * thread) for it to move, from byte `from` until `size` bytes were read, into `buffers` when given
 * (else fresh ones). The caller closes the file.
 */
async function* followFile(
  file: fs.promises.FileHandle,
  view: WatermarkView,
  size: number,
  what: string,
  signal: AbortSignal | undefined,
  waited: WaitClock,
  from = 0,
  buffers?: ReadBuffers,
): AsyncGenerator<Buffer> {
  {
    let pos = from;
    while (pos < size) {
      let mark = view.value;
      if (mark <= pos) {
        const t = waited.start();
        try {
          while (mark <= pos) {
            if (view.failed) throw new FastpullError('ABORTED', `${what}: the download of the blob stopped`);
            throwIfAborted(signal, what);
            await view.waitPast(pos, 250);
            mark = view.value;
          }
        } finally {
          waited.stop(t);
        }
      }
      const len = Math.min(BLOB_READ_CHUNK, mark - pos);
      const buf = buffers ? buffers.take() : Buffer.allocUnsafe(len);
      const { bytesRead } = await file.read(buf, 0, len, pos);
      if (bytesRead === 0) throw new FastpullError('INTERNAL', `${what}: blob file ends at ${pos}, before its watermark ${mark}`);
      pos += bytesRead;
      if (buffers) yield buffers.lend(buf, bytesRead);
      else yield bytesRead === len ? buf : buf.subarray(0, bytesRead);
    }
  }
}
