// Unpacks one layer blob in a single pass: digest of the blob, decompression, diffID and extraction together.
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import { applyLayer, type ApplyStats } from './apply.js';
import { createDecompressor, MAGIC_BYTES, resolveCompression } from './decompress.js';

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
}

/** What {@link unpackLayer} computed. Nothing is compared: the caller checks both digests before committing. */
export interface UnpackedLayer {
  /** sha256 of the blob as read (compare with the manifest's layer digest). */
  blobDigest: Digest;
  /** sha256 of the uncompressed tar (compare with the config's rootfs.diff_ids entry). */
  diffID: Digest;
  compressedSize: number;
  uncompressedSize: number;
  stats: ApplyStats;
}

/** Hashes and counts what flows through it. */
class HashTap extends Transform {
  bytes = 0;
  private readonly hash: Hash = createHash('sha256');

  constructor(private readonly onBytes?: (total: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onBytes?.(this.bytes);
    callback(null, chunk);
  }

  digest(): Digest {
    return `sha256:${this.hash.digest('hex')}`;
  }
}

/**
 * Reads the blob once: sha256 of the compressed bytes -> decompressor (by magic bytes, checked
 * against `mediaType`) -> sha256 of the uncompressed tar (the diffID) -> {@link applyLayer} into
 * `dest`. Returns both digests and sizes; it compares nothing.
 *
 * Errors: UNSUPPORTED_MEDIA_TYPE (not a layer type, or zstd), INVALID_LAYER (corrupt compression
 * or tar), HOSTILE_LAYER, NOT_FOUND (no blob), NO_SPACE, ABORTED, INTERNAL.
 */
export async function unpackLayer(options: UnpackLayerOptions): Promise<UnpackedLayer> {
  const { blobPath, mediaType, dest, signal, onBytes } = options;
  const what = `unpacking layer ${blobPath}`;
  throwIfAborted(signal, what);

  let file: fs.promises.FileHandle;
  try {
    file = await fs.promises.open(blobPath, 'r');
  } catch (e) {
    throw fromFsError(e, `${what}: opening the blob`, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'NOT_FOUND' : 'INTERNAL');
  }
  let source: fs.ReadStream;
  let decompressor: Transform;
  try {
    const head = Buffer.alloc(MAGIC_BYTES);
    const { bytesRead } = await file.read(head, 0, MAGIC_BYTES, 0);
    decompressor = createDecompressor(resolveCompression(mediaType, head.subarray(0, bytesRead), what));
    source = file.createReadStream({ start: 0, highWaterMark: BLOB_READ_CHUNK }); // closes the file when done
  } catch (e) {
    await file.close();
    throw isFastpullError(e) ? e : fromFsError(e, `${what}: reading the blob`);
  }

  const compressed = new HashTap(onBytes);
  const uncompressed = new HashTap();
  let stats: ApplyStats | undefined;
  try {
    await pipeline(
      source,
      compressed,
      decompressor,
      uncompressed,
      async (tar: AsyncIterable<Buffer>) => {
        stats = await applyLayer(tar, dest, signal ? { signal } : {});
      },
      signal ? { signal } : {},
    );
  } catch (e) {
    if (isFastpullError(e)) throw e;
    if (signal?.aborted) throw abortError(signal, what);
    const code = (e as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && code.startsWith('Z_')) {
      throw new FastpullError('INVALID_LAYER', `${what}: corrupt gzip stream: ${(e as Error).message}`, {
        cause: e,
        details: { compressedBytesRead: compressed.bytes },
      });
    }
    throw fromFsError(e, what);
  }
  if (stats === undefined) throw new FastpullError('INTERNAL', `${what}: extraction ended without a result`);
  return {
    blobDigest: compressed.digest(),
    diffID: uncompressed.digest(),
    compressedSize: compressed.bytes,
    uncompressedSize: uncompressed.bytes,
    stats,
  };
}
