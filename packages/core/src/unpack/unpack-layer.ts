// The library's unpackLayer: the unpacker (layer.ts and the 20 modules below it) is loaded by the
// first call, not by importing the library, whose programs mostly unpack on worker threads.
import type { UnpackedLayer, UnpackLayerOptions } from './layer.js';

/**
 * Reads the blob once: sha256 of the compressed bytes -> decompressor (by magic bytes, checked
 * against `mediaType`) -> sha256 of the uncompressed tar (the diffID) -> extraction into `dest`, on
 * the calling thread. Returns both digests and sizes; it compares nothing.
 *
 * Errors: UNSUPPORTED_MEDIA_TYPE (not a layer type, or zstd), INVALID_LAYER (corrupt compression
 * or tar), HOSTILE_LAYER, NOT_FOUND (no blob), NO_SPACE, ABORTED, INTERNAL.
 *
 * @example
 * const r = await unpackLayer({ blobPath: '/tmp/layer.tar.gz', mediaType: MediaTypes.OCI_LAYER_GZIP, dest: '/tmp/rootfs' });
 * if (r.diffID !== expectedDiffID) throw new Error('not the layer the config names');
 */
export async function unpackLayer(options: UnpackLayerOptions): Promise<UnpackedLayer> {
  const layer = await import('./layer.js');
  return layer.unpackLayer(options);
}
