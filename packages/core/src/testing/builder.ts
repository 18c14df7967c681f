// Builds deterministic OCI and Docker images in memory, with the file tree an unpack of them must produce.
import { pack } from 'tar-stream';
import { spawnSync } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { FastpullError } from '../errors.js';
import { sha256Digest, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import type { Platform } from '../oci/platform.js';

/** Layer blob compression the builder can write. */
/** Layer compression; 'zstd' needs the zstd program (Debian package zstd) at /usr/bin/zstd. */
export type Compression = 'gzip' | 'zstd' | 'none';
/** Which family of media types an image uses. */
export type ImageFormat = 'oci' | 'docker';

/** Modification time written for entries that give none (2020-01-01T00:00:00Z, seconds): a constant keeps tars byte-identical. */
export const DEFAULT_MTIME = 1_577_836_800;
/** Mode of files that give none. */
export const DEFAULT_FILE_MODE = 0o644;
/** Mode of directories that give none, and of implicit parent directories. */
export const DEFAULT_DIR_MODE = 0o755;
/** Image config `created` timestamp: fixed, so configs and manifests are byte-identical across runs. */
const CREATED = '2020-01-01T00:00:00Z';
const WHITEOUT_PREFIX = '.wh.';
const OPAQUE_MARKER = '.wh..wh..opq';

/**
 * One entry of a layer. Paths are relative with no leading slash (`etc/app/config.json`); mtimes are
 * seconds since the epoch; uid and gid default to 0.
 * - `hardlink`: `target` is another path in the same layer, written earlier as a file.
 * - `whiteout`: deletes `path` (and everything below it) from lower layers; tar entry `dir/.wh.name`.
 * - `opaque`: the directory `path` hides everything below it from lower layers; tar entries for the
 *   directory and `path/.wh..wh..opq`. Entries of the same layer stay.
 * - `device`: a character or block device node (numbers up to 4095:1048575, what mknod(2) keeps).
 *   A character device 0:0 is what overlayfs takes for a whiteout: unpackers must refuse it.
 */
export type LayerEntry =
  | { type: 'file'; path: string; content: string | Uint8Array; mode?: number; uid?: number; gid?: number; mtime?: number }
  | { type: 'dir'; path: string; mode?: number; uid?: number; gid?: number; mtime?: number }
  | { type: 'symlink'; path: string; target: string; uid?: number; gid?: number; mtime?: number }
  | { type: 'hardlink'; path: string; target: string }
  | { type: 'whiteout'; path: string }
  | { type: 'opaque'; path: string }
  | { type: 'device'; path: string; device: 'char' | 'block'; major: number; minor: number; mode?: number; uid?: number; gid?: number; mtime?: number };

/** What a path of an unpacked image must be. `mode` is the permission bits including setuid/setgid/sticky (st_mode & 0o7777). */
export type ExpectedEntry =
  | { type: 'file'; mode: number; uid: number; gid: number; content: Buffer }
  | { type: 'dir'; mode: number; uid: number; gid: number }
  | { type: 'symlink'; target: string; uid: number; gid: number }
  /** A device node; `rdev` is its device number as stat(2) gives it. */
  | { type: 'special'; kind: 'char-device' | 'block-device'; mode: number; uid: number; gid: number; rdev: number };

/** A file system tree keyed by relative path (no leading slash; the root itself is not a key). */
export type ExpectedTree = Map<string, ExpectedEntry>;

/** A layer entry as written to the tar: every default filled in. */
export type TarEntry =
  | { type: 'file'; path: string; content: Buffer; mode: number; uid: number; gid: number; mtime: number }
  | { type: 'dir'; path: string; mode: number; uid: number; gid: number; mtime: number }
  | { type: 'symlink'; path: string; target: string; uid: number; gid: number; mtime: number }
  | { type: 'hardlink'; path: string; target: string; mode: number; uid: number; gid: number; mtime: number }
  | { type: 'whiteout'; path: string }
  | { type: 'opaque'; path: string }
  | { type: 'device'; path: string; device: 'char' | 'block'; major: number; minor: number; mode: number; uid: number; gid: number; mtime: number };

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

function invalid(message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', message);
}

function checkPath(path: string, what: string): void {
  if (typeof path !== 'string' || path.length === 0) throw invalid(`${what}: empty path`);
  if (path.startsWith('/') || path.endsWith('/')) throw invalid(`${what}: path ${JSON.stringify(path)} must be relative with no leading or trailing slash`);
  if (path.includes('\0')) throw invalid(`${what}: path contains NUL`);
  for (const part of path.split('/')) {
    if (part === '' || part === '.' || part === '..') throw invalid(`${what}: path ${JSON.stringify(path)} has an empty, "." or ".." component`);
  }
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (base.startsWith(WHITEOUT_PREFIX)) throw invalid(`${what}: ${JSON.stringify(path)} is a whiteout name; use a whiteout or opaque entry instead`);
}

function checkMode(mode: number, path: string): number {
  // tar-stream writes its own default for mode 0, so a 0 here would make the tar and the expected tree disagree.
  if (!Number.isInteger(mode) || mode <= 0 || mode > 0o7777) throw invalid(`layer entry ${JSON.stringify(path)}: mode must be in 0o1..0o7777, got ${mode}`);
  return mode;
}

function checkId(id: number, path: string): number {
  if (!Number.isInteger(id) || id < 0 || id > 0o777777) throw invalid(`layer entry ${JSON.stringify(path)}: uid/gid must be in 0..262143, got ${id}`);
  return id;
}

/** Largest numbers mknod(2) keeps whole in a Linux dev_t as it takes them: 12 bits of major, 20 of minor. */
const MAX_DEV_MAJOR = 0xfff;
const MAX_DEV_MINOR = 0xfffff;

function checkDev(n: number, max: number, path: string): number {
  if (!Number.isInteger(n) || n < 0 || n > max) throw invalid(`layer entry ${JSON.stringify(path)}: device numbers must be in 0..${max}, got ${n}`);
  return n;
}

/** The device number stat(2) reports for major:minor (glibc's makedev; numbers within the limits above). */
function makedev(major: number, minor: number): number {
  return (minor & 0xff) + major * 0x100 + Math.floor(minor / 0x100) * 0x100000;
}

function parentsOf(path: string): string[] {
  const parts = path.split('/');
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) out.push(parts.slice(0, i).join('/'));
  return out;
}

/** Resolves defaults and adds implicit parent directories, in tar order. */
function toTarEntries(entries: readonly LayerEntry[], lower: ReadonlyMap<string, ExpectedEntry> | undefined): TarEntry[] {
  const out: TarEntry[] = [];
  const dirsWritten = new Set<string>();
  const filesWritten = new Map<string, Extract<TarEntry, { type: 'file' }>>();
  // The first explicit dir entry of each path, so a child listed before its directory hoists that entry up.
  const explicitDir = new Map<string, number>();
  entries.forEach((e, i) => {
    if (e.type === 'dir' && !explicitDir.has(e.path)) explicitDir.set(e.path, i);
  });
  const hoisted = new Set<number>();

  const dirEntry = (e: Extract<LayerEntry, { type: 'dir' }>): TarEntry => ({
    type: 'dir',
    path: e.path,
    mode: checkMode(e.mode ?? DEFAULT_DIR_MODE, e.path),
    uid: checkId(e.uid ?? 0, e.path),
    gid: checkId(e.gid ?? 0, e.path),
    mtime: e.mtime ?? DEFAULT_MTIME,
  });
  const ensureDir = (dir: string, at: number): void => {
    if (dirsWritten.has(dir)) return;
    const j = explicitDir.get(dir);
    const given = j === undefined ? undefined : entries[j];
    if (j !== undefined && j > at && given?.type === 'dir' && !hoisted.has(j)) {
      hoisted.add(j);
      out.push(dirEntry(given));
    } else {
      const below = lower?.get(dir);
      out.push(
        below?.type === 'dir'
          ? { type: 'dir', path: dir, mode: below.mode, uid: below.uid, gid: below.gid, mtime: DEFAULT_MTIME }
          : { type: 'dir', path: dir, mode: DEFAULT_DIR_MODE, uid: 0, gid: 0, mtime: DEFAULT_MTIME },
      );
    }
    dirsWritten.add(dir);
    filesWritten.delete(dir);
  };
  const ensureParents = (path: string, at: number): void => {
    for (const p of parentsOf(path)) ensureDir(p, at);
  };
  const wroteNonDir = (path: string): void => {
    dirsWritten.delete(path);
    filesWritten.delete(path);
  };

  entries.forEach((e, i) => {
    const what = `layer entry ${i} (${e?.type})`;
    checkPath(e.path, what);
    switch (e.type) {
      case 'dir': {
        if (hoisted.has(i)) return;
        ensureParents(e.path, i);
        out.push(dirEntry(e));
        dirsWritten.add(e.path);
        filesWritten.delete(e.path);
        return;
      }
      case 'file': {
        ensureParents(e.path, i);
        wroteNonDir(e.path);
        const content = typeof e.content === 'string' ? Buffer.from(e.content, 'utf8') : Buffer.from(e.content.buffer, e.content.byteOffset, e.content.byteLength);
        const f = {
          type: 'file' as const,
          path: e.path,
          content,
          mode: checkMode(e.mode ?? DEFAULT_FILE_MODE, e.path),
          uid: checkId(e.uid ?? 0, e.path),
          gid: checkId(e.gid ?? 0, e.path),
          mtime: e.mtime ?? DEFAULT_MTIME,
        };
        out.push(f);
        filesWritten.set(e.path, f);
        return;
      }
      case 'symlink': {
        if (typeof e.target !== 'string' || e.target.length === 0 || e.target.includes('\0')) throw invalid(`${what}: symlink ${e.path} needs a non-empty target`);
        ensureParents(e.path, i);
        wroteNonDir(e.path);
        out.push({ type: 'symlink', path: e.path, target: e.target, uid: checkId(e.uid ?? 0, e.path), gid: checkId(e.gid ?? 0, e.path), mtime: e.mtime ?? DEFAULT_MTIME });
        return;
      }
      case 'hardlink': {
        const target = filesWritten.get(e.target);
        if (target === undefined) throw invalid(`${what}: hardlink ${e.path} -> ${e.target}: the target must be a file written earlier in the same layer`);
        if (e.target === e.path) throw invalid(`${what}: hardlink ${e.path} links to itself`);
        ensureParents(e.path, i);
        wroteNonDir(e.path);
        out.push({ type: 'hardlink', path: e.path, target: e.target, mode: target.mode, uid: target.uid, gid: target.gid, mtime: target.mtime });
        // A link to the link is a link to the same inode.
        filesWritten.set(e.path, target);
        return;
      }
      case 'whiteout':
        ensureParents(e.path, i);
        out.push({ type: 'whiteout', path: e.path });
        return;
      case 'opaque':
        ensureParents(e.path, i);
        ensureDir(e.path, i);
        out.push({ type: 'opaque', path: e.path });
        return;
      case 'device': {
        if (e.device !== 'char' && e.device !== 'block') throw invalid(`${what}: device ${e.path} must be 'char' or 'block'`);
        ensureParents(e.path, i);
        wroteNonDir(e.path);
        out.push({
          type: 'device',
          path: e.path,
          device: e.device,
          major: checkDev(e.major, MAX_DEV_MAJOR, e.path),
          minor: checkDev(e.minor, MAX_DEV_MINOR, e.path),
          mode: checkMode(e.mode ?? DEFAULT_FILE_MODE, e.path),
          uid: checkId(e.uid ?? 0, e.path),
          gid: checkId(e.gid ?? 0, e.path),
          mtime: e.mtime ?? DEFAULT_MTIME,
        });
        return;
      }
      default:
        throw invalid(`${what}: unknown entry type ${JSON.stringify((e as { type?: unknown }).type)}`);
    }
  });
  return out;
}

function markerPath(dir: string, name: string): string {
  return dir === '' ? name : `${dir}/${name}`;
}

function dirname(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash);
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
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
        p.entry({ name: markerPath(dirname(e.path), WHITEOUT_PREFIX + basename(e.path)), type: 'file', mode: DEFAULT_FILE_MODE, mtime: date(DEFAULT_MTIME) }, Buffer.alloc(0));
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

function removeSubtree(tree: ExpectedTree, path: string, keep?: ReadonlySet<string>): void {
  const prefix = `${path}/`;
  for (const key of [...tree.keys()]) {
    if ((key === path || key.startsWith(prefix)) && !keep?.has(key)) tree.delete(key);
  }
}

/**
 * Applies one layer to a tree with overlay semantics: whiteouts and opaque markers hide what lower
 * layers put there (never entries of the same layer), then the entries apply in tar order; a non-dir
 * replaces whatever was at its path, a dir over a dir only changes the attributes.
 * @example
 * const tree: ExpectedTree = new Map();
 * for (const layer of image.layers) applyLayer(tree, layer); // the tree the image should unpack to
 */
export function applyLayer(tree: ExpectedTree, layer: Pick<BuiltLayer, 'tarEntries'>): void {
  for (const e of layer.tarEntries) {
    if (e.type === 'whiteout') removeSubtree(tree, e.path);
    else if (e.type === 'opaque') {
      const dir = tree.get(e.path);
      removeSubtree(tree, e.path);
      if (dir !== undefined) tree.set(e.path, dir);
    }
  }
  for (const e of layer.tarEntries) {
    switch (e.type) {
      case 'dir':
        if (tree.get(e.path)?.type !== 'dir') removeSubtree(tree, e.path);
        tree.set(e.path, { type: 'dir', mode: e.mode, uid: e.uid, gid: e.gid });
        break;
      case 'file':
        removeSubtree(tree, e.path);
        tree.set(e.path, { type: 'file', mode: e.mode, uid: e.uid, gid: e.gid, content: e.content });
        break;
      case 'symlink':
        removeSubtree(tree, e.path);
        tree.set(e.path, { type: 'symlink', target: e.target, uid: e.uid, gid: e.gid });
        break;
      case 'hardlink': {
        const target = tree.get(e.target);
        if (target?.type !== 'file') throw new FastpullError('INTERNAL', `hardlink ${e.path} -> ${e.target}: target is not a file in the tree`);
        removeSubtree(tree, e.path);
        tree.set(e.path, { ...target });
        break;
      }
      case 'device':
        removeSubtree(tree, e.path);
        tree.set(e.path, { type: 'special', kind: e.device === 'char' ? 'char-device' : 'block-device', mode: e.mode, uid: e.uid, gid: e.gid, rdev: makedev(e.major, e.minor) });
        break;
      case 'whiteout':
      case 'opaque':
        break;
    }
  }
}

function cloneTree(tree: ReadonlyMap<string, ExpectedEntry>): ExpectedTree {
  return new Map([...tree].map(([k, v]) => [k, { ...v }]));
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
  /** The entries of each layer, bottom first. */
  readonly layers: readonly (readonly LayerEntry[])[];
  /** Default `gzip`. */
  readonly compression?: Compression;
  /** Default `oci`. */
  readonly format?: ImageFormat;
  /** Default linux/amd64. */
  readonly platform?: Platform;
  /** Manifest annotations. */
  readonly annotations?: Readonly<Record<string, string>>;
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
      config: {},
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
  if (r.error || r.status !== 0) throw invalid(`zstd compression needs /usr/bin/zstd (Debian package zstd): ${r.error?.message ?? r.stderr.toString().slice(0, 200)}`);
  return r.stdout;
}
