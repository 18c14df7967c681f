// Guards the public surface of @fastpull/core. Each entry point must export exactly the names listed
// here (an accidental export or removal fails), and every export must be documented: a TSDoc summary
// on each, an @example on each function and class, a comment on each public member of an interface
// or class, no `any` in a public signature.
//
// Changing the surface on purpose: edit the entry file, run this test, and copy the names it reports
// into SURFACE below; docs/library.md describes what each entry is for.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { analyseSurface, checkPackageExports, ENTRY_POINTS, type EntryPoint, type EntrySurface } from './surface.testkit.js';

/** The committed surface: exported names per entry point, sorted; `type X` marks a type-only export. */
const SURFACE: Record<EntryPoint, readonly string[]> = {
  '.': [
      'acquireLease', 'type AllocatorTuning', 'allowedCpus', 'applyCpuBudget', 'asFastpullError', 'availableCores', 'BACKGROUND_NICE', 'type BackgroundState',
      'type BlobEntry', 'cgroupCpuQuota', 'type CgroupPaths', 'chainID', 'chainIDs', 'checkDirectory', 'collectGarbage',
      'collectHeap', 'CONTAINERD_HOSTS_DIR', 'type CpuBudgetState', 'type CpuQuota', 'createIsalGunzip', 'createParallelGunzip',
      'createWritableMount', 'type Credentials', 'credentialsIdentity', 'type CredentialsProvider', 'DEFAULT_CHUNK_SIZE', 'DEFAULT_CONCURRENCY',
      'DEFAULT_INFLATER', 'DEFAULT_KEEP_BLOBS', 'DEFAULT_METADATA_TIMEOUT_MS', 'DEFAULT_NO_PROGRESS_TIMEOUT_MS', 'DEFAULT_REGISTRY',
      'DEFAULT_SIGNATURE_LIMITS', 'DEFAULT_SYNC', 'DEFAULT_TAG', 'defaultBurst', 'defaultHostsDir', 'defaultRoot', 'defaultUnpackConcurrency', 'type Descriptor',
      'type Digest', 'type DirectoryUse', 'type DiscoveredSignature', 'dockerConfigCredentials', 'type DockerConfigOptions',
      'dockerCredentialsWithWarning', 'enterBackground', 'type ErrorCode', 'ErrorCodes', 'FastpullError', 'type FastpullService',
      'FileImageStore', 'findImages', 'formatPlatform', 'formatReference', 'type GcLeftover', 'type GcOptions', 'type GcResult',
      'HELD_FOR_CONTAINERD_GRACE_MS', 'hostPlatform',
      'type ImageConfig', 'type ImageDetails', 'type ImageIndex', 'type ImageLayer', 'type ImageManifest', 'type ImageOptions', 'type ImageRecord',
      'type ImageSignatures', 'type ImageStore', 'type ImageVerification', 'InflatePool',
      'INFLATER_CHOICES', 'type InflaterChoice', 'inflaterFromEnv', 'inspectImage', 'isDigest',
      'isFastpullError', 'type LayerState', 'type LayerTimings', 'type Lease', 'type LeaseRefs', 'listWritableMounts', 'liveLeaseRefs',
      'loadSignatureVerifiers', 'type LocalPullOptions', 'LocalService', 'type LocalServiceOptions', 'MAX_JSON_DEPTH', 'MAX_OVERLAY_LAYERS', 'MAX_POOL_SIZE', 'MediaTypes', 'MIN_CHUNK_SIZE',
      'type Mount', 'type MountRecord', 'mountsFor', 'type MountTarget', 'nestedDeeperThan', 'normalizePlatform', 'openStore',
      'parseChunkSize', 'parseCpuBudget', 'parseCpuList', 'parseDigest', 'parseDuration',
      'parseInflaterChoice', 'parsePlatform', 'parsePositiveDuration', 'parsePositiveInt', 'parsePullPriority', 'parseRateLimit', 'parseReference', 'parseSize', 'parseZtoc', 'type PhaseTotals', 'type Placement',
      'type Platform', 'platformMatches', 'poolSizeFor', 'PriorityGate', 'processCpuQuota', 'proxyEnvironment', 'type ProxySettings', 'pull', 'PULL_PRIORITIES', 'PullCpuBudget', 'type PulledImage', 'type PullEngine', 'type PullEvent', 'pullEvents',
      'type PullObserver', 'type PullOptions', 'type PullPriority', 'type PullResult', 'PullTicket', 'type PullTimings', 'type RangeRequest', 'type RateClock', 'type RateLimit', 'RateLimiter', 'type RateLimiterOptions', 'type Reference', 'referenceName',
      'removeWritableMount', 'resolveGunzip', 'resolveImage', 'scopedCredentials', 'selectPlatform', 'type ServicePullOptions',
      'type ServiceSettings', 'sha256Digest', 'sharedInflatePool', 'sharedPriorityGate', 'SIGNATURE_ENV', 'type SignatureCheck', 'type SignatureGate',
      'type SignatureKind', 'type SignatureLevel', 'type SignatureLimits', 'type SignatureManifest', 'type SignatureOutcome',
      'type SignatureSettings', 'signatureSettingsFromEnv', 'type SignatureSource', 'type SignatureSubject', 'type SignatureVerdict',
      'type SignatureVerifier', 'SigstoreVerifier', 'type Store', 'type StoreOptions', 'type TraceDocument', 'type TraceEvent', 'TraceRecorder',
      'type TraceRecorderOptions', 'trimAllocator', 'tuneAllocator', 'type UnixDatagramSender', 'unixDatagramSender',
      'unpackedSize', 'unpackLayer', 'type UnpackPassEnd', 'type UnpackPassStart',
      'type UnpackTimings', 'validateDigest', 'verdictLine', 'verifyBytes', 'type VerifyContext', 'type VerifyImageOptions', 'verifyImageSignatures',
      'VERSION', 'type WritableMount', 'WRITER_THREADS', 'writerThreadsFor',
    ],
  './content': [
      'type BlobInfo', 'type ContentStore', 'digestLike', 'FileContentStore', 'hashFile', 'type Ingest',
      'STALE_INGEST_MS', 'type SweepIngestOptions', 'Watermark', 'WatermarkState', 'WatermarkView', 'withCollectionLock',
    ],
  './snapshots': [
      'type ActiveSnapshot', 'createMountRecord', 'FileSnapshotter', 'listMountRecords', 'type LowerChecks', 'LowerView',
      'type Mount', 'mountInfo', 'type MountInfo', 'type MountRecord', 'mountsDir', 'readMountRecord',
      'type ReconcileOptions', 'type ReconcileStats', 'reconcileWithLowers', 'type RecordsStore', 'removeMountRecord', 'snapshotChain', 'type SnapshotInfo',
      'type SnapshotKind', 'type SnapshotRecordInfo', 'SnapshotRecords', 'type SnapshotRecordsOptions', 'type Snapshotter', 'snapshotUsage', 'type SnapshotUsage', 'treeUsage',
    ],
  './registry': [
      'type Challenge', 'CONFIG_SIZE_LIMIT', 'type Credentials', 'type CredentialsProvider',
      'DEFAULT_CHUNK_SIZE', 'DEFAULT_CONNECTIONS_PER_HOST', 'DEFAULT_MAX_BYTES', 'DEFAULT_MAX_PER_HOST',
      'DEFAULT_MAX_REQUESTS', 'DEFAULT_ORDER_LEAD', 'DEFAULT_STRAGGLER_FLOOR', 'DEFAULT_STRAGGLER_WINDOW_MS', 'defaultConfigPath', 'type DirectBody',
      'dockerConfigCredentials', 'type DockerConfigOptions', 'fetchBlob', 'type FetchOptions', 'FetchScheduler',
      'type FetchSchedulerOptions', 'findSociZtocs', 'type HostCapability', 'type HostsConfigOptions', 'hostsFor',
      'isConfigMediaType', 'isIndexMediaType', 'isLoopbackHost', 'isManifestMediaType', 'isSchema1MediaType',
      'layerCompression', 'type LayerCompression', 'loadHostsConfig', 'MANIFEST_ACCEPT', 'MANIFEST_SIZE_LIMIT',
      'MediaTypes', 'parseChallenges', 'parseDescriptor', 'type ParsedManifest', 'parseHostsConfig',
      'parseImageConfig', 'parseManifest', 'proxyEnvironment', 'type ProxySettings', 'type RandomAccessSink', 'type RangeRequest', 'type Referrer', 'RegistryClient', 'type RegistryClientOptions', 'RegistryConnections', 'type RegistryConnectionsOptions',
      'registryEndpoint', 'type RegistryEndpoint', 'type RegistryHost',
      'type RegistryResponse', 'type RequestOptions', 'type ResolvedImage', 'type ResponseBody', 'sharedFetchScheduler', 'SOCI_IMAGE_MANIFEST_ANNOTATION', 'type SociZtocs',
    ],
  './testing': [
      'applyLayer', 'blobDataPath', 'buildGzipCheckpoints', 'buildImage', 'type BuildImageOptions', 'buildIndex', 'buildLayer',
      'type BuildLayerOptions', 'type BuiltImage', 'type BuiltIndex', 'type BuiltLayer', 'type Compression',
      'conformanceCase', 'type ConformanceCase', 'type ContainerdSnapshots', 'contentStoreConformance', 'type CountedFault', 'DEFAULT_DIR_MODE', 'DEFAULT_FILE_MODE', 'DEFAULT_MTIME', 'diffTrees',
      'type DiffTreesOptions', 'type DistributionRegistry', 'encodeZinfo', 'encodeZtoc', 'type ExpectedEntry', 'type ExpectedTree',
      'findDistributionBinary', 'findTinyproxy', 'type ImageFormat', 'imageStoreConformance', 'lacks', 'lacksRegistry', 'lacksRoot', 'lacksTinyproxy', 'type LayerEntry', 'LOOPBACK_SERVICE', 'type LoopbackAuth',
      'type LoopbackFaults', 'type LoopbackRegistry', 'type LoopbackRegistryOptions', 'type LoopbackStats',
      'notHere', 'OCI_REF_NAME_ANNOTATION', 'type OciLayoutEntry', 'type OciLayoutImage', 'type Piece', 'Prng', 'pushImage', 'pushIndex', 'type PushOptions',
      'readTree', 'rejectsWithCode', 'type RequestLog', 'sampleImage', 'type SampleImageOptions', 'sampleLayerEntries',
      'snapshotRecordsConformance', 'snapshotterConformance', 'type SpecialEntry', 'startDistribution', 'type StartDistributionOptions', 'startLoopbackRegistry', 'startTinyproxy',
      'type Subject', 'type SubjectFactory', 'type TarEntry', 'type Tinyproxy', 'type TinyproxyOptions', 'type TreeEntry', 'writeOciLayout', 'writeTree', 'type ZtocFields',
    ],
  './tuning': ['type SyncMethod', 'type Tuning', 'tuningFromEnv'],
  './unpack': [
      'BLOB_DIGEST_DETAIL', 'type BlobReleaseOptions', 'createIsalGunzip', 'createParallelGunzip', 'DEFAULT_INFLATE_SLOT_BYTES',
      'type ExternalInflater', 'findInflater', 'type GunzipDecoder', 'type GunzipLookup', 'type GzipCheckpoint', 'type HashMode',
      'InflateBudget', 'type InflateBudgetLimits', 'InflatePool', 'type IsalGunzipOptions', 'type IsalGunzipStream', 'MAX_POOL_SIZE',
      'type ParallelGunzipOptions', 'type ParallelGunzipStats', 'type ParallelGunzipStream', 'parseZtoc', 'poolSizeFor', 'resolveGunzip',
      'type RunOptions', 'sharedInflatePool', 'sharedUnpackPool', 'type UnpackedLayer', 'unpackLayer', 'type UnpackLayerOptions',
      'UnpackPool', 'type UnpackPoolOptions', 'type UnpackTimings', 'type WorkerTask', 'WRITER_THREADS', 'writerThreadsFor', 'type Ztoc',
    ],
  './worker-ahead': ['startWorkerAhead'],
};

const srcDir = dirname(fileURLToPath(import.meta.url));
const packageDir = dirname(srcDir);

/** What each entry point's module object holds at run time, through the package's own exports map. */
const loaders: Record<EntryPoint, () => Promise<Record<string, unknown>>> = {
  '.': () => import('@fastpull/core'),
  './content': () => import('@fastpull/core/content'),
  './snapshots': () => import('@fastpull/core/snapshots'),
  './registry': () => import('@fastpull/core/registry'),
  './testing': () => import('@fastpull/core/testing'),
  './tuning': () => import('@fastpull/core/tuning'),
  './unpack': () => import('@fastpull/core/unpack'),
  './worker-ahead': () => import('@fastpull/core/worker-ahead'),
};

const entries = Object.keys(ENTRY_POINTS) as EntryPoint[];

describe('public surface', () => {
  let analysed: Record<EntryPoint, EntrySurface> | undefined;
  const analysis = (): Record<EntryPoint, EntrySurface> => (analysed ??= analyseSurface(srcDir));

  it('package.json exports every entry point with its source, types and build output', () => {
    expect(checkPackageExports(packageDir)).toEqual([]);
  });

  it.each(entries)('%s exports exactly the committed names', (entry) => {
    expect(analysis()[entry].names).toEqual(SURFACE[entry]);
  });

  it.each(entries)('%s exports the committed values at run time', async (entry) => {
    const values = SURFACE[entry].filter((n) => !n.startsWith('type ')).sort();
    expect(Object.keys(await loaders[entry]()).sort()).toEqual(values);
  });

  it.each(entries)('%s: every export has a summary, every function and class an @example, every member a comment, no `any`', (entry) => {
    expect(analysis()[entry].problems).toEqual([]);
  });

  it('VERSION is the package version', async () => {
    const pkg = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as { version: string };
    const { VERSION } = await loaders['.']();
    expect(VERSION).toBe(pkg.version);
  });
});

describe('surface check', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastpull-surface-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports a missing summary, a missing @example and `any`', () => {
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', types: [] } }));
    mkdirSync(join(dir, 'src'));
    writeFileSync(
      join(dir, 'src', 'mod.ts'),
      [
        '/**',
        ' * Documented, with an example.',
        ' * @example good(1)',
        ' */',
        'export function good(n: number): number { return n; }',
        '/** Documented, but no example. */',
        'export function noExample(): void {}',
        'export function bare(): void {}',
        '/**',
        ' * A class without an example.',
        ' */',
        'export class Thing {}',
        '/** Documented, with an any. @example loose(1) */',
        'export function loose(x: any): unknown { return x; }',
        '/** An interface whose field is any. */',
        'export interface Shape { readonly field: any }',
        '/** A type. */',
        'export type Fine = { readonly n: number };',
        '/** A constant holding a function. @example arrow() */',
        'export const arrow = (): number => 1;',
        '/** A constant holding a function, no example. */',
        'export const arrowBare = (): number => 1;',
      ].join('\n'),
    );
    const { names, problems } = analyseSurface(join(dir, 'src'), { '.': 'mod.ts' })['.'];
    expect(names).toEqual(['arrow', 'arrowBare', 'bare', 'type Fine', 'good', 'loose', 'noExample', 'type Shape', 'Thing']);
    expect(problems.sort()).toEqual(
      [
        'arrowBare: no @example',
        'bare: no TSDoc summary',
        'bare: no @example',
        'loose: `any` in loose parameter x',
        'noExample: no @example',
        'Shape: `any` in Shape.field',
        'Shape: member field has no comment',
        'Thing: no @example',
      ].sort(),
    );
  });
});
