// Unpacking: one pass per layer from blob to overlay directory, on worker threads.
export { applyLayer, cleanEntryPath, DEFAULT_APPLY_LIMITS, MAX_WARNINGS, type ApplyLimits, type ApplyOptions, type ApplyStats } from './apply/apply.js';
export { createDecompressor, detectCompression, GUNZIP_CHUNK_SIZE, MAGIC_BYTES, resolveCompression } from './decompress/decompress.js';
export { BLOB_READ_CHUNK, unpackLayer, type UnpackedLayer, type UnpackLayerOptions, type UnpackTimings } from './layer.js';
export { UnpackPool, sharedUnpackPool, type UnpackPoolOptions, type RunOptions } from './pool/pool.js';
export {
  createExternalGunzip,
  findInflater,
  inflaterFromEnv,
  parseInflaterChoice,
  resolveGunzip,
  AUTO_GUNZIP,
  DEFAULT_INFLATER,
  INFLATER_CHOICES,
  INFLATER_ENV,
  type InflaterChoice,
  type ExternalInflater,
  type GunzipDecoder,
  type GunzipLookup,
} from './decompress/inflater.js';
export { createIsalGunzip, isalAvailable, isalUnavailableReason, type IsalGunzipOptions, type IsalGunzipStream } from './decompress/isal.js';
