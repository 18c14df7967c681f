// @fastpull/core/testing: helpers for tests and demos (image builder, trees, loopback and real registries).
export { Prng } from './prng.js';
export {
  DEFAULT_DIR_MODE,
  DEFAULT_FILE_MODE,
  DEFAULT_MTIME,
  applyLayer,
  buildImage,
  buildIndex,
  buildLayer,
  type BuildImageOptions,
  type BuildLayerOptions,
  type BuiltImage,
  type BuiltIndex,
  type BuiltLayer,
  type Compression,
  type ExpectedEntry,
  type ExpectedTree,
  type ImageFormat,
  type LayerEntry,
  type TarEntry,
} from './builder.js';
export { sampleImage, sampleLayerEntries, type SampleImageOptions } from './sample.js';
export { OCI_REF_NAME_ANNOTATION, writeOciLayout, type OciLayoutEntry, type OciLayoutImage } from './layout.js';
export { diffTrees, readTree, writeTree, type DiffTreesOptions, type SpecialEntry, type TreeEntry } from './tree.js';
export {
  LOOPBACK_SERVICE,
  startLoopbackRegistry,
  type CountedFault,
  type LoopbackAuth,
  type LoopbackFaults,
  type LoopbackRegistry,
  type LoopbackRegistryOptions,
  type LoopbackStats,
  type RequestLog,
} from './registry.js';
export {
  blobDataPath,
  findDistributionBinary,
  lacksRegistry,
  pushImage,
  pushIndex,
  startDistribution,
  type DistributionRegistry,
  type PushOptions,
  type StartDistributionOptions,
} from './distribution.js';
export { buildGzipCheckpoints, encodeZinfo, encodeZtoc, type ZtocFields } from './ztoc.js';
export {
  conformanceCase,
  contentStoreConformance,
  imageStoreConformance,
  rejectsWithCode,
  snapshotRecordsConformance,
  snapshotterConformance,
  type ConformanceCase,
  type ContainerdSnapshots,
  type Subject,
  type SubjectFactory,
} from './conformance/index.js';
export { lacks, lacksRoot, notHere, type Piece } from './needs.js';
export { findTinyproxy, lacksTinyproxy, startTinyproxy, type Tinyproxy, type TinyproxyOptions } from './tinyproxy.js';
