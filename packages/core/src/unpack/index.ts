// @fastpull/core/unpack: one layer's unpack pass and what it runs on. The worker pool that bounds
// how many layers unpack at once, the small-file writer threads, the gzip decoders (node:zlib, ISA-L
// in process, the parallel decoder and its pool, external igzip or pigz) and how a choice resolves
// on this machine, and SOCI zTOCs, whose checkpoints let the parallel decoder start mid-stream.
export { MAX_POOL_SIZE, UnpackPool, poolSizeFor, sharedUnpackPool, type UnpackPoolOptions, type RunOptions } from './pool/pool.js';
export type { WorkerTask } from './pool/worker.js';
export { BLOB_DIGEST_DETAIL } from './pool/pass-codes.js';
export { WRITER_THREADS, writerThreadsFor } from './filesink.js';
export type { BlobReleaseOptions, UnpackedLayer, UnpackLayerOptions, UnpackTimings } from './layer.js';
export { unpackLayer } from './unpack-layer.js';
export type { HashMode } from './hash-tap.js';
export {
  createParallelGunzip,
  DEFAULT_INFLATE_SLOT_BYTES,
  InflateBudget,
  type InflateBudgetLimits,
  InflatePool,
  sharedInflatePool,
  type ParallelGunzipOptions,
  type ParallelGunzipStats,
  type ParallelGunzipStream,
} from './decompress/pargzip.js';
export { createIsalGunzip, type IsalGunzipOptions, type IsalGunzipStream } from './decompress/isal.js';
export { findInflater, resolveGunzip, type ExternalInflater, type GunzipDecoder, type GunzipLookup } from './decompress/inflater.js';
export { parseZtoc, type GzipCheckpoint, type Ztoc } from './decompress/ztoc.js';
