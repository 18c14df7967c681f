// @fastpull/core: the curated public surface, what a program that pulls images needs. Building blocks
// live in subpath entries: @fastpull/core/content, /snapshots, /registry and /testing (see
// docs/library.md). surface.test.ts holds the committed list of these names: change both together.

export { VERSION } from './version.js';

// Pulling.
export {
  pull,
  pullEvents,
  DEFAULT_NO_PROGRESS_TIMEOUT_MS,
  DEFAULT_METADATA_TIMEOUT_MS,
  type PullOptions,
  type PullEngine,
  type PullResult,
  type PullEvent,
  type LayerState,
  type PullTimings,
  type LayerTimings,
  type PhaseTotals,
  PullTicket,
  PriorityGate,
  sharedPriorityGate,
  parsePullPriority,
  PULL_PRIORITIES,
  type PullPriority,
  RateLimiter,
  defaultBurst,
  type RateLimit,
  type RateLimiterOptions,
  type RateClock,
} from './pull/pull.js';
export { TraceRecorder, type TraceDocument, type TraceEvent, type TraceRecorderOptions } from './pull/trace.js';
export type { PullObserver, UnpackPassStart, UnpackPassPlace, UnpackPassEnd } from './pull/observer.js';
export type { RangeRequest } from './registry/range-request.js';

// The service every front end stands on: the CLI, fastpulld and its containerd snapshotter.
export { LocalService, type LocalPullOptions, type LocalServiceOptions } from './service/local.js';
export type { FastpullService, ServicePullOptions, Placement, PulledImage, MountTarget, BlobEntry, ImageOptions } from './service/service.js';
export {
  CONTAINERD_HOSTS_DIR,
  DEFAULT_CHUNK_SIZE,
  DEFAULT_CONCURRENCY,
  DEFAULT_INFLATER,
  DEFAULT_KEEP_BLOBS,
  DEFAULT_SYNC,
  MIN_CHUNK_SIZE,
  defaultHostsDir,
  defaultUnpackConcurrency,
  type ServiceSettings,
  parseSize,
  parseChunkSize,
  parseRateLimit,
  parseDuration,
  parsePositiveDuration,
  parsePositiveInt,
} from './service/settings.js';
export { credentialsIdentity, dockerCredentialsWithWarning, scopedCredentials } from './service/credentials.js';
export { checkDirectory, type DirectoryUse } from './util/paths.js';

// The store and the images in it.
export { openStore, defaultRoot, type Store, type StoreOptions } from './store/root.js';
export { mountsFor, resolveImage } from './store/mounts.js';
export { findImages, unpackedSize } from './store/resolve.js';
export { inspectImage, type ImageDetails } from './store/inspect.js';
export { createWritableMount, listWritableMounts, removeWritableMount, type WritableMount } from './store/writable.js';
export type { MountRecord } from './snapshots/mountrecords.js';
export { FileImageStore, type ImageStore, type ImageRecord, type ImageLayer } from './images/store.js';
export { MAX_OVERLAY_LAYERS, type Mount } from './snapshots/store.js';

// Garbage collection and leases.
export { collectGarbage, HELD_FOR_CONTAINERD_GRACE_MS, type GcOptions, type GcResult } from './gc/gc.js';
export type { GcLeftover } from './gc/leftovers.js';
export { acquireLease, liveLeaseRefs, type Lease, type LeaseRefs } from './store/lease.js';

// Image signatures: the gate a pull waits on before it records an image, and the policies it applies.
export { DEFAULT_SIGNATURE_LIMITS, verdictLine, type SignatureGate } from './signatures/gate.js';
export { loadSignatureVerifiers, SIGNATURE_ENV, signatureSettingsFromEnv, type SignatureSettings } from './signatures/settings.js';
export { SigstoreVerifier } from './signatures/sigstore/verifier.js';
export { verifyImageSignatures, type ImageVerification, type VerifyImageOptions } from './signatures/verify-image.js';
export type {
  DiscoveredSignature,
  ImageSignatures,
  SignatureCheck,
  SignatureKind,
  SignatureLevel,
  SignatureLimits,
  SignatureManifest,
  SignatureOutcome,
  SignatureSource,
  SignatureSubject,
  SignatureVerdict,
  SignatureVerifier,
  VerifyContext,
} from './signatures/types.js';

// Errors.
export { FastpullError, isFastpullError, asFastpullError, ErrorCodes, type ErrorCode } from './errors.js';

// References, digests, platforms and the image model.
export { parseReference, formatReference, referenceName, DEFAULT_REGISTRY, DEFAULT_TAG, type Reference } from './oci/reference.js';
export { parseDigest, validateDigest, isDigest, sha256Digest, verifyBytes, type Digest } from './oci/digest.js';
export { parsePlatform, formatPlatform, normalizePlatform, hostPlatform, platformMatches, selectPlatform, type Platform } from './oci/platform.js';
export { chainIDs, chainID } from './oci/chainid.js';
export { MediaTypes } from './oci/mediatypes.js';
export type { Descriptor, ImageManifest, ImageIndex, ImageConfig } from './oci/manifest.js';
export { MAX_JSON_DEPTH, nestedDeeperThan } from './oci/json.js';

// Credentials.
export { dockerConfigCredentials, type DockerConfigOptions } from './registry/dockerconfig.js';
export type { Credentials, CredentialsProvider } from './registry/auth.js';
export { proxyEnvironment, type ProxySettings } from './registry/proxy.js';

// The gzip decoder a user chooses (a setting: `--inflater`, `inflater`); what a choice runs on is
// resolveGunzip's answer, in @fastpull/core/unpack.
export { inflaterFromEnv, parseInflaterChoice, INFLATER_CHOICES, type InflaterChoice } from './unpack/decompress/inflater.js';

// Unpacking lives in @fastpull/core/unpack. Deprecated here, kept for programs written against the
// earlier root entry (docs/library.md showed these at the root): import them from
// @fastpull/core/unpack instead.
export {
  /** @deprecated Import from `@fastpull/core/unpack`. */
  MAX_POOL_SIZE,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  poolSizeFor,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  WRITER_THREADS,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  writerThreadsFor,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  unpackLayer,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  type UnpackTimings,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  createParallelGunzip,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  InflatePool,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  sharedInflatePool,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  createIsalGunzip,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  resolveGunzip,
  /** @deprecated Import from `@fastpull/core/unpack`. */
  parseZtoc,
} from './unpack/index.js';
export { collectHeap, trimAllocator, tuneAllocator, type AllocatorTuning } from './util/allocator.js';
export { unixDatagramSender, type UnixDatagramSender } from './util/unix-datagram.js';
export {
  allowedCpus,
  applyCpuBudget,
  availableCores,
  cgroupCpuQuota,
  parseCpuBudget,
  parseCpuList,
  processCpuQuota,
  type CgroupPaths,
  type CpuBudgetState,
  type CpuQuota,
} from './util/cpu.js';
export { PullCpuBudget } from './util/pull-cpu.js';
export { BACKGROUND_NICE, enterBackground, type BackgroundState } from './util/background.js';
