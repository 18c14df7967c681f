// Layer unpacking: blob -> decompressor -> tar -> overlayfs lower directory, with both digests computed on the way.
export { applyLayer, cleanEntryPath, MAX_WARNINGS, type ApplyOptions, type ApplyStats } from './apply.js';
export { createDecompressor, detectCompression, GUNZIP_CHUNK_SIZE, MAGIC_BYTES, resolveCompression } from './decompress.js';
export { BLOB_READ_CHUNK, unpackLayer, type UnpackedLayer, type UnpackLayerOptions } from './layer.js';
export { nativeFs, type NativeFs } from './native.js';
