// Unpacks one layer blob in a single pass: digest of the blob, decompression, diffID and extraction together.
import fs from 'node:fs';
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { LayerCompression } from '../oci/mediatypes.js';
import { applyLayer, type ApplyOptions, type ApplyStats } from './apply/apply.js';
import { inflationBound } from './apply/limits.js';
import { WatermarkView } from '../content/watermark.js';
import { createDecompressor, decompressorCpuMs, MAGIC_BYTES, outputReleaser, resolveCompression, tellsInputDone } from './decompress/decompress.js';
import { defaultHashMode, HashTap, type HashMode, type HashTapResult } from './hash-tap.js';
import { nativeHash, nativePunchHole } from '../native/addon.js';
import type { IsalGunzipStream } from './decompress/isal.js';
import type { ParallelGunzipStream } from './decompress/pargzip.js';
import { ReadBuffers } from './read-buffers.js';
import { parseZtoc, type GzipCheckpoint } from './decompress/ztoc.js';
import { BlobRelease, checkReleaseOptions } from './blob-release.js';
import type { UnpackedLayer, UnpackLayerOptions } from './layer-types.js';
import { BLOB_READ_CHUNK, followFile, waitForBytes, WaitClock } from './follow.js';
import { BLOB_DIGEST_DETAIL, UNDIAGNOSED_CODES } from './pool/pass-codes.js';

export { BLOB_DIGEST_DETAIL, UNDIAGNOSED_CODES } from './pool/pass-codes.js';
export { BlobRelease, type BlobReleaseOptions } from './blob-release.js';
export { BLOB_READ_CHUNK } from './follow.js';
export type { UnpackedLayer, UnpackLayerOptions, UnpackTimings } from './layer-types.js';

/**
 * Reads the blob once: sha256 of the compressed bytes -> decompressor (by magic bytes, checked
 * against `mediaType`) -> sha256 of the uncompressed tar (the diffID) -> {@link applyLayer} into
 * `dest`. Returns both digests and sizes; it compares nothing. An uncompressed blob is its tar, so
 * it is hashed once: its diffID is its blob digest (and a config that names another diffID for it
 * fails the caller's comparison as any wrong diffID does).
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
  const what = `unpacking layer ${options.blobPath}`;
  throwIfAborted(options.signal, what);
  const started = performance.now();
  const waited = new WaitClock(options.onWait);
  const { follow } = options;
  checkReleaseOptions(follow?.release, what);
  const punchHole = follow?.release !== undefined ? nativePunchHole() : undefined;
  // Punching holes needs a descriptor open for writing.
  const blob = await openBlob(options, what, waited, punchHole !== undefined);
  const release =
    punchHole && follow?.release ? new BlobRelease(blob.file.fd, new WatermarkView(follow.watermark), follow.size, follow.release, punchHole) : undefined;
  const pass = new LayerPass(options, what, blob, waited, release);
  const clock = nativeHash();
  const cpuStart = clock?.threadCpuNs();
  let ran: PassOutcome;
  try {
    ran = await pass.run();
  } catch (e) {
    throw await pass.failed(e);
  } finally {
    // No punch outlives the pass: its bytes count in releasedBytes, and the caller may drop the blob next.
    await release?.stop();
    // A followed blob is read through the handle directly; a plain read stream closed it already.
    if (follow) await blob.file.close().catch(() => undefined);
  }
  const threadCpuMs = clock && cpuStart !== undefined ? (clock.threadCpuNs() - cpuStart) / 1e6 : undefined;
  return passResult(blob, ran, {
    totalMs: performance.now() - started,
    waitMs: waited.ms,
    hashMode: pass.compressed.mode,
    releasedBytes: release?.released ?? 0,
    threadCpuMs,
  });
}

/** The blob opened for a pass, with the decoder its first bytes chose. */
interface OpenedBlob {
  readonly file: fs.promises.FileHandle;
  readonly source: Readable;
  readonly compression: LayerCompression;
  /** Undefined for an uncompressed blob: it is its tar. */
  readonly decompressor: Transform | undefined;
  readonly checkpoints: readonly GzipCheckpoint[] | undefined;
  /** Most bytes of tar the blob may inflate to; undefined for an uncompressed blob. */
  readonly maxInflatedBytes: number | undefined;
  /** The recycled read buffers of a followed blob whose decoder says when it is done with its input. */
  readonly buffers: ReadBuffers | undefined;
}

/** Opens the blob, reads its first bytes (waiting for them when followed), and makes its decoder and source. */
async function openBlob(options: UnpackLayerOptions, what: string, waited: WaitClock, writable: boolean): Promise<OpenedBlob> {
  let file: fs.promises.FileHandle;
  try {
    file = await fs.promises.open(options.blobPath, writable ? 'r+' : 'r');
  } catch (e) {
    throw fromFsError(e, `${what}: opening the blob`, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'NOT_FOUND' : 'INTERNAL');
  }
  try {
    const { follow } = options;
    const head = await readHead(file, options, what, waited);
    const size = follow ? follow.size : (await file.stat()).size;
    const checkpoints = options.ztoc && options.inflater === 'parallel' ? ztocCheckpoints(options.ztoc) : undefined;
    const compression = resolveCompression(options.mediaType, head, what);
    // A followed blob's reads go into buffers that come back once its hash (reader 0) and its
    // decoder (reader 1) are done with them, where the decoder can tell.
    let buffers = follow && compression !== 'none' ? new ReadBuffers(BLOB_READ_CHUNK, 2) : undefined;
    const decompressor =
      compression === 'none'
        ? undefined
        : createDecompressor(compression, {
            ...(options.inflater ? { inflater: options.inflater } : {}),
            size,
            ...(checkpoints ? { checkpoints } : {}),
            ...(buffers ? { onInputDone: buffers.reader(1) } : {}),
            reuseOutput: true,
            ...(options.tuning ? { tuning: options.tuning } : {}),
          });
    if (decompressor && !tellsInputDone(decompressor)) buffers = undefined;
    const source = follow
      ? Readable.from(followFile(file, new WatermarkView(follow.watermark), follow.size, what, options.signal, waited, 0, buffers), {
          objectMode: false,
          highWaterMark: BLOB_READ_CHUNK,
        })
      : file.createReadStream({ start: 0, highWaterMark: BLOB_READ_CHUNK }); // closes the file when done
    const maxInflatedBytes = compression === 'none' ? undefined : inflationBound(size, options.maxInflateRatio);
    return { file, source, compression, decompressor, checkpoints, maxInflatedBytes, buffers };
  } catch (e) {
    await file.close();
    throw isFastpullError(e) ? e : fromFsError(e, `${what}: reading the blob`);
  }
}

/** The blob's first bytes, which say how it is compressed; a followed blob's are waited for. */
async function readHead(file: fs.promises.FileHandle, options: UnpackLayerOptions, what: string, waited: WaitClock): Promise<Uint8Array> {
  const head = Buffer.alloc(MAGIC_BYTES);
  const want = options.follow ? Math.min(MAGIC_BYTES, options.follow.size) : MAGIC_BYTES;
  // The first bytes may not have landed yet: wait for them before choosing a decoder.
  if (options.follow) await waitForBytes(new WatermarkView(options.follow.watermark), want, what, options.signal, waited);
  const { bytesRead } = await file.read(head, 0, want, 0);
  return head.subarray(0, bytesRead);
}

/** What a pass that ran to its end saw. */
interface PassOutcome {
  readonly stats: ApplyStats;
  readonly blob: HashTapResult;
  /** The tar's hash; undefined for an uncompressed blob, hashed once as the blob. */
  readonly tar: HashTapResult | undefined;
}

/**
 * One pass's streams: the blob's hash, its decoder, the tar's hash (none for an uncompressed blob)
 * and the extraction, and what is left to settle when it fails.
 */
class LayerPass {
  /** The blob's hash. */
  readonly compressed: HashTap;
  /** The tar's hash; absent when the blob is the tar. */
  private readonly uncompressed: HashTap | undefined;
  /** Tells the decoder which output buffers the tar's hash and the extraction are both past. */
  private readonly output: OutputRelease | undefined;
  /** Whether the stream ran to its end: after that, only a final digest can fail. */
  private piped = false;
  /** The extraction, which a pipeline that failed upstream does not wait for. */
  private applying: Promise<unknown> | undefined;

  constructor(
    private readonly options: UnpackLayerOptions,
    private readonly what: string,
    private readonly blob: OpenedBlob,
    private readonly waited: WaitClock,
    private readonly release: BlobRelease | undefined,
  ) {
    const mode = options.hashMode ?? defaultHashMode();
    const { onBytes } = options;
    const tapped = release ? (n: number) => (onBytes?.(n), release.hashed(n)) : onBytes;
    this.compressed = new HashTap({
      mode,
      ...(tapped ? { onBytes: tapped } : {}),
      ...(release ? { keepOnError: true } : {}),
      ...(blob.buffers ? { onHashed: blob.buffers.reader(0) } : {}),
    });
    this.output = outputRelease(blob.decompressor);
    const output = this.output;
    this.uncompressed = blob.decompressor && new HashTap({ mode, ...(output ? { onHashed: (chunk: Buffer) => output.hashed(chunk.length) } : {}) });
  }

  /** Runs the stream to its end and waits for the digests. */
  async run(): Promise<PassOutcome> {
    const { signal } = this.options;
    let stats: ApplyStats | undefined;
    const extract = async (tar: AsyncIterable<Buffer>): Promise<void> => {
      stats = await (this.applying = applyLayer(tar, this.options.dest, this.applyOptions()));
    };
    const { source, decompressor } = this.blob;
    const opts = signal ? { signal } : {};
    if (decompressor && this.uncompressed) await pipeline(source, this.compressed, decompressor, this.uncompressed, extract, opts);
    else await pipeline(source, this.compressed, extract, opts);
    this.piped = true;
    const [blob, tar] = await Promise.all([this.compressed.result(), this.uncompressed?.result()]);
    if (stats === undefined) throw new FastpullError('INTERNAL', `${this.what}: extraction ended without a result`);
    return { stats, blob, tar };
  }

  /** The extraction's options, from the pass's. */
  private applyOptions(): ApplyOptions {
    const { options, output } = this;
    return {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.layer ? { layer: options.layer } : {}),
      ...(options.limits ? { limits: options.limits } : {}),
      ...(this.blob.maxInflatedBytes !== undefined ? { maxInflatedBytes: this.blob.maxInflatedBytes } : {}),
      ...(options.rootless !== undefined ? { rootless: options.rootless } : {}),
      ...(options.writeback !== undefined ? { writeback: options.writeback } : {}),
      ...(options.tuning?.writerThreads !== undefined ? { writerThreads: options.tuning.writerThreads } : {}),
      ...(output ? { onReleased: output.applied } : {}),
    };
  }

  /** After the pass failed with `e`: settles its hashing and extraction, and returns the error to throw. */
  async failed(e: unknown): Promise<FastpullError> {
    const { compressed, release, options } = this;
    // No file write outlives the call: the caller may remove `dest` next.
    await this.applying?.catch(() => undefined);
    const error = passError(e, this.what, compressed.bytes, options.signal);
    // Bytes granted to be freed: the caller cannot hash the blob again to tell a corrupt download
    // from a bad layer. Read the rest of it into the blob's hash here, which holds everything before.
    const follow = options.follow;
    let digest: Digest | undefined;
    if (release && follow && release.granted > 0 && !UNDIAGNOSED_CODES.has(error.code) && !this.piped) {
      digest = await compressed
        .finish(followFile(this.blob.file, new WatermarkView(follow.watermark), follow.size, this.what, options.signal, this.waited, compressed.bytes))
        .then((r) => (r.bytes === follow.size ? r.digest : undefined))
        .catch(() => undefined);
    }
    // No hashing of this layer outlives the call, whatever stopped it.
    compressed.discard();
    await Promise.all([compressed.settled(), this.uncompressed?.settled()]);
    if (digest) return new FastpullError(error.code, error.message, { cause: error.cause, details: { ...error.details, [BLOB_DIGEST_DETAIL]: digest } });
    return error;
  }
}

/** The decoder's output-buffer release, fed by the tar's hash and the extraction. */
interface OutputRelease {
  /** The tar's hash is done with `bytes` more bytes. */
  readonly hashed: (bytes: number) => void;
  /** The extraction holds no byte before `offset` any more. */
  readonly applied: (offset: number) => void;
}

/**
 * Lets a decoder that reuses its output buffers fill one again once the tar's hash and the
 * extraction are both past it; undefined for a decoder that allocates every output buffer.
 */
function outputRelease(decompressor: Transform | undefined): OutputRelease | undefined {
  const releaseOutput = decompressor && outputReleaser(decompressor);
  if (!releaseOutput) return undefined;
  let hashed = 0;
  let applied = 0;
  return {
    hashed: (bytes) => releaseOutput(Math.min((hashed += bytes), applied)),
    applied: (offset) => releaseOutput(Math.min(hashed, (applied = offset))),
  };
}

/** The pass's figures that {@link passResult} does not read off its streams. */
interface PassClock {
  totalMs: number;
  waitMs: number;
  hashMode: HashMode;
  releasedBytes: number;
  threadCpuMs: number | undefined;
}

/** What {@link unpackLayer} returns for a pass that ran to its end. */
function passResult(opened: OpenedBlob, { stats, blob, tar }: PassOutcome, clock: PassClock): UnpackedLayer {
  const { decompressor, checkpoints, buffers } = opened;
  const { totalMs, waitMs } = clock;
  const verifyMs = blob.blockedMs + (tar?.blockedMs ?? 0);
  const parallel = (decompressor as Partial<ParallelGunzipStream> | undefined)?.stats;
  const inflateCpuMs = decompressor && decompressorCpuMs(decompressor);
  const outputBuffers =
    decompressor && outputReleaser(decompressor) ? (decompressor as Partial<IsalGunzipStream | ParallelGunzipStream>).outputBuffers : undefined;
  return {
    ...(checkpoints && parallel ? { checkpointsUsed: parallel.checkpointsUsed } : {}),
    releasedBytes: clock.releasedBytes,
    ...(buffers ? { readBuffers: buffers.counts } : {}),
    ...(outputBuffers ? { outputBuffers } : {}),
    blobDigest: blob.digest,
    // An uncompressed blob is its tar: the diffID is its digest, by definition.
    diffID: tar ? tar.digest : blob.digest,
    compressedSize: blob.bytes,
    uncompressedSize: tar ? tar.bytes : blob.bytes,
    stats,
    timings: {
      totalMs,
      waitMs,
      verifyMs,
      extractMs: stats.extractMs,
      decompressMs: Math.max(0, totalMs - waitMs - verifyMs - stats.extractMs),
      hashMode: clock.hashMode,
      blobHashCpuMs: blob.cpuMs,
      tarHashCpuMs: tar ? tar.cpuMs : 0,
      ...(clock.threadCpuMs !== undefined ? { threadCpuMs: clock.threadCpuMs } : {}),
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
