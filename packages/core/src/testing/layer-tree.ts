// The layer entries the test kit builds from, the tar entries they become (whiteouts, opaque markers,
// implied parents), and the file tree an unpack of a stack of layers must produce.
import { FastpullError } from '../errors.js';

/** Modification time written for entries that give none (2020-01-01T00:00:00Z, seconds): a constant keeps tars byte-identical. */
export const DEFAULT_MTIME = 1_577_836_800;
/** Mode of files that give none. */
export const DEFAULT_FILE_MODE = 0o644;
/** Mode of directories that give none, and of implicit parent directories. */
export const DEFAULT_DIR_MODE = 0o755;
export const WHITEOUT_PREFIX = '.wh.';
export const OPAQUE_MARKER = '.wh..wh..opq';

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

export function invalid(message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', message);
}

export function checkPath(path: string, what: string): void {
  if (typeof path !== 'string' || path.length === 0) throw invalid(`${what}: empty path`);
  if (path.startsWith('/') || path.endsWith('/')) throw invalid(`${what}: path ${JSON.stringify(path)} must be relative with no leading or trailing slash`);
  if (path.includes('\0')) throw invalid(`${what}: path contains NUL`);
  for (const part of path.split('/')) {
    if (part === '' || part === '.' || part === '..') throw invalid(`${what}: path ${JSON.stringify(path)} has an empty, "." or ".." component`);
  }
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (base.startsWith(WHITEOUT_PREFIX)) throw invalid(`${what}: ${JSON.stringify(path)} is a whiteout name; use a whiteout or opaque entry instead`);
}

export function checkMode(mode: number, path: string): number {
  // tar-stream writes its own default for mode 0, so a 0 here would make the tar and the expected tree disagree.
  if (!Number.isInteger(mode) || mode <= 0 || mode > 0o7777) throw invalid(`layer entry ${JSON.stringify(path)}: mode must be in 0o1..0o7777, got ${mode}`);
  return mode;
}

export function checkId(id: number, path: string): number {
  if (!Number.isInteger(id) || id < 0 || id > 0o777777) throw invalid(`layer entry ${JSON.stringify(path)}: uid/gid must be in 0..262143, got ${id}`);
  return id;
}

/** Largest numbers mknod(2) keeps whole in a Linux dev_t as it takes them: 12 bits of major, 20 of minor. */
const MAX_DEV_MAJOR = 0xfff;
const MAX_DEV_MINOR = 0xfffff;

export function checkDev(n: number, max: number, path: string): number {
  if (!Number.isInteger(n) || n < 0 || n > max) throw invalid(`layer entry ${JSON.stringify(path)}: device numbers must be in 0..${max}, got ${n}`);
  return n;
}

/** The device number stat(2) reports for major:minor (glibc's makedev; numbers within the limits above). */
export function makedev(major: number, minor: number): number {
  return (minor & 0xff) + major * 0x100 + Math.floor(minor / 0x100) * 0x100000;
}

export function parentsOf(path: string): string[] {
  const parts = path.split('/');
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) out.push(parts.slice(0, i).join('/'));
  return out;
}

/** Resolves defaults and adds implicit parent directories, in tar order. */
export function toTarEntries(entries: readonly LayerEntry[], lower: ReadonlyMap<string, ExpectedEntry> | undefined): TarEntry[] {
  const plan = new TarPlan(entries, lower);
  entries.forEach((e, i) => plan.add(e, i));
  return plan.out;
}

/** The tar entries of one layer as they are planned, with what was written so far at each path. */
class TarPlan {
  readonly out: TarEntry[] = [];
  private readonly dirsWritten = new Set<string>();
  private readonly filesWritten = new Map<string, Extract<TarEntry, { type: 'file' }>>();
  /** The first explicit dir entry of each path, so a child listed before its directory hoists that entry up. */
  private readonly explicitDir = new Map<string, number>();
  private readonly hoisted = new Set<number>();

  constructor(
    private readonly entries: readonly LayerEntry[],
    private readonly lower: ReadonlyMap<string, ExpectedEntry> | undefined,
  ) {
    entries.forEach((e, i) => {
      if (e.type === 'dir' && !this.explicitDir.has(e.path)) this.explicitDir.set(e.path, i);
    });
  }

  /** Plans entry `i`, after the directories above it. */
  add(e: LayerEntry, i: number): void {
    const what = `layer entry ${i} (${e?.type})`;
    checkPath(e.path, what);
    switch (e.type) {
      case 'dir': {
        if (this.hoisted.has(i)) return;
        this.ensureParents(e.path, i);
        this.out.push(dirEntry(e));
        this.dirsWritten.add(e.path);
        this.filesWritten.delete(e.path);
        return;
      }
      case 'file':
        return this.addFile(e, i);
      case 'symlink': {
        if (typeof e.target !== 'string' || e.target.length === 0 || e.target.includes('\0'))
          throw invalid(`${what}: symlink ${e.path} needs a non-empty target`);
        this.ensureParents(e.path, i);
        this.wroteNonDir(e.path);
        this.out.push({
          type: 'symlink',
          path: e.path,
          target: e.target,
          uid: checkId(e.uid ?? 0, e.path),
          gid: checkId(e.gid ?? 0, e.path),
          mtime: e.mtime ?? DEFAULT_MTIME,
        });
        return;
      }
      case 'hardlink':
        return this.addHardlink(e, i, what);
      case 'whiteout':
        this.ensureParents(e.path, i);
        this.out.push({ type: 'whiteout', path: e.path });
        return;
      case 'opaque':
        this.ensureParents(e.path, i);
        this.ensureDir(e.path, i);
        this.out.push({ type: 'opaque', path: e.path });
        return;
      case 'device':
        return this.addDevice(e, i, what);
      default:
        throw invalid(`${what}: unknown entry type ${JSON.stringify((e as { type?: unknown }).type)}`);
    }
  }

  private addFile(e: Extract<LayerEntry, { type: 'file' }>, i: number): void {
    this.ensureParents(e.path, i);
    this.wroteNonDir(e.path);
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
    this.out.push(f);
    this.filesWritten.set(e.path, f);
  }

  private addHardlink(e: Extract<LayerEntry, { type: 'hardlink' }>, i: number, what: string): void {
    const target = this.filesWritten.get(e.target);
    if (target === undefined) throw invalid(`${what}: hardlink ${e.path} -> ${e.target}: the target must be a file written earlier in the same layer`);
    if (e.target === e.path) throw invalid(`${what}: hardlink ${e.path} links to itself`);
    this.ensureParents(e.path, i);
    this.wroteNonDir(e.path);
    this.out.push({ type: 'hardlink', path: e.path, target: e.target, mode: target.mode, uid: target.uid, gid: target.gid, mtime: target.mtime });
    // A link to the link is a link to the same inode.
    this.filesWritten.set(e.path, target);
  }

  private addDevice(e: Extract<LayerEntry, { type: 'device' }>, i: number, what: string): void {
    if (e.device !== 'char' && e.device !== 'block') throw invalid(`${what}: device ${e.path} must be 'char' or 'block'`);
    this.ensureParents(e.path, i);
    this.wroteNonDir(e.path);
    this.out.push({
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
  }

  private ensureDir(dir: string, at: number): void {
    if (this.dirsWritten.has(dir)) return;
    const j = this.explicitDir.get(dir);
    const given = j === undefined ? undefined : this.entries[j];
    if (j !== undefined && j > at && given?.type === 'dir' && !this.hoisted.has(j)) {
      this.hoisted.add(j);
      this.out.push(dirEntry(given));
    } else {
      const below = this.lower?.get(dir);
      this.out.push(
        below?.type === 'dir'
          ? { type: 'dir', path: dir, mode: below.mode, uid: below.uid, gid: below.gid, mtime: DEFAULT_MTIME }
          : { type: 'dir', path: dir, mode: DEFAULT_DIR_MODE, uid: 0, gid: 0, mtime: DEFAULT_MTIME },
      );
    }
    this.dirsWritten.add(dir);
    this.filesWritten.delete(dir);
  }

  private ensureParents(path: string, at: number): void {
    for (const p of parentsOf(path)) this.ensureDir(p, at);
  }

  private wroteNonDir(path: string): void {
    this.dirsWritten.delete(path);
    this.filesWritten.delete(path);
  }
}

/** A dir entry with its defaults filled in. */
function dirEntry(e: Extract<LayerEntry, { type: 'dir' }>): TarEntry {
  return {
    type: 'dir',
    path: e.path,
    mode: checkMode(e.mode ?? DEFAULT_DIR_MODE, e.path),
    uid: checkId(e.uid ?? 0, e.path),
    gid: checkId(e.gid ?? 0, e.path),
    mtime: e.mtime ?? DEFAULT_MTIME,
  };
}

export function markerPath(dir: string, name: string): string {
  return dir === '' ? name : `${dir}/${name}`;
}

export function dirname(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash);
}

export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

export function removeSubtree(tree: ExpectedTree, path: string, keep?: ReadonlySet<string>): void {
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
export function applyLayer(tree: ExpectedTree, layer: { readonly tarEntries: readonly TarEntry[] }): void {
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
        tree.set(e.path, {
          type: 'special',
          kind: e.device === 'char' ? 'char-device' : 'block-device',
          mode: e.mode,
          uid: e.uid,
          gid: e.gid,
          rdev: makedev(e.major, e.minor),
        });
        break;
      case 'whiteout':
      case 'opaque':
        break;
    }
  }
}

export function cloneTree(tree: ReadonlyMap<string, ExpectedEntry>): ExpectedTree {
  return new Map([...tree].map(([k, v]) => [k, { ...v }]));
}
