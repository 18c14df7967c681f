// What a layer's snapshot looks like over the layers below it, and the few fixes that only those
// layers can decide. Layers unpack concurrently, each into its own directory, so an entry cannot
// look at the tree below while it is written; containerd and umoci apply each layer onto the merged
// tree of the ones below, and where that makes a difference the snapshot is put right here, after
// its own unpack and once every lower snapshot is committed:
// - a directory the layer implies (it has `d/f` but no `d/`) takes the mode, owner, times and
//   xattrs of the directory the lower layers show at that path, as containerd's applier copies them
//   up; with nothing below it stays 0755 root;
// - a whiteout that hides nothing below is dropped, and so is an implied directory left empty by
//   that (umoci makes nothing of such a whiteout; left alone, overlayfs would list a name whose
//   lookup fails in a directory only the top snapshot has).
import { isUtf8 } from 'node:buffer';
import fs from 'node:fs';
import { nativeFs } from '../native/addon.js';

/**
 * Paths of a layer whose right form depends on the layers below it, relative to the snapshot root,
 * as raw bytes in latin1 strings (names need not be UTF-8).
 */
export interface LowerChecks {
  /** Directories made only because an entry lies below them: a lower directory there lends its attributes. */
  impliedDirs: string[];
  /** Overlay whiteouts made: one hiding nothing below is dropped. */
  whiteouts: string[];
}

const OPAQUE_XATTRS = ['trusted.overlay.opaque', 'user.overlay.opaque'] as const;
/** overlayfs's own metadata, which belongs to one directory of one snapshot and never travels. */
const OVERLAY_XATTR = /^(trusted|user)\.overlay\./;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;

/** Options of {@link reconcileWithLowers}. */
export interface ReconcileOptions {
  /** Give implied directories the lower directory's owner (as root; a rootless unpack leaves owners). */
  readonly sameOwner: boolean;
}

/** What {@link reconcileWithLowers} changed. */
export interface ReconcileStats {
  /** Whiteouts dropped because no lower layer has anything at their path. */
  readonly whiteoutsDropped: number;
  /** Implied directories removed because nothing was left in them. */
  readonly dirsDropped: number;
  /** Implied directories that took the attributes of a lower directory. */
  readonly dirsCopied: number;
}

/**
 * The merged view of committed lower snapshots, top first, as overlayfs resolves it: a whiteout (a
 * 0:0 character device) or a non-directory hides everything below at its path, an opaque directory
 * hides the directories below it. Paths are raw bytes as latin1 strings, relative to the roots.
 * @example
 * const view = new LowerView([store.snapshots.fsPath(parentChainID)]);
 * const below = view.lookup('etc/passwd'); // { path, stat } or undefined
 */
export class LowerView {
  /** For a directory path: the lowers (indexes, top first) whose directory there is merged. */
  private readonly dirs = new Map<string, readonly number[]>();

  constructor(private readonly lowers: readonly string[]) {
    this.dirs.set(
      '',
      lowers.map((_, i) => i),
    );
  }

  /** The entry the lower layers show at `rel`, or undefined when they show none. */
  lookup(rel: string): { readonly path: Buffer; readonly stat: fs.BigIntStats } | undefined {
    const slash = rel.lastIndexOf('/');
    for (const i of this.layersOf(slash === -1 ? '' : rel.slice(0, slash))) {
      const p = this.pathIn(i, rel);
      const st = lstatOrUndefined(p);
      if (st === undefined) continue;
      if (isWhiteout(st)) return undefined;
      return { path: p, stat: st };
    }
    return undefined;
  }

  private layersOf(dir: string): readonly number[] {
    const known = this.dirs.get(dir);
    if (known !== undefined) return known;
    const slash = dir.lastIndexOf('/');
    const merged: number[] = [];
    for (const i of this.layersOf(slash === -1 ? '' : dir.slice(0, slash))) {
      const p = this.pathIn(i, dir);
      const st = lstatOrUndefined(p);
      if (st === undefined) continue;
      if (!st.isDirectory()) break; // a whiteout, file or symlink hides what is below
      merged.push(i);
      if (isOpaque(p)) break;
    }
    this.dirs.set(dir, merged);
    return merged;
  }

  private pathIn(i: number, rel: string): Buffer {
    return Buffer.from(`${Buffer.from(this.lowers[i]!, 'utf8').toString('latin1')}/${rel}`, 'latin1');
  }
}

/**
 * Settles what `checks` lists (see the top of this file) in the snapshot tree `upper`, given the
 * committed lower snapshots `lowers`, top first. Runs before the snapshot is committed, on the
 * calling thread; throws the filesystem's errors as they are.
 * @example
 * const stats = reconcileWithLowers(active.fs, lowerDirs, unpacked.stats.lowerChecks, { sameOwner: true });
 */
export function reconcileWithLowers(upper: string, lowers: readonly string[], checks: LowerChecks, options: ReconcileOptions): ReconcileStats {
  const view = new LowerView(lowers);
  const rawUpper = Buffer.from(upper, 'utf8').toString('latin1');
  const at = (rel: string): Buffer => Buffer.from(`${rawUpper}/${rel}`, 'latin1');
  let whiteoutsDropped = 0;
  let dirsDropped = 0;
  let dirsCopied = 0;
  for (const rel of checks.whiteouts) {
    if (view.lookup(rel) !== undefined) continue;
    fs.unlinkSync(at(rel));
    whiteoutsDropped++;
  }
  // Deepest first: a directory emptied of an implied child is itself empty then.
  const dirs = [...checks.impliedDirs].sort((a, b) => depth(b) - depth(a));
  for (const rel of dirs) {
    const p = at(rel);
    if (fs.readdirSync(p).length === 0 && !isOpaque(p)) {
      fs.rmdirSync(p);
      dirsDropped++;
      continue;
    }
    const below = view.lookup(rel);
    if (below === undefined || !below.stat.isDirectory()) continue;
    copyDirAttributes(below.path, below.stat, p, options);
    dirsCopied++;
  }
  return { whiteoutsDropped, dirsDropped, dirsCopied };
}

/** Mode, owner, xattrs and times of the lower directory `from` onto the directory `to`, through descriptors. */
function copyDirAttributes(from: Buffer, st: fs.BigIntStats, to: Buffer, options: ReconcileOptions): void {
  const native = nativeFs();
  withDir(from, (src) =>
    withDir(to, (dst, fd) => {
      for (const name of native.llistxattr(src)) {
        if (OVERLAY_XATTR.test(name)) continue;
        const value = native.lgetxattr(src, name);
        if (value !== null) native.lsetxattr(dst, name, value);
      }
      if (options.sameOwner) fs.fchownSync(fd, Number(st.uid), Number(st.gid));
      fs.fchmodSync(fd, Number(st.mode & 0o7777n)); // after chown, which clears setgid
      const sec = 1_000_000_000n;
      native.futimesNs(fd, st.atimeNs / sec, Number(st.atimeNs % sec), st.mtimeNs / sec, Number(st.mtimeNs % sec));
    }),
  );
}

/**
 * Runs `fn` on the directory `p` (raw bytes) opened without following a final symlink, giving it a
 * UTF-8 path to the directory itself for the native calls, which take no other: `/proc/self/fd/N/.`
 * resolves through the descriptor, and the final `.` is the directory, not a link.
 */
function withDir<T>(p: Buffer, fn: (path: string, fd: number) => T): T {
  const fd = fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    return fn(`/proc/self/fd/${fd}/.`, fd);
  } finally {
    fs.closeSync(fd);
  }
}

function depth(rel: string): number {
  let n = 0;
  for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) n++;
  return n;
}

function lstatOrUndefined(p: Buffer): fs.BigIntStats | undefined {
  try {
    return fs.lstatSync(p, { bigint: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // EACCES: below a directory of mode 0 in a rootless store, which no lookup of ours can read.
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES') return undefined;
    throw e;
  }
}

function isWhiteout(st: fs.BigIntStats): boolean {
  return st.isCharacterDevice() && st.rdev === 0n;
}

function isOpaque(p: Buffer): boolean {
  // The UTF-8 path itself when it is one (the common case: no descriptor needed), else through one.
  const marked = (path: string): boolean =>
    OPAQUE_XATTRS.some((name) => {
      try {
        return nativeFs().lgetxattr(path, name)?.toString() === 'y';
      } catch {
        return false; // trusted.* unreadable without privilege, or no xattr support: not marked
      }
    });
  if (isUtf8(p)) return marked(p.toString('utf8'));
  try {
    return withDir(p, marked);
  } catch {
    return false; // unreadable (mode 0, rootless): treated as merged, as its lookups find nothing
  }
}
