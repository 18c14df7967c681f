// Applies one layer's tar stream to an empty directory, in the overlayfs lower-dir form of containerd's overlay snapshotter.
import { isUtf8 } from 'node:buffer';
import fs from 'node:fs';
import path from 'node:path';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import { nativeFs } from './native.js';
import { TarReader, type TarEntry } from './tarreader.js';
import { LayerWriteback, type FileWriteback, type WritebackMode } from './writeback.js';

/** Options of {@link applyLayer}. */
export interface ApplyOptions {
  /** Stops the apply with ABORTED. */
  signal?: AbortSignal;
  /** Give files the owners the layer names (lchown). Default: when running as root and not rootless. */
  sameOwner?: boolean;
  /**
   * Lay the layer out for a rootless overlay mount (`-o userxattr`, Linux 5.11+): opaque directories
   * are marked with `user.overlay.opaque` instead of `trusted.overlay.opaque`, and owners are not
   * changed (an unprivileged user cannot). Whiteouts stay 0:0 character devices, which Linux 5.8+
   * lets unprivileged users create. Default: when not running as root.
   */
  rootless?: boolean;
  /** Names the layer in messages (its diffID or blob digest, say). Default: the destination alone. */
  layer?: string;
  /** Bounds on what one layer may hold; each one left out takes its {@link DEFAULT_APPLY_LIMITS} value. */
  limits?: Partial<ApplyLimits>;
  /** Start files' write-back as they are written (snapshots/durable.ts flushes the rest). Default: none. */
  writeback?: WritebackMode;
}

/**
 * Bounds on one layer, so that a crafted tar cannot exhaust memory, disk or time before it is
 * caught. Going over a size limit fails with INVALID_LAYER, over any other with HOSTILE_LAYER;
 * either error names the limit.
 */
export interface ApplyLimits {
  /** Most bytes in an entry's name or a hardlink's target, as the tar holds it. */
  maxPathBytes: number;
  /** Most components in a path once cleaned. */
  maxPathDepth: number;
  /** Most bytes in a symlink's target. */
  maxSymlinkBytes: number;
  /** Most entries in the layer (PAX and long-name headers count with the entry they describe). */
  maxEntries: number;
  /**
   * Most bytes in the uncompressed tar, and most bytes in all the files it makes, a sparse file
   * counted at its full size.
   */
  maxTotalBytes: number;
  /** Most bytes in one PAX header, GNU long name or sparse map. */
  maxPaxHeaderBytes: number;
}

/** The limits {@link applyLayer} uses unless told otherwise. */
export const DEFAULT_APPLY_LIMITS: Readonly<ApplyLimits> = Object.freeze({
  // PATH_MAX on Linux: no longer path can be opened from the root in one call anyway.
  maxPathBytes: 4096,
  // Real images nest a few dozen deep; 256 leaves room and keeps per-entry walks short.
  maxPathDepth: 256,
  // PATH_MAX again: the kernel refuses longer symlink targets (ENAMETOOLONG).
  maxSymlinkBytes: 4096,
  // The largest real layers hold about a million entries; every entry costs memory until the end.
  maxEntries: 5_000_000,
  // 1 TiB: far above any real layer, low enough that a forged size cannot promise exabytes.
  maxTotalBytes: 2 ** 40,
  // Go's archive/tar caps these at 1 MiB too: a layer made by Go tooling never has more.
  maxPaxHeaderBytes: 2 ** 20,
});

/** What {@link applyLayer} did. */
export interface ApplyStats {
  /** Tar entries read (PAX and GNU long-name headers are part of the entry they describe). */
  entries: number;
  /** Regular files written (hardlinks not counted). */
  files: number;
  /** Bytes of regular file content written (a sparse file's data, not its holes). */
  bytes: number;
  /** Whiteouts converted to overlay form: `.wh.NAME` files and `.wh..wh..opq` opaque markers. */
  whiteouts: number;
  /** Entries not extracted: the root entry, aufs metadata, device nodes and whiteouts without privilege. */
  skipped: number;
  /** What was skipped or dropped and why, for the first {@link MAX_WARNINGS} cases. */
  warnings: string[];
  /** Milliseconds spent reading tar headers and writing the tree, waits for tar bytes excluded. */
  extractMs: number;
  /**
   * What only the layers below can settle, for {@link reconcileWithLowers} once they are committed:
   * parents this layer implies but never names, and the whiteouts it made.
   */
  lowerChecks: LowerChecks;
}

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

/** How many warnings {@link ApplyStats.warnings} keeps: a layer of ten thousand device nodes must not make a huge list. */
export const MAX_WARNINGS = 32;

const WHITEOUT_PREFIX = '.wh.';
const WHITEOUT_META_PREFIX = '.wh..wh.';
const WHITEOUT_OPAQUE = '.wh..wh..opq';
const OVERLAY_OPAQUE_XATTR = 'trusted.overlay.opaque';
/** What overlayfs reads instead when mounted with `userxattr` (rootless). */
const ROOTLESS_OPAQUE_XATTR = 'user.overlay.opaque';
const XATTR_PAX_PREFIX = 'SCHILY.xattr.';
const { S_IFCHR, S_IFBLK, S_IFIFO, O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fs.constants;
/** Linux dev_t as the kernel takes it from mknod: 12 bits of major, 20 of minor. Larger numbers would be truncated into other devices. */
const MAX_DEV_MAJOR = 0xfff;
const MAX_DEV_MINOR = 0xfffff;
/** (uid_t)-1 tells chown "leave it": an owner the layer names must never mean that. */
const MAX_ID = 0xffff_fffe;
/** Times past this (about year 5138) are no real file's and overflow some time_t conversions. */
const MAX_ABS_TIME = 1e11;

/** A time as utimensat(2) takes it: whole seconds since the epoch (negative before 1970) and 0-999999999 nanoseconds. */
export interface Timespec {
  sec: number;
  nsec: number;
}

/** The times an entry gives what it makes. */
interface Times {
  atime: Timespec;
  mtime: Timespec;
}

/** What this layer made at a path. Only this apply writes the directory, so the tree is the truth. */
type Kind = 'dir' | 'file' | 'symlink' | 'special' | 'whiteout';

/** A path this layer made. Directories hold their children by name (raw bytes as latin1). */
interface Node {
  kind: Kind;
  children?: Map<string, Node>;
  /** The mode and times finish() gives a directory; no times for a parent the layer never named (`implied`). */
  meta?: { mode: number; times?: Times; implied?: true };
}

/**
 * Extracts one layer's uncompressed tar into `dest`, an existing empty directory (the layer's active
 * snapshot), laid out as an overlayfs lower directory:
 * - `DIR/.wh.NAME` becomes a character device 0:0 at `DIR/NAME` (an overlay whiteout) owned as the
 *   entry says; `DIR/.wh..wh..opq` sets `trusted.overlay.opaque=y` on DIR; other `.wh..wh.*` names
 *   are dropped. A whiteout hides lower layers only (image-spec layer.md): what this layer itself
 *   made at `DIR/NAME`, before or after the whiteout, stays, and a directory there is made opaque.
 * - Paths resolve inside `dest` as if it were `/`, and nothing is created, written or has its
 *   metadata changed through a symlink: a `..` component or NUL in a name, a parent that is a
 *   symlink or a file (whatever earlier entries made it), a whiteout of `.` or `..`, a hardlink
 *   through a symlink, device numbers the kernel would truncate, owner ids meaning "unchanged", and
 *   overlay xattrs (`trusted.overlay.*`, `user.overlay.*`) fail with HOSTILE_LAYER. A hardlink must
 *   point at a non-directory this layer already made (INVALID_LAYER otherwise). Missing parents
 *   are made 0755. Names are bytes: ones that are not UTF-8 are kept exactly. What only the layers
 *   below can settle (implied parents, whiteouts) is listed in {@link ApplyStats.lowerChecks} for
 *   `reconcileWithLowers` (snapshots/lowers.ts).
 * - A directory that replaces a whiteout or a non-directory this layer made at its path is opaque.
 * - A later entry for a path replaces the earlier one, whatever the types; a directory over a
 *   directory keeps its contents.
 * - Owners (when `sameOwner`), modes incl. setuid, mtimes to the nanosecond and `SCHILY.xattr.*`
 *   records are applied without following symlinks; other `trusted.*` xattrs are dropped with a
 *   warning. Directory modes and mtimes are applied last, deepest first. Sparse files are written
 *   sparse.
 * - Entry types other than files, directories, links, devices and fifos fail with INVALID_LAYER.
 * - {@link ApplyOptions.limits} bound the layer.
 * - The tar is read to its last byte even past the end-of-archive marker (the caller hashes it);
 *   entries after the marker are ignored, as Go's archive/tar does.
 * - On any failure `dest` is emptied again before the error is thrown.
 *
 * Errors: HOSTILE_LAYER, INVALID_LAYER (corrupt tar, unsupported entry), INVALID_ARGUMENT (bad dest
 * or limits), NO_SPACE, ABORTED, INTERNAL (other filesystem errors); errors of `tar` itself are
 * rethrown unchanged. Messages name the layer and the entry; `details` hold `entry` and `offset`.
 */
export async function applyLayer(tar: AsyncIterable<Uint8Array>, dest: string, options: ApplyOptions = {}): Promise<ApplyStats> {
  const { signal } = options;
  const rootless = options.rootless ?? process.getuid?.() !== 0;
  const sameOwner = options.sameOwner ?? !rootless;
  const root = path.resolve(dest);
  const what = options.layer === undefined ? `applying layer to ${root}` : `applying layer ${options.layer} to ${root}`;
  throwIfAborted(signal, what);
  const limits = resolveLimits(options.limits, what);
  checkDest(root, what);

  const source = tar[Symbol.asyncIterator]();
  const reader = new TarReader(source, {
    what,
    maxHeaderBytes: limits.maxPaxHeaderBytes,
    maxTarBytes: limits.maxTotalBytes,
    // A listener per read, removed when the read settles. (Promise.race against one long-lived
    // "aborted" promise would keep every chunk ever read alive until the apply ends: memory would
    // grow with the layer.)
    ...(signal ? { race: <T>(p: Promise<T>) => raceAbort(p, signal, what) } : {}),
  });
  const writer = new LayerWriter(root, sameOwner, limits, signal, what, reader, rootless ? ROOTLESS_OPAQUE_XATTR : OVERLAY_OPAQUE_XATTR, LayerWriteback.open(options.writeback, root));
  const started = performance.now();
  let ok = false;
  try {
    for (let entry = await reader.next(); entry !== null; entry = await reader.next()) {
      throwIfAborted(signal, what);
      await writer.entry(entry);
    }
    await reader.drain(); // the rest of the stream, past the end of the tar
    throwIfAborted(signal, what);
    writer.finish();
    ok = true;
    writer.stats.extractMs = Math.max(0, performance.now() - started - reader.inputWaitMs);
    return writer.stats;
  } catch (e) {
    if (signal?.aborted && !isFastpullError(e) && e !== reader.sourceError) throw abortError(signal, what);
    throw e;
  } finally {
    if (!ok) {
      // Let go of the source (a stream is destroyed), without waiting, for it may be stuck, and only
      // after our error has reached the caller: a pipeline reports the first error it sees.
      setImmediate(() => void Promise.resolve().then(() => source.return?.()).catch(() => undefined));
      emptyDir(root);
    }
  }
}

/** `p`, or ABORTED as soon as `signal` fires, whichever comes first; holds nothing once settled. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal, what: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal, what));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal, what));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function resolveLimits(given: Partial<ApplyLimits> | undefined, what: string): ApplyLimits {
  const limits: ApplyLimits = { ...DEFAULT_APPLY_LIMITS };
  for (const key of Object.keys(DEFAULT_APPLY_LIMITS) as Array<keyof ApplyLimits>) {
    const value = given?.[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new FastpullError('INVALID_ARGUMENT', `${what}: limits.${key} must be a positive integer, got ${String(value)}`);
    }
    limits[key] = value;
  }
  return limits;
}

function checkDest(root: string, what: string): void {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(root);
  } catch (e) {
    throw new FastpullError('INVALID_ARGUMENT', `${what}: the destination must be an existing directory`, { cause: e });
  }
  if (!st.isDirectory()) throw new FastpullError('INVALID_ARGUMENT', `${what}: the destination is not a directory (or is a symlink)`);
  if (fs.readdirSync(root).length > 0) throw new FastpullError('INVALID_ARGUMENT', `${what}: the destination is not empty`);
}

/** Removes what a failed apply left (best effort: the error that got us here matters more). */
function emptyDir(root: string): void {
  let names: Buffer[];
  try {
    names = fs.readdirSync(root, { encoding: 'buffer' });
  } catch {
    return;
  }
  const prefix = Buffer.from(`${root}/`);
  for (const name of names) {
    try {
      fs.rmSync(Buffer.concat([prefix, name]), { recursive: true, force: true }); // never follows symlinks
    } catch {
      // leave it to the caller's cleanup
    }
  }
}

/**
 * A tar path as a clean relative path: leading `/` and `./` stripped, `.` and empty components
 * dropped. '' is the root. A `..` component or a NUL is hostile. Names are taken as they come
 * (for a layer's entries: raw bytes, one char per byte).
 */
export function cleanEntryPath(name: string, what: string): string {
  if (name.includes('\0')) throw new FastpullError('HOSTILE_LAYER', `${what}: NUL in path ${JSON.stringify(name)}`);
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') throw new FastpullError('HOSTILE_LAYER', `${what}: path ${JSON.stringify(name)} has a ".." component`);
    parts.push(part);
  }
  return parts.join('/');
}

const ASCII = /^[\x00-\x7f]*$/;

/** A raw name (latin1 chars) for people: decoded as UTF-8. */
function display(raw: string): string {
  return ASCII.test(raw) ? raw : Buffer.from(raw, 'latin1').toString('utf8');
}

/** A raw path for node:fs: the string itself when ASCII (the common case), else its bytes. */
function fsPath(raw: string): string | Buffer {
  return ASCII.test(raw) ? raw : Buffer.from(raw, 'latin1');
}

function errnoOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Writes entries into the directory; holds the tree of what this layer made there. */
class LayerWriter {
  readonly stats: ApplyStats = { entries: 0, files: 0, bytes: 0, whiteouts: 0, skipped: 0, warnings: [], extractMs: 0, lowerChecks: { impliedDirs: [], whiteouts: [] } };
  private readonly tree: Node = { kind: 'dir', children: new Map() };
  /**
   * Paths a `.wh.NAME` of this layer named: the lower entry there is gone, so a directory this layer
   * makes there later is opaque, or the lower one's contents would show through it.
   */
  private readonly whitedOut = new Set<string>();
  private readonly isRoot = process.getuid?.() === 0;
  private readonly euid = process.geteuid?.() ?? -1;
  private readonly egid = process.getegid?.() ?? -1;
  /** The root as raw bytes (latin1 chars), to join with raw entry paths. */
  private readonly rawRoot: string;
  /** Bytes of all files made so far, sparse ones at full size. */
  private fileBytes = 0;
  private tmpCounter = 0;
  /** Names the entry being written, for messages. */
  private label = '';
  private entryDetails: Record<string, unknown> = {};

  constructor(
    private readonly root: string,
    private readonly sameOwner: boolean,
    private readonly limits: ApplyLimits,
    private readonly signal: AbortSignal | undefined,
    private readonly what: string,
    private readonly reader: TarReader,
    private readonly opaqueXattr: string,
    private readonly writeback: LayerWriteback | undefined,
  ) {
    this.rawRoot = Buffer.from(root, 'utf8').toString('latin1');
  }

  async entry(e: TarEntry): Promise<void> {
    this.stats.entries++;
    const name = display(e.name);
    this.label = `${this.what}: entry ${JSON.stringify(name)}`;
    this.entryDetails = { entry: name, offset: e.offset };
    try {
      if (this.stats.entries > this.limits.maxEntries) this.overLimit('maxEntries', `the layer has more than ${this.limits.maxEntries} entries`);
      const rel = this.cleanPath(e.name, 'path');
      const slash = rel.lastIndexOf('/');
      const base = rel.slice(slash + 1);
      if (rel === '') {
        // The root is the snapshot directory itself; containerd ignores such entries too.
        this.stats.skipped++;
      } else if (rel.startsWith(WHITEOUT_META_PREFIX) && rel !== WHITEOUT_OPAQUE) {
        // aufs bookkeeping at the top (.wh..wh.plnk/, .wh..wh.aufs): meaningless to overlay.
        this.stats.skipped++;
      } else if (base.startsWith(WHITEOUT_PREFIX)) {
        this.whiteout(slash === -1 ? '' : rel.slice(0, slash), base, e);
      } else {
        await this.write(rel, e);
      }
    } catch (err) {
      if (isFastpullError(err) || err === this.reader.sourceError) throw err;
      if (this.signal?.aborted) throw abortError(this.signal, this.what);
      throw fsError(err, this.label, this.entryDetails);
    }
  }

  /** Applies directory modes and mtimes, deepest first (making children changed them), through descriptors. */
  finish(): void {
    const dirs: Array<[string, Node]> = [];
    const stack: Array<[string, Node]> = [['', this.tree]];
    while (stack.length > 0) {
      const [rel, node] = stack.pop()!;
      if (node.meta !== undefined) dirs.push([rel, node]);
      if (node.meta?.implied === true) this.stats.lowerChecks.impliedDirs.push(rel);
      for (const [name, child] of node.children ?? []) {
        const childRel = rel === '' ? name : `${rel}/${name}`;
        if (child.kind === 'dir') stack.push([childRel, child]);
        else if (child.kind === 'whiteout') this.stats.lowerChecks.whiteouts.push(childRel);
      }
    }
    // Parents are pushed before their children, so the reverse order is children first.
    for (let i = dirs.length - 1; i >= 0; i--) {
      const [rel, { meta }] = dirs[i]!;
      try {
        const fd = fs.openSync(fsPath(this.abs(rel)), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        try {
          fs.fchmodSync(fd, meta!.mode);
          if (meta!.times !== undefined) setTimesFd(fd, meta!.times);
        } finally {
          fs.closeSync(fd);
        }
      } catch (e) {
        throw fsError(e, `${this.what}: setting mode and times of ${JSON.stringify(display(rel))}`, { entry: display(rel) });
      }
    }
  }

  private abs(rel: string): string {
    return rel === '' ? this.rawRoot : `${this.rawRoot}/${rel}`;
  }

  private warn(message: string, skippedEntry: boolean): void {
    if (skippedEntry) this.stats.skipped++;
    if (this.stats.warnings.length < MAX_WARNINGS) this.stats.warnings.push(message);
  }

  private refuse(code: 'HOSTILE_LAYER' | 'INVALID_LAYER', message: string, details: Record<string, unknown> = {}): never {
    throw new FastpullError(code, `${this.label}: ${message}`, { details: { ...this.entryDetails, ...details } });
  }

  private overLimit(limit: keyof ApplyLimits, message: string): never {
    const code = limit === 'maxTotalBytes' || limit === 'maxPaxHeaderBytes' ? 'INVALID_LAYER' : 'HOSTILE_LAYER';
    this.refuse(code, `${message} (limit ${limit} = ${this.limits[limit]})`, { limit, max: this.limits[limit] });
  }

  /** A name or hardlink target from the tar, cleaned and within the limits. */
  private cleanPath(raw: string, what: string): string {
    if (raw.length > this.limits.maxPathBytes) this.overLimit('maxPathBytes', `the ${what} has ${raw.length} bytes`);
    const rel = cleanEntryPath(raw, `${this.label}: ${what}`);
    let depth = rel === '' ? 0 : 1;
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) depth++;
    if (depth > this.limits.maxPathDepth) this.overLimit('maxPathDepth', `the ${what} has ${depth} components`);
    return rel;
  }

  private async write(rel: string, e: TarEntry): Promise<void> {
    switch (e.type) {
      case 'file':
        return this.file(rel, e);
      case 'directory':
        return this.directory(rel, e);
      case 'symlink':
        return this.symlink(rel, e);
      case 'link':
        return this.hardlink(rel, e);
      case 'character-device':
      case 'block-device':
      case 'fifo':
        return this.special(rel, e);
      default:
        // Skipping it would drop content silently (containerd fails here too).
        this.refuse('INVALID_LAYER', `unsupported tar entry type ${JSON.stringify(e.flag)} (0x${e.flag.charCodeAt(0).toString(16).padStart(2, '0')})`, {
          typeflag: e.flag,
        });
    }
  }

  private async file(rel: string, e: TarEntry): Promise<void> {
    this.fileBytes += e.size;
    if (this.fileBytes > this.limits.maxTotalBytes) this.overLimit('maxTotalBytes', `the layer's files reach ${this.fileBytes} bytes`);
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    const parent = this.prepare(rel, false);
    // O_EXCL: never through an existing name, a symlink above all.
    const fd = fs.openSync(fsPath(this.abs(rel)), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    parent.set(baseOf(rel), { kind: 'file' });
    try {
      const writeback = this.writeback?.file(fd);
      if (e.sparse !== undefined) await this.writeSparse(fd, e.sparse, e.size);
      else await this.writeData(fd, writeback);
      writeback?.end();
      // A new file already belongs to this process (no directory here is setgid until finish()):
      // most files of most layers are root's, so the common case needs no call.
      if (this.sameOwner && (uid !== this.euid || gid !== this.egid)) fs.fchownSync(fd, uid, gid);
      fs.fchmodSync(fd, mode); // after chown, which clears setuid
      this.setXattrs(rel, e);
      setTimesFd(fd, t);
    } finally {
      fs.closeSync(fd);
    }
    this.stats.files++;
  }

  private async writeData(fd: number, writeback?: FileWriteback): Promise<void> {
    let position = 0;
    for await (const chunk of this.reader.data()) {
      writeAll(fd, chunk, position);
      position += chunk.length;
      writeback?.wrote(position);
      this.stats.bytes += chunk.length;
      if (this.signal?.aborted) throw abortError(this.signal, this.what);
    }
  }

  /** Puts each region's bytes at its offset; the holes between are never written, so they take no disk. */
  private async writeSparse(fd: number, regions: readonly { offset: number; length: number }[], size: number): Promise<void> {
    let r = 0;
    let done = 0; // bytes of regions[r] written
    for await (const chunk of this.reader.data()) {
      let at = 0;
      while (at < chunk.length) {
        while (done === regions[r]!.length) {
          r++;
          done = 0;
        }
        const region = regions[r]!;
        const n = Math.min(region.length - done, chunk.length - at);
        writeAll(fd, chunk.subarray(at, at + n), region.offset + done);
        at += n;
        done += n;
      }
      this.stats.bytes += chunk.length;
      if (this.signal?.aborted) throw abortError(this.signal, this.what);
    }
    fs.ftruncateSync(fd, size); // the trailing hole, if any
  }

  private directory(rel: string, e: TarEntry): void {
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const times = this.timesOf(e);
    let node = this.lookup(rel);
    if (node?.kind !== 'dir') {
      const replaced = node !== undefined;
      const parent = this.prepare(rel, true);
      // Owner-only until finish() sets the real mode: a 0555 directory must still take its children.
      fs.mkdirSync(fsPath(this.abs(rel)), 0o700);
      node = { kind: 'dir', children: new Map() };
      parent.set(baseOf(rel), node);
      // Whiteout, then recreate; or a file of this layer, then a directory: either way the lower
      // directory there is gone (applied in order onto the merged tree, the earlier entry removed
      // it), so its contents must not show through the new one.
      if (replaced || this.whitedOut.has(rel)) this.setOverlayXattr(rel, this.opaqueXattr);
    }
    const abs = fsPath(this.abs(rel));
    if (this.sameOwner) fs.lchownSync(abs, uid, gid);
    this.setXattrs(rel, e);
    node.meta = { mode, times };
  }

  private symlink(rel: string, e: TarEntry): void {
    const target = e.linkname;
    if (!target) this.refuse('INVALID_LAYER', 'symlink without a target');
    if (target.includes('\0')) this.refuse('HOSTILE_LAYER', 'NUL in symlink target');
    if (target.length > this.limits.maxSymlinkBytes) this.overLimit('maxSymlinkBytes', `the symlink target has ${target.length} bytes`);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    const parent = this.prepare(rel, false);
    const abs = fsPath(this.abs(rel));
    fs.symlinkSync(fsPath(target), abs); // kept verbatim: it resolves inside the container, never here
    parent.set(baseOf(rel), { kind: 'symlink' });
    if (this.sameOwner) fs.lchownSync(abs, uid, gid);
    this.setXattrs(rel, e);
    this.setTimes(rel, t);
  }

  private hardlink(rel: string, e: TarEntry): void {
    if (!e.linkname) this.refuse('INVALID_LAYER', 'hardlink without a target');
    const target = this.cleanPath(e.linkname, 'hardlink target');
    const shown = JSON.stringify(display(e.linkname));
    const kind = this.lookup(target, `hardlink target ${shown}`)?.kind;
    if (kind === undefined || kind === 'dir' || kind === 'whiteout') {
      this.refuse(
        'INVALID_LAYER',
        `hardlink target ${shown} is not a file made earlier in this layer${kind === undefined ? '' : ` (it is a ${kind === 'dir' ? 'directory' : 'whiteout'})`}`,
      );
    }
    if (target === rel) return; // a link to itself changes nothing
    const parent = this.prepare(rel, false);
    // Making way may have removed the target (a directory replaced by a link to its own child).
    if (this.lookup(target)?.kind !== kind) this.refuse('INVALID_LAYER', `hardlink target ${shown} was removed by this very entry`);
    // link(2) never follows a symlink target: a link to a symlink is a second name for the symlink.
    fs.linkSync(fsPath(this.abs(target)), fsPath(this.abs(rel)));
    parent.set(baseOf(rel), { kind });
  }

  private special(rel: string, e: TarEntry): void {
    const type = e.type === 'character-device' ? S_IFCHR : e.type === 'block-device' ? S_IFBLK : S_IFIFO;
    const { devmajor: major, devminor: minor } = e;
    if (type !== S_IFIFO && !(Number.isInteger(major) && major >= 0 && major <= MAX_DEV_MAJOR && Number.isInteger(minor) && minor >= 0 && minor <= MAX_DEV_MINOR)) {
      // mknod keeps only 12 bits of major and 20 of minor: 4097:1 would become 1:1 (/dev/mem).
      this.refuse('HOSTILE_LAYER', `device number ${major}:${minor} is out of range (major 0-${MAX_DEV_MAJOR}, minor 0-${MAX_DEV_MINOR})`, { devmajor: major, devminor: minor });
    }
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    const parent = this.prepare(rel, false);
    try {
      this.native(rel, true, (p) => nativeFs().mknod(p, type | mode, type === S_IFIFO ? 0 : major, type === S_IFIFO ? 0 : minor));
    } catch (err) {
      if (errnoOf(err) !== 'EPERM') throw err;
      this.warn(`${this.label}: skipped: creating a ${e.type} needs privilege (EPERM)`, true);
      return;
    }
    parent.set(baseOf(rel), { kind: 'special' });
    const abs = fsPath(this.abs(rel));
    if (this.sameOwner) fs.lchownSync(abs, uid, gid);
    // chmod follows symlinks, but mknod just made this very name (it fails on an existing one), and only this apply writes here.
    fs.chmodSync(abs, mode); // mknod's mode passed through the umask
    this.setXattrs(rel, e);
    this.setTimes(rel, t);
  }

  private whiteout(dir: string, base: string, e: TarEntry): void {
    if (base === WHITEOUT_OPAQUE) {
      this.ensureDir(dir);
      this.setOverlayXattr(dir, this.opaqueXattr);
      this.stats.whiteouts++;
      return;
    }
    if (base.startsWith(WHITEOUT_META_PREFIX)) {
      this.stats.skipped++; // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): meaningless to overlay
      return;
    }
    const name = base.slice(WHITEOUT_PREFIX.length);
    if (name === '' || name === '.' || name === '..') {
      this.refuse('HOSTILE_LAYER', `whiteout of ${JSON.stringify(name)} names no entry of its directory`);
    }
    const { uid, gid } = this.owner(e);
    const rel = dir === '' ? name : `${dir}/${name}`;
    const existing = this.ensureParents(rel).get(name);
    this.whitedOut.add(rel);
    if (existing !== undefined && existing.kind !== 'whiteout') {
      // image-spec layer.md: a whiteout applies only to lower layers, never to its own layer's
      // entries. What this layer made here stays and already hides the lower entry, a directory
      // once it is opaque ("whiteout, then recreate").
      if (existing.kind === 'dir') this.setOverlayXattr(rel, this.opaqueXattr);
      this.stats.whiteouts++;
      return;
    }
    const parent = this.prepare(rel, false); // an earlier whiteout of the same name goes
    try {
      this.native(rel, true, (p) => nativeFs().mknod(p, S_IFCHR, 0, 0)); // overlayfs's whiteout: a 0:0 character device, mode 0
    } catch (err) {
      if (errnoOf(err) !== 'EPERM' || this.isRoot) throw err;
      this.warn(`${this.label}: skipped: creating an overlay whiteout needs privilege (EPERM)`, true);
      return;
    }
    parent.set(baseOf(rel), { kind: 'whiteout' });
    // As containerd: the whiteout belongs to whoever the entry names.
    if (this.sameOwner) fs.lchownSync(fsPath(this.abs(rel)), uid, gid);
    this.stats.whiteouts++;
  }

  private setOverlayXattr(rel: string, name: string): void {
    try {
      this.native(rel, false, (p) => nativeFs().lsetxattr(p, name, Buffer.from('y')));
    } catch (e) {
      if (errnoOf(e) !== 'EPERM' || this.isRoot) throw e;
      this.warn(`${this.label}: dropped: setting ${name} needs privilege (EPERM)`, false);
    }
  }

  /**
   * Runs a call of the native addon, which takes paths only as UTF-8 strings, on `rel`. A path
   * that is not UTF-8 is reached through a descriptor of its parent (/proc/self/fd/N/NAME) and,
   * when its own name is not UTF-8, under a temporary UTF-8 name that it is renamed from and back
   * to. `creates`: the call makes the entry (so there is nothing to rename first).
   */
  private native<T>(rel: string, creates: boolean, call: (p: string) => T): T {
    const raw = this.abs(rel);
    if (ASCII.test(raw)) return call(raw);
    const bytes = Buffer.from(raw, 'latin1');
    if (isUtf8(bytes)) return call(bytes.toString('utf8'));
    const slash = raw.lastIndexOf('/');
    const dirFd = fs.openSync(Buffer.from(raw.slice(0, slash), 'latin1'), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    try {
      const base = raw.slice(slash + 1);
      const baseBytes = Buffer.from(base, 'latin1');
      if (isUtf8(baseBytes)) return call(`/proc/self/fd/${dirFd}/${baseBytes.toString('utf8')}`);
      const siblings = rel.includes('/') ? this.lookup(rel.slice(0, rel.lastIndexOf('/')))?.children : this.tree.children;
      let tmp: string;
      do tmp = `.fastpull-tmp-${process.pid}-${++this.tmpCounter}`;
      while (siblings?.has(tmp) === true);
      const dir = raw.slice(0, slash);
      const there = Buffer.from(`${dir}/${tmp}`, 'latin1');
      if (!creates) fs.renameSync(bytes, there);
      let made = !creates;
      try {
        const result = call(`/proc/self/fd/${dirFd}/${tmp}`);
        made = true;
        return result;
      } finally {
        if (made) fs.renameSync(there, bytes);
      }
    } finally {
      fs.closeSync(dirFd);
    }
  }

  /** The node at `rel`, or undefined. A parent that is not a directory is hostile when `through` says what is being looked up. */
  private lookup(rel: string, through?: string): Node | undefined {
    if (rel === '') return this.tree;
    let node: Node = this.tree;
    let start = 0;
    for (;;) {
      const slash = rel.indexOf('/', start);
      const part = slash === -1 ? rel.slice(start) : rel.slice(start, slash);
      const child = node.children?.get(part);
      if (child === undefined) return undefined;
      if (slash === -1) return child;
      if (child.kind !== 'dir') {
        if (through === undefined) return undefined;
        this.refuse('HOSTILE_LAYER', `${through} goes through ${JSON.stringify(display(rel.slice(0, slash)))}, a ${child.kind}`, {
          parent: display(rel.slice(0, slash)),
          parentKind: child.kind,
        });
      }
      node = child;
      start = slash + 1;
    }
  }

  /**
   * Makes way for a new entry at `rel`: parents exist as directories, nothing is left at `rel`
   * (unless both old and new are directories, which merge). Returns the parent's children.
   */
  private prepare(rel: string, isDir: boolean): Map<string, Node> {
    const children = this.ensureParents(rel);
    const base = baseOf(rel);
    const existing = children.get(base);
    if (existing === undefined || (existing.kind === 'dir' && isDir)) return children;
    const abs = fsPath(this.abs(rel));
    if (existing.kind === 'dir') fs.rmSync(abs, { recursive: true, force: true }); // never follows symlinks
    else fs.unlinkSync(abs);
    children.delete(base);
    return children;
  }

  /** Makes the parents of `rel` directories (0755 in the end, as containerd does); a parent that is not a directory is hostile. */
  private ensureParents(rel: string): Map<string, Node> {
    let node = this.tree;
    let start = 0;
    for (let slash = rel.indexOf('/'); slash !== -1; slash = rel.indexOf('/', start)) {
      node = this.ensureChildDir(node, rel, slash);
      start = slash + 1;
    }
    return node.children!;
  }

  /** Makes `dir` and its parents exist as directories. */
  private ensureDir(dir: string): void {
    if (dir === '') return;
    this.ensureChildDir({ kind: 'dir', children: this.ensureParents(dir) }, dir, dir.length);
  }

  /** The directory node at `path.slice(0, end)`, whose parent is `parent`; made when missing. */
  private ensureChildDir(parent: Node, path: string, end: number): Node {
    const dir = path.slice(0, end);
    const name = baseOf(dir);
    const existing = parent.children!.get(name);
    if (existing?.kind === 'dir') return existing;
    if (existing?.kind === 'whiteout') {
      // `.wh.d`, then `d/f`: the lower `d` is gone and this layer's `d` holds `f` alone.
      fs.unlinkSync(fsPath(this.abs(dir)));
      parent.children!.delete(name);
      const node = this.makeImpliedDir(parent, dir);
      this.setOverlayXattr(dir, this.opaqueXattr);
      return node;
    }
    if (existing !== undefined) {
      // Only this apply wrote here, so a non-directory parent was put there by the layer itself:
      // going through it (a symlink above all) could write outside the snapshot.
      this.refuse('HOSTILE_LAYER', `parent ${JSON.stringify(display(dir))} of ${JSON.stringify(display(path))} is a ${existing.kind}, not a directory`, {
        path: display(path),
        parent: display(dir),
        parentKind: existing.kind,
      });
    }
    return this.makeImpliedDir(parent, dir);
  }

  /** A directory no entry named (yet): 0755 in the end, as containerd makes them, unless the layers below say otherwise. */
  private makeImpliedDir(parent: Node, dir: string): Node {
    fs.mkdirSync(fsPath(this.abs(dir)), 0o700);
    const node: Node = { kind: 'dir', children: new Map(), meta: { mode: 0o755, implied: true } };
    parent.children!.set(baseOf(dir), node);
    return node;
  }

  private owner(e: TarEntry): { uid: number; gid: number } {
    for (const [what, id] of [['uid', e.uid], ['gid', e.gid]] as const) {
      if (!Number.isInteger(id) || id < 0 || id > MAX_ID) {
        this.refuse('HOSTILE_LAYER', `${what} ${id} is out of range (0-${MAX_ID}; ${MAX_ID + 1} would mean "leave unchanged")`, { [what]: id });
      }
    }
    return { uid: e.uid, gid: e.gid };
  }

  /**
   * The entry's times to the nanosecond: a PAX record read again from its text (the reader's
   * number, a double, keeps microseconds at best), else the header's whole seconds. atime is the
   * later of atime and mtime, as containerd does.
   */
  private timesOf(e: TarEntry): Times {
    const mtime = this.exactTime(e.mtime, e.pax.get('mtime'));
    const atime = e.atime === undefined ? undefined : this.exactTime(e.atime, e.pax.get('atime'));
    return { atime: atime !== undefined && isLater(atime, mtime) ? atime : mtime, mtime };
  }

  /** `approx` (the reader's seconds) exactly, from `paxText` when there is one. */
  private exactTime(approx: number, paxText: Buffer | undefined): Timespec {
    if (!(Math.abs(approx) <= MAX_ABS_TIME)) this.refuse('INVALID_LAYER', `time ${approx} is out of range`);
    const exact = paxText === undefined ? undefined : parsePaxTime(paxText.toString('latin1'));
    if (exact !== undefined) return exact;
    // Header fields hold whole seconds; a fraction could only come from a record read above.
    const sec = Math.floor(approx);
    const nsec = Math.min(Math.round((approx - sec) * 1e9), 999_999_999);
    return { sec, nsec };
  }

  /** Sets the times of `rel` itself (a symlink's own), to the nanosecond. */
  private setTimes(rel: string, t: Times): void {
    this.native(rel, false, (p) => nativeFs().lutimesNs(p, t.atime.sec, t.atime.nsec, t.mtime.sec, t.mtime.nsec));
  }

  private setXattrs(rel: string, e: TarEntry): void {
    for (const [key, value] of e.pax) {
      if (!key.startsWith(XATTR_PAX_PREFIX)) continue;
      const rawName = key.slice(XATTR_PAX_PREFIX.length);
      const nameBytes = Buffer.from(rawName, 'latin1');
      if (!isUtf8(nameBytes)) this.refuse('INVALID_LAYER', `xattr name ${JSON.stringify(display(rawName))} is not UTF-8`);
      const name = nameBytes.toString('utf8');
      // Overlay reads trusted.overlay.* (and user.overlay.* when mounted with userxattr) as its own
      // metadata: a layer that sets them could forge whiteouts, opaque dirs, redirects or origins.
      if (name.startsWith('trusted.overlay.') || name.startsWith('user.overlay.')) {
        this.refuse('HOSTILE_LAYER', `xattr ${name} is overlayfs's own metadata`, { xattr: name });
      }
      if (name.startsWith('trusted.')) {
        this.warn(`${this.label}: dropped xattr ${name}: trusted.* is reserved for the host`, false);
        continue;
      }
      try {
        this.native(rel, false, (p) => nativeFs().lsetxattr(p, name, value));
      } catch (err) {
        const code = errnoOf(err);
        if (code === 'ENOTSUP' || code === 'EPERM') {
          this.warn(`${this.label}: dropped xattr ${name}: ${code}`, false);
        } else if (code === 'EINVAL' || code === 'ERANGE' || code === 'E2BIG') {
          throw new FastpullError('INVALID_LAYER', `${this.label}: invalid xattr ${name}`, { cause: err, details: { ...this.entryDetails, xattr: name } });
        } else {
          throw err;
        }
      }
    }
  }
}

/**
 * A PAX time (`-?DIGITS[.DIGITS]`, as the reader checked) as exact seconds and nanoseconds. As Go's
 * archive/tar: digits past the ninth are cut, and the sign applies to the fraction too, so
 * `-1.25` is 1.25 s before the epoch: second -2, nanosecond 750000000. undefined for other text.
 */
export function parsePaxTime(text: string): Timespec | undefined {
  const m = /^(-?)([0-9]+)(?:\.([0-9]*))?$/.exec(text);
  if (m === null) return undefined;
  const whole = Number(m[2]);
  const nsec = Number(((m[3] ?? '') + '000000000').slice(0, 9));
  if (m[1] !== '-') return { sec: whole, nsec };
  return nsec === 0 ? { sec: whole === 0 ? 0 : -whole, nsec: 0 } : { sec: -whole - 1, nsec: 1_000_000_000 - nsec };
}

function isLater(a: Timespec, b: Timespec): boolean {
  return a.sec > b.sec || (a.sec === b.sec && a.nsec > b.nsec);
}

/** Sets the times of what `fd` is open on, to the nanosecond. */
function setTimesFd(fd: number, t: Times): void {
  nativeFs().futimesNs(fd, t.atime.sec, t.atime.nsec, t.mtime.sec, t.mtime.nsec);
}

function baseOf(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

function writeAll(fd: number, chunk: Buffer, position: number): void {
  let off = 0;
  while (off < chunk.length) off += fs.writeSync(fd, chunk, off, chunk.length - off, position + off);
}

function modeOf(e: TarEntry): number {
  return e.mode & 0o7777;
}

/** Filesystem failures: ENOSPC -> NO_SPACE; names the layer cannot have -> INVALID_LAYER; else INTERNAL. */
function fsError(e: unknown, what: string, details: Record<string, unknown>): FastpullError {
  const code = errnoOf(e);
  const layerFault = code === 'ENAMETOOLONG' || code === 'EINVAL' || code === 'ELOOP' || code === 'EFBIG';
  const err = fromFsError(e, what, layerFault ? 'INVALID_LAYER' : 'INTERNAL');
  return new FastpullError(err.code, err.message, { cause: e, details: { ...details, errno: code } });
}
