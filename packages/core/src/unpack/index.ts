// Layer unpacking: blob -> decompressor -> tar -> overlayfs lower directory, with both digests computed on the way.
export { applyLayer, type ApplyOptions, type ApplyStats } from './apply.js';
export { createDecompressor, detectCompression, resolveCompression } from './decompress.js';
export { unpackLayer, type UnpackedLayer, type UnpackLayerOptions } from './layer.js';
export { nativeFs, type NativeFs } from './native.js';
