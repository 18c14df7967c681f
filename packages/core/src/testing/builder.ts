// Builds deterministic OCI and Docker images in memory, with the file tree an unpack of them must produce.
import { pack } from 'tar-stream';
import { spawnSync } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { sha256Digest, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import type { Platform } from '../oci/platform.js';
import {
  basename,
  applyLayer,
  cloneTree,
  DEFAULT_FILE_MODE,
  DEFAULT_MTIME,
  dirname,
  invalid,
  markerPath,
  OPAQUE_MARKER,
  toTarEntries,
  WHITEOUT_PREFIX,
  type ExpectedEntry,
  type ExpectedTree,
  type LayerEntry,
  type TarEntry,
} from './layer-tree.js';

export {
  applyLayer,
  DEFAULT_DIR_MODE,
  DEFAULT_FILE_MODE,
  DEFAULT_MTIME,
  type ExpectedEntry,
  type ExpectedTree,
  type LayerEntry,
  type TarEntry,
} from './layer-tree.js';

/** Layer blob compression the builder can write. */
/** Layer compression; 'zstd' needs the zstd program (Debian package zstd) at /usr/bin/zstd. */
export type Compression = 'gzip' | 'zstd' | 'none';
/** Which family of media types an image uses. */
export type ImageFormat = 'oci' | 'docker';

/** Image config `created` timestamp: fixed, so configs and manifests are byte-identical across runs. */
const CREATED = '2020-01-01T00:00:00Z';

/** One built layer: its uncompressed tar, its blob, and their digests. */
export interface BuiltLayer {
  /** The uncompressed tar. */
  readonly tar: Buffer;
  /** What a registry serves: the tar, compressed as `compression` says. */
  readonly blob: Buffer;
  /** Digest of `blob`. */
  readonly digest: Digest;
  /** Digest of `tar`. */
  readonly diffID: Digest;
  /** Byte length of `blob`. */
  readonly size: number;
  /** The layer media type, of the image format and compression. */
  readonly mediaType: string;
  /** How `blob` is compressed. */
  readonly compression: Compression;
  /** The entries as given. */
  readonly entries: readonly LayerEntry[];
  /**
   * The entries in tar order, defaults filled in and implicit parent directories added. An `opaque`
   * entry here stands for the marker alone; its directory is a `dir` entry written before it.
   */
  readonly tarEntries: readonly TarEntry[];
  /** The manifest descriptor of this layer. */
  readonly descriptor: Descriptor;
}

/** Options of {@link buildLayer}. */
export interface BuildLayerOptions {
  /** How to compress the blob. */
  readonly compression: Compression;
  /** Media type family; default `oci`. */
  readonly format?: ImageFormat;
  /**
   * The tree of the layers below. An implicit parent directory that exists there keeps its mode and
   * owner (as docker writes it, from the real directory); others get {@link DEFAULT_DIR_MODE} and 0:0.
   */
  readonly lower?: ReadonlyMap<string, ExpectedEntry>;
}

async function writeTar(entries: readonly TarEntry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const drained = (async () => {
    for await (const chunk of p) chunks.push(chunk as Buffer);
  })();
  const date = (s: number): Date => new Date(s * 1000);
  for (const e of entries) {
    switch (e.type) {
      case 'dir':
        // Trailing slash as docker and GNU tar write directory names.
        p.entry({ name: `${e.path}/`, type: 'directory', mode: e.mode, uid: e.uid, gid: e.gid, mtime: date(e.mtime) });
        break;
      case 'file':
        p.entry({ name: e.path, type: 'file', mode: e.mode, uid: e.uid, gid: e.gid, mtime: date(e.mtime) }, e.content);
        break;
      case 'symlink':
        p.entry({ name: e.path, type: 'symlink', linkname: e.target, mode: 0o777, uid: e.uid, gid: e.gid, mtime: date(e.mtime) });
        break;
      case 'hardlink':
        p.entry({ name: e.path, type: 'link', linkname: e.target, mode: e.mode, uid: e.uid, gid: e.gid, mtime: date(e.mtime) });
        break;
      case 'whiteout':
        p.entry(
          { name: markerPath(dirname(e.path), WHITEOUT_PREFIX + basename(e.path)), type: 'file', mode: DEFAULT_FILE_MODE, mtime: date(DEFAULT_MTIME) },
          Buffer.alloc(0),
        );
        break;
      case 'opaque':
        p.entry({ name: markerPath(e.path, OPAQUE_MARKER), type: 'file', mode: DEFAULT_FILE_MODE, mtime: date(DEFAULT_MTIME) }, Buffer.alloc(0));
        break;
      case 'device': {
        const type = e.device === 'char' ? 'character-device' : 'block-device';
        p.entry({ name: e.path, type, devmajor: e.major, devminor: e.minor, mode: e.mode, uid: e.uid, gid: e.gid, mtime: date(e.mtime) });
        break;
      }
    }
  }
  p.finalize();
  await drained;
  return Buffer.concat(chunks);
}

function layerMediaType(format: ImageFormat, compression: Compression): string {
  if (format === 'docker') {
    if (compression === 'zstd') throw invalid('Docker v2 manifests have no zstd layer type; use format oci');
    return compression === 'gzip' ? MediaTypes.DOCKER_LAYER_GZIP : MediaTypes.DOCKER_LAYER;
  }
  return compression === 'gzip' ? MediaTypes.OCI_LAYER_GZIP : compression === 'zstd' ? MediaTypes.OCI_LAYER_ZSTD : MediaTypes.OCI_LAYER;
}

function checkChoice<T extends string>(value: T, allowed: readonly T[], what: string): T {
  if (!allowed.includes(value)) throw invalid(`${what} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
  return value;
}

/** A layer of a tar given byte for byte. */
function rawLayer(tar: Buffer, compression: Compression, format: ImageFormat): BuiltLayer {
  const blob = compression === 'gzip' ? gzipSync(tar) : compression === 'zstd' ? zstdSync(tar) : tar;
  const digest = sha256Digest(blob);
  const mediaType = layerMediaType(format, compression);
  return {
    tar,
    blob,
    digest,
    diffID: compression === 'none' ? digest : sha256Digest(tar),
    size: blob.byteLength,
    mediaType,
    compression,
    entries: [],
    tarEntries: [],
    descriptor: { mediaType, digest, size: blob.byteLength },
  };
}

/**
 * Builds one layer. The same entries and options always give byte-identical tars and blobs (fixed
 * mtimes, gzip header mtime 0). Zero entries give a valid empty tar (just the two end blocks).
 *
 * @example
 * const layer = await buildLayer([{ type: 'file', path: 'etc/hostname', content: 'box\n' }], { compression: 'gzip' });
 * layer.tarEntries.map((e) => e.path); // ['etc', 'etc/hostname']
 */
export async function buildLayer(entries: readonly LayerEntry[], options: BuildLayerOptions): Promise<BuiltLayer> {
  const compression = checkChoice(options.compression, ['gzip', 'zstd', 'none'], 'compression');
  const format = checkChoice(options.format ?? 'oci', ['oci', 'docker'], 'format');
  const tarEntries = toTarEntries(entries, options.lower);
  const tar = await writeTar(tarEntries);
  const blob = compression === 'gzip' ? gzipSync(tar) : compression === 'zstd' ? zstdSync(tar) : tar;
  const digest = sha256Digest(blob);
  const mediaType = layerMediaType(format, compression);
  return {
    tar,
    blob,
    digest,
    diffID: compression === 'none' ? digest : sha256Digest(tar),
    size: blob.byteLength,
    mediaType,
    compression,
    entries: [...entries],
    tarEntries,
    descriptor: { mediaType, digest, size: blob.byteLength },
  };
}

/** One built image: layers, config and manifest, with everything a registry must serve for it. */
export interface BuiltImage {
  /** The layers, bottom first. */
  readonly layers: readonly BuiltLayer[];
  /** The image config's bytes. */
  readonly config: Buffer;
  /** Digest of `config`. */
  readonly configDigest: Digest;
  /** The manifest's bytes. */
  readonly manifest: Buffer;
  /** Digest of `manifest`. */
  readonly manifestDigest: Digest;
  /** The manifest's media type (OCI or Docker, by `format`). */
  readonly manifestMediaType: string;
  /** The manifest's descriptor, platform included (as an index lists it). */
  readonly manifestDescriptor: Descriptor;
  /** The platform the config names. */
  readonly platform: Platform;
  /** The media type family of manifest, config and layers. */
  readonly format: ImageFormat;
  /** Config and layer blobs by digest (a layer used twice appears once). */
  readonly blobs: ReadonlyMap<Digest, Buffer>;
  /** The tree that unpacking all layers in order must produce (a fresh copy on each call). */
  expectedTree(): ExpectedTree;
}

/** Options of {@link buildImage}. */
export interface BuildImageOptions {
  /**
   * The entries of each layer, bottom first; or a layer's tar itself, taken byte for byte (compressed
   * as `compression` says), for layers no entry list can describe: its entries are not in the image's
   * expected tree.
   */
  readonly layers: readonly (readonly LayerEntry[] | Uint8Array)[];
  /** Default `gzip`. */
  readonly compression?: Compression;
  /** Default `oci`. */
  readonly format?: ImageFormat;
  /** Default linux/amd64. */
  readonly platform?: Platform;
  /** Manifest annotations. */
  readonly annotations?: Readonly<Record<string, string>>;
  /**
   * The config's `config` object, what a runtime starts a container with when it is told no
   * command (`Entrypoint`, `Cmd`, `Env`, `WorkingDir`); default `{}`.
   */
  readonly containerConfig?: Readonly<Record<string, unknown>>;
}

const DEFAULT_PLATFORM: Platform = { os: 'linux', architecture: 'amd64' };

function platformJSON(p: Platform): Platform {
  return {
    architecture: p.architecture,
    os: p.os,
    ...(p['os.version'] !== undefined ? { 'os.version': p['os.version'] } : {}),
    ...(p['os.features'] !== undefined ? { 'os.features': [...p['os.features']] } : {}),
    ...(p.variant ? { variant: p.variant } : {}),
  };
}

/**
 * Builds an image from layer entries. Deterministic: the same options give the same manifest digest.
 *
 * @example
 * const image = await buildImage({ layers: [[{ type: 'file', path: 'hello', content: 'hi\n' }]] });
 * image.expectedTree().get('hello'); // { type: 'file', mode: 0o644, uid: 0, gid: 0, content: <hi\n> }
 */
export async function buildImage(options: BuildImageOptions): Promise<BuiltImage> {
  const compression = options.compression ?? 'gzip';
  const format = options.format ?? 'oci';
  const platform = options.platform ?? DEFAULT_PLATFORM;
  if (!Array.isArray(options.layers)) throw invalid('buildImage: layers must be an array of entry lists');

  const tree: ExpectedTree = new Map();
  const layers: BuiltLayer[] = [];
  for (const entries of options.layers) {
    if (entries instanceof Uint8Array) {
      layers.push(rawLayer(Buffer.from(entries), compression, format));
      continue;
    }
    const layer = await buildLayer(entries, { compression, format, lower: tree });
    applyLayer(tree, layer);
    layers.push(layer);
  }

  const config = Buffer.from(
    JSON.stringify({
      created: CREATED,
      architecture: platform.architecture,
      os: platform.os,
      ...(platform.variant ? { variant: platform.variant } : {}),
      config: { ...options.containerConfig },
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffID) },
      history: layers.map((l, i) => ({ created: CREATED, created_by: `fastpull testing: layer ${i + 1} (${l.entries.length} entries)` })),
    }),
  );
  const configDigest = sha256Digest(config);
  const docker = format === 'docker';
  const manifestMediaType = docker ? MediaTypes.DOCKER_MANIFEST : MediaTypes.OCI_MANIFEST;
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: manifestMediaType,
      config: { mediaType: docker ? MediaTypes.DOCKER_CONFIG : MediaTypes.OCI_CONFIG, digest: configDigest, size: config.byteLength },
      layers: layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.size })),
      ...(options.annotations ? { annotations: { ...options.annotations } } : {}),
    }),
  );
  const manifestDigest = sha256Digest(manifest);
  const blobs = new Map<Digest, Buffer>([[configDigest, config]]);
  for (const l of layers) blobs.set(l.digest, l.blob);
  const finalTree = cloneTree(tree);
  return {
    layers,
    config,
    configDigest,
    manifest,
    manifestDigest,
    manifestMediaType,
    manifestDescriptor: { mediaType: manifestMediaType, digest: manifestDigest, size: manifest.byteLength, platform: platformJSON(platform) },
    platform,
    format,
    blobs,
    expectedTree: () => cloneTree(finalTree),
  };
}

/** An image index (or Docker manifest list) over built images. */
export interface BuiltIndex {
  /** The index's bytes. */
  readonly index: Buffer;
  /** Digest of `index`. */
  readonly digest: Digest;
  /** OCI image index or Docker manifest list, by format. */
  readonly mediaType: string;
  /** The images it lists, in order. */
  readonly images: readonly BuiltImage[];
  /** Config and layer blobs of all its images by digest. */
  readonly blobs: ReadonlyMap<Digest, Buffer>;
}

/**
 * Builds an index listing each image's manifest with its platform.
 *
 * @example
 * const index = buildIndex([amd64, arm64]); // index.mediaType === MediaTypes.OCI_INDEX
 */
export function buildIndex(images: readonly BuiltImage[], options: { format?: ImageFormat; annotations?: Readonly<Record<string, string>> } = {}): BuiltIndex {
  const format = checkChoice(options.format ?? 'oci', ['oci', 'docker'], 'format');
  const mediaType = format === 'docker' ? MediaTypes.DOCKER_MANIFEST_LIST : MediaTypes.OCI_INDEX;
  const index = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType,
      manifests: images.map((im) => ({ ...im.manifestDescriptor })),
      ...(options.annotations ? { annotations: { ...options.annotations } } : {}),
    }),
  );
  const blobs = new Map<Digest, Buffer>();
  for (const im of images) for (const [d, b] of im.blobs) blobs.set(d, b);
  return { index, digest: sha256Digest(index), mediaType, images: [...images], blobs };
}

/** zstd-compresses with the zstd program (Node 20 has no zstd encoder); deterministic for one version. */
function zstdSync(data: Buffer): Buffer {
  const r = spawnSync('/usr/bin/zstd', ['-q', '-c', '-3', '--no-check'], { input: data, maxBuffer: 2 ** 31 - 1 });
  if (r.error || r.status !== 0)
    throw invalid(`zstd compression needs /usr/bin/zstd (Debian package zstd): ${r.error?.message ?? r.stderr.toString().slice(0, 200)}`);
  return r.stdout;
}
