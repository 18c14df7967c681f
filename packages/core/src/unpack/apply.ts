// Applies one layer's tar stream to an empty directory, in the overlayfs lower-dir form of containerd's overlay snapshotter.
import fs from 'node:fs';
import path from 'node:path';
import { extract as tarExtract, type Header } from 'tar-stream';
import { abortError, FastpullError, fromFsError, isFastpullError, throwIfAborted } from '../errors.js';
import { nativeFs } from './native.js';
import { padToBlock, TarTail } from './tartail.js';

/** Options of {@link applyLayer}. */
export interface ApplyOptions {
  /** Stops the apply with ABORTED. */
  signal?: AbortSignal;
  /** Give files the owners the layer names (lchown). Default: when running as root. */
  sameOwner?: boolean;
}

/** What {@link applyLayer} did. */
export interface ApplyStats {
  /** Tar entries read (PAX and GNU long-name headers are part of the entry they describe). */
  entries: number;
  /** Regular files written (hardlinks not counted). */
  files: number;
  /** Bytes of regular file content written. */
  bytes: number;
  /** Whiteouts converted to overlay form: `.wh.NAME` files and `.wh..wh..opq` opaque markers. */
  whiteouts: number;
  /** Entries not extracted: the root entry, aufs metadata, unknown types, device nodes without privilege. */
  skipped: number;
  /** What was skipped or dropped and why, for the first {@link MAX_WARNINGS} cases. */
  warnings: string[];
}

/** How many warnings {@link ApplyStats.warnings} keeps: a layer of ten thousand device nodes must not make a huge list. */
export const MAX_WARNINGS = 32;

const WHITEOUT_PREFIX = '.wh.';
const WHITEOUT_META_PREFIX = '.wh..wh.';
const WHITEOUT_OPAQUE = '.wh..wh..opq';
const OVERLAY_OPAQUE_XATTR = 'trusted.overlay.opaque';
const XATTR_PAX_PREFIX = 'SCHILY.xattr.';
const { S_IFCHR, S_IFBLK, S_IFIFO } = fs.constants;

/** What this layer created at a path. Only this apply writes the directory, so the map is the truth. */
type Kind = 'dir' | 'file' | 'symlink' | 'special' | 'whiteout';

/** A tar-stream header as it is at run time: its declarations omit byteOffset, type null and the pax shape. */
interface TarHeader extends Omit<Header, 'type' | 'pax'> {
  /** null for a type flag tar-stream does not know (GNU sparse, ...). */
  type: Header['type'] | null;
  pax?: Record<string, string> | null;
  /** Offset in the tar of this entry's data (just past its header). */
  byteOffset?: number;
}

/** The entry body stream tar-stream hands out (a streamx Readable of Buffers). */
type EntryStream = AsyncIterable<unknown>;

interface DirMeta {
  mode: number;
  atime: number;
  mtime: number;
}

/**
 * Extracts one layer's uncompressed tar into `dest`, an existing empty directory (the layer's active
 * snapshot), laid out as an overlayfs lower directory:
 * - `DIR/.wh.NAME` becomes a character device 0:0 at `DIR/NAME` (an overlay whiteout);
 *   `DIR/.wh..wh..opq` sets `trusted.overlay.opaque=y` on DIR; other `.wh..wh.*` names are dropped.
 * - Nothing is created outside `dest`: a `..` component or NUL in a name, or a parent that is a
 *   symlink or a file, fails with HOSTILE_LAYER; a hardlink must point at a non-directory this layer
 *   already created (INVALID_LAYER otherwise). Missing parents are created 0755.
 * - A later entry for a path replaces the earlier one; a directory over a directory keeps its contents.
 * - Owners (when `sameOwner`), modes incl. setuid, mtimes and `SCHILY.xattr.*` records are applied;
 *   `trusted.*` and `user.overlay.*` xattrs from the layer are dropped (a layer must not forge overlay
 *   metadata). Directory modes and mtimes are applied last, deepest first.
 * - The tar is read to its last byte even past the end-of-archive marker (the caller hashes it);
 *   entries after the marker are ignored, as Go's archive/tar does.
 *
 * Errors: HOSTILE_LAYER, INVALID_LAYER (corrupt tar), NO_SPACE, ABORTED, INTERNAL (other filesystem
 * errors); errors of `tar` itself are rethrown unchanged.
 */
export async function applyLayer(tar: AsyncIterable<Uint8Array>, dest: string, options: ApplyOptions = {}): Promise<ApplyStats> {
  const { signal } = options;
  const sameOwner = options.sameOwner ?? process.getuid?.() === 0;
  const root = path.resolve(dest);
  const what = `applying layer to ${root}`;
  throwIfAborted(signal, what);
  checkDest(root, what);

  const writer = new LayerWriter(root, sameOwner, signal, what);
  // allowUnknownFormat: old v7 tars have no ustar magic, and Go's reader takes them.
  const extract = tarExtract({ allowUnknownFormat: true } as Parameters<typeof tarExtract>[0]);
  let tail: TarTail | undefined = new TarTail();

  let state: 'running' | 'ended' | 'failed' = 'running';
  let busy = false; // an entry is being written; tar-stream waits for next()
  let pendingError: Error | undefined; // a parser error raised while an entry was being written
  let wake: (() => void) | undefined;
  const poke = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let settle: { resolve: () => void; reject: (e: unknown) => void } | undefined;
  const parsed = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  parsed.catch(() => undefined); // observed below; never unhandled

  const fail = (e: unknown): void => {
    if (state !== 'running') return;
    state = 'failed';
    extract.destroy(null);
    settle?.reject(e);
    poke();
  };
  const end = (): void => {
    if (state !== 'running') return;
    state = 'ended';
    extract.destroy(null);
    settle?.resolve();
    poke();
  };
  const parseError = (e: Error): void => {
    // Bytes after the end-of-archive marker are not a tar: Go's reader never looks at them.
    if (tail?.atEnd() === true) end();
    else fail(new FastpullError('INVALID_LAYER', `${what}: corrupt tar: ${e.message}`, { cause: e }));
  };

  extract.on('entry', (h: Header, stream: EntryStream, next: () => void) => {
    if (state !== 'running') return;
    const header = h as unknown as TarHeader;
    let rawPax: Map<string, Buffer> | undefined;
    if (tail !== undefined) {
      if (tail.atEnd() === true) return end(); // an entry after the end marker
      const offset = header.byteOffset;
      if (typeof offset !== 'number') {
        tail = undefined; // this tar-stream does not say where entries lie: parse as it does
      } else {
        if (header.pax && hasXattrRecords(header.pax)) rawPax = tail.paxRecords(offset - 512);
        // tar-stream never reads a directory's data, so for it the next header follows at once.
        tail.advance(header.type === 'directory' ? offset : offset + padToBlock(header.size ?? 0));
      }
    }
    busy = true;
    writer.entry(header, stream, rawPax).then(
      () => {
        busy = false;
        if (state !== 'running') return;
        if (pendingError !== undefined) return parseError(pendingError);
        if (tail?.atEnd() === true) return end();
        next();
      },
      (e: unknown) => {
        busy = false;
        fail(e);
      },
    );
  });
  extract.on('error', (e: Error) => {
    if (state !== 'running') return;
    if (busy) pendingError ??= e; // the entry being written fails or finishes first
    else parseError(e);
  });
  extract.on('finish', end);
  extract.on('drain', poke);

  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = (): void => {
      const e = abortError(signal, what);
      fail(e);
      state = 'failed'; // also while draining after the end: the feeder stops at its next chunk
      reject(e);
    };
  });
  aborted.catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });

  const feed = async (): Promise<void> => {
    let offset = 0;
    for await (const data of tar) {
      if (state === 'failed') return; // leaving the loop destroys a Readable source
      const chunk = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      const at = offset;
      offset += chunk.length;
      if (state === 'ended') continue; // drain: every byte must reach the caller's hash
      tail?.push(chunk);
      let body = chunk;
      if (tail?.atEnd() === true) {
        // Feed only what lies before the end marker (the rest of the current entry, if any).
        body = chunk.subarray(0, Math.max(0, tail.position - at));
        if (body.length === 0) {
          if (!busy) end();
          continue;
        }
      }
      if (!extract.write(body)) await new Promise<void>((resolve) => (wake = resolve));
    }
    if (state === 'running') extract.end(null);
  };
  const feeding = feed();
  feeding.catch((e: unknown) => fail(e));

  try {
    await Promise.race([parsed, aborted]);
    await Promise.race([feeding, aborted]); // the rest of the stream, past the end of the tar
    throwIfAborted(signal, what);
    writer.finish();
    return writer.stats;
  } catch (e) {
    if (signal?.aborted && !isFastpullError(e)) throw abortError(signal, what);
    throw e;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (state === 'running') extract.destroy(null);
  }
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

function hasXattrRecords(pax: Record<string, string>): boolean {
  for (const key in pax) if (key.startsWith(XATTR_PAX_PREFIX)) return true;
  return false;
}

/**
 * A tar path as a clean relative path: leading `/` and `./` stripped, `.` and empty components
 * dropped. '' is the root. A `..` component or a NUL is hostile.
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

function paxNumber(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}

function errnoOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Writes entries into the directory; holds what this layer created there. */
class LayerWriter {
  readonly stats: ApplyStats = { entries: 0, files: 0, bytes: 0, whiteouts: 0, skipped: 0, warnings: [] };
  private readonly created = new Map<string, Kind>();
  private readonly dirMeta = new Map<string, DirMeta>();
  private readonly isRoot = process.getuid?.() === 0;
  /** Names the entry being written, for messages. */
  private label = '';

  constructor(
    private readonly root: string,
    private readonly sameOwner: boolean,
    private readonly signal: AbortSignal | undefined,
    private readonly what: string,
  ) {}

  async entry(h: TarHeader, stream: EntryStream, rawPax: Map<string, Buffer> | undefined): Promise<void> {
    this.stats.entries++;
    throwIfAborted(this.signal, this.what);
    const label = `${this.what}: entry ${JSON.stringify(h.name)}`;
    this.label = label;
    try {
      const rel = cleanEntryPath(h.name, label);
      const slash = rel.lastIndexOf('/');
      const base = rel.slice(slash + 1);
      if (rel === '') {
        // The root is the snapshot directory itself; containerd ignores such entries too.
        await drain(h, stream);
        this.stats.skipped++;
      } else if (rel.startsWith(WHITEOUT_META_PREFIX) && rel !== WHITEOUT_OPAQUE) {
        // aufs bookkeeping at the top (.wh..wh.plnk/, .wh..wh.aufs): meaningless to overlay.
        await drain(h, stream);
        this.stats.skipped++;
      } else if (base.startsWith(WHITEOUT_PREFIX)) {
        await drain(h, stream);
        this.whiteout(slash === -1 ? '' : rel.slice(0, slash), base, h, label);
      } else {
        await this.write(rel, h, stream, rawPax, label);
      }
    } catch (e) {
      if (isFastpullError(e)) throw e;
      if (this.signal?.aborted) throw abortError(this.signal, this.what);
      throw fsError(e, label);
    }
  }

  /** Applies directory modes and mtimes, deepest first: creating children changed them. */
  finish(): void {
    const dirs = [...this.dirMeta].map(([rel, meta]) => ({ rel, meta, depth: rel.split('/').length }));
    dirs.sort((a, b) => b.depth - a.depth);
    for (const { rel, meta } of dirs) {
      const abs = this.abs(rel);
      try {
        fs.chmodSync(abs, meta.mode);
        fs.utimesSync(abs, meta.atime, meta.mtime);
      } catch (e) {
        throw fsError(e, `${this.what}: setting mode and times of ${JSON.stringify(rel)}`);
      }
    }
  }

  private abs(rel: string): string {
    return rel === '' ? this.root : `${this.root}/${rel}`;
  }

  private warn(message: string, skippedEntry: boolean): void {
    if (skippedEntry) this.stats.skipped++;
    if (this.stats.warnings.length < MAX_WARNINGS) this.stats.warnings.push(message);
  }

  private async write(rel: string, h: TarHeader, stream: EntryStream, rawPax: Map<string, Buffer> | undefined, label: string): Promise<void> {
    switch (h.type) {
      case 'file':
      case 'contiguous-file':
        return this.file(rel, h, stream, rawPax);
      case 'directory':
        return this.directory(rel, h, rawPax);
      case 'symlink':
        await drain(h, stream);
        return this.symlink(rel, h, rawPax, label);
      case 'link':
        await drain(h, stream);
        return this.hardlink(rel, h, label);
      case 'character-device':
      case 'block-device':
      case 'fifo':
        await drain(h, stream);
        return this.special(rel, h, rawPax, label);
      default:
        await drain(h, stream);
        this.warn(`${label}: skipped: unsupported tar entry type`, true);
    }
  }

  private async file(rel: string, h: TarHeader, stream: EntryStream, rawPax: Map<string, Buffer> | undefined): Promise<void> {
    this.prepare(rel, false);
    const abs = this.abs(rel);
    const fd = fs.openSync(abs, 'wx', 0o600); // O_EXCL: never through an existing name
    this.created.set(rel, 'file');
    try {
      if ((h.size ?? 0) > 0) {
        const body = stream[Symbol.asyncIterator]();
        for (let r = await nextChunk(body, this.label); !r.done; r = await nextChunk(body, this.label)) {
          const chunk = r.value as Buffer;
          writeAll(fd, chunk);
          this.stats.bytes += chunk.length;
          if (this.signal?.aborted) throw abortError(this.signal, this.what);
        }
      }
      if (this.sameOwner) fs.fchownSync(fd, uidOf(h), gidOf(h));
      fs.fchmodSync(fd, modeOf(h, 0o644)); // after chown, which clears setuid
      this.setXattrs(abs, h, rawPax);
      const t = timesOf(h);
      fs.futimesSync(fd, t.atime, t.mtime);
    } finally {
      fs.closeSync(fd);
    }
    this.stats.files++;
  }

  private directory(rel: string, h: TarHeader, rawPax: Map<string, Buffer> | undefined): void {
    const abs = this.abs(rel);
    if (this.created.get(rel) !== 'dir') {
      this.prepare(rel, true);
      // Owner-only until finish() sets the real mode: a 0555 directory must still take its children.
      fs.mkdirSync(abs, 0o700);
      this.created.set(rel, 'dir');
    }
    if (this.sameOwner) fs.lchownSync(abs, uidOf(h), gidOf(h));
    this.setXattrs(abs, h, rawPax);
    this.dirMeta.set(rel, { mode: modeOf(h, 0o755), ...timesOf(h) });
  }

  private symlink(rel: string, h: TarHeader, rawPax: Map<string, Buffer> | undefined, label: string): void {
    const target = h.linkname;
    if (!target) throw new FastpullError('INVALID_LAYER', `${label}: symlink without a target`);
    if (target.includes('\0')) throw new FastpullError('HOSTILE_LAYER', `${label}: NUL in symlink target`);
    this.prepare(rel, false);
    const abs = this.abs(rel);
    fs.symlinkSync(target, abs); // kept verbatim: it resolves inside the container, never here
    this.created.set(rel, 'symlink');
    if (this.sameOwner) fs.lchownSync(abs, uidOf(h), gidOf(h));
    this.setXattrs(abs, h, rawPax);
    const t = timesOf(h);
    fs.lutimesSync(abs, t.atime, t.mtime);
  }

  private hardlink(rel: string, h: TarHeader, label: string): void {
    const linkname = h.linkname;
    if (!linkname) throw new FastpullError('INVALID_LAYER', `${label}: hardlink without a target`);
    const target = cleanEntryPath(linkname, `${label}: hardlink target`);
    if (target === rel) return; // a link to itself changes nothing
    this.prepare(rel, false);
    const kind = this.created.get(target);
    if (kind === undefined || kind === 'dir' || kind === 'whiteout') {
      throw new FastpullError(
        'INVALID_LAYER',
        `${label}: hardlink target ${JSON.stringify(linkname)} is not a file created earlier in this layer${kind === undefined ? '' : ` (it is a ${kind === 'dir' ? 'directory' : 'whiteout'})`}`,
      );
    }
    // link(2) never follows a symlink target: a link to a symlink is a second name for the symlink.
    fs.linkSync(this.abs(target), this.abs(rel));
    this.created.set(rel, kind);
  }

  private special(rel: string, h: TarHeader, rawPax: Map<string, Buffer> | undefined, label: string): void {
    const type = h.type === 'character-device' ? S_IFCHR : h.type === 'block-device' ? S_IFBLK : S_IFIFO;
    this.prepare(rel, false);
    const abs = this.abs(rel);
    const mode = modeOf(h, 0o644);
    try {
      nativeFs().mknod(abs, type | mode, h.devmajor ?? 0, h.devminor ?? 0);
    } catch (e) {
      if (errnoOf(e) !== 'EPERM') throw e;
      this.warn(`${label}: skipped: creating a ${h.type} needs privilege (EPERM)`, true);
      return;
    }
    this.created.set(rel, 'special');
    if (this.sameOwner) fs.lchownSync(abs, uidOf(h), gidOf(h));
    fs.chmodSync(abs, mode); // mknod's mode passed through the umask
    this.setXattrs(abs, h, rawPax);
    const t = timesOf(h);
    fs.utimesSync(abs, t.atime, t.mtime);
  }

  private whiteout(dir: string, base: string, h: TarHeader, label: string): void {
    if (base === WHITEOUT_OPAQUE) {
      this.ensureDir(dir);
      this.setOverlayXattr(this.abs(dir), OVERLAY_OPAQUE_XATTR, label);
      this.stats.whiteouts++;
      return;
    }
    if (base.startsWith(WHITEOUT_META_PREFIX)) {
      this.stats.skipped++; // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): meaningless to overlay
      return;
    }
    const name = base.slice(WHITEOUT_PREFIX.length);
    if (name === '' || name === '.' || name === '..') {
      throw new FastpullError('HOSTILE_LAYER', `${label}: whiteout of ${JSON.stringify(name)} names no entry of its directory`);
    }
    const rel = dir === '' ? name : `${dir}/${name}`;
    this.prepare(rel, false);
    const abs = this.abs(rel);
    try {
      nativeFs().mknod(abs, S_IFCHR, 0, 0); // overlayfs's whiteout: a 0:0 character device, mode 0
    } catch (e) {
      if (errnoOf(e) !== 'EPERM' || this.isRoot) throw e;
      this.warn(`${label}: skipped: creating an overlay whiteout needs privilege (EPERM)`, true);
      return;
    }
    this.created.set(rel, 'whiteout');
    if (this.sameOwner) fs.lchownSync(abs, uidOf(h), gidOf(h));
    this.stats.whiteouts++;
  }

  private setOverlayXattr(abs: string, name: string, label: string): void {
    try {
      nativeFs().lsetxattr(abs, name, Buffer.from('y'));
    } catch (e) {
      if (errnoOf(e) !== 'EPERM' || this.isRoot) throw e;
      this.warn(`${label}: dropped: setting ${name} needs privilege (EPERM)`, false);
    }
  }

  /** Makes way for a new entry at `rel`: parents exist as directories, nothing is left at `rel`
   * (unless both old and new are directories, which merge). */
  private prepare(rel: string, isDir: boolean): void {
    this.ensureParents(rel);
    const kind = this.created.get(rel);
    if (kind === undefined) return;
    const abs = this.abs(rel);
    if (kind === 'dir') {
      if (isDir) return;
      fs.rmSync(abs, { recursive: true, force: true });
      const prefix = `${rel}/`;
      for (const key of this.created.keys()) if (key === rel || key.startsWith(prefix)) this.created.delete(key);
      for (const key of this.dirMeta.keys()) if (key === rel || key.startsWith(prefix)) this.dirMeta.delete(key);
    } else {
      fs.unlinkSync(abs);
      this.created.delete(rel);
    }
  }

  /** Creates missing parents of `rel` (0755, as containerd does); a parent that is not a directory is hostile. */
  private ensureParents(rel: string): void {
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) this.ensureDirAt(rel.slice(0, i), rel);
  }

  /** Makes `dir` and its parents exist as directories. */
  private ensureDir(dir: string): void {
    if (dir === '') return;
    this.ensureParents(dir);
    this.ensureDirAt(dir, dir);
  }

  private ensureDirAt(dir: string, forPath: string): void {
    const kind = this.created.get(dir);
    if (kind === 'dir') return;
    if (kind !== undefined) {
      // Only this apply wrote here, so a non-directory parent was put there by the layer itself:
      // following it (a symlink above all) would write outside the snapshot.
      throw new FastpullError('HOSTILE_LAYER', `${this.label}: parent ${JSON.stringify(dir)} of ${JSON.stringify(forPath)} is a ${kind}, not a directory`, {
        details: { path: forPath, parent: dir, parentKind: kind },
      });
    }
    const abs = this.abs(dir);
    fs.mkdirSync(abs);
    fs.chmodSync(abs, 0o755); // not whatever the umask made of it
    this.created.set(dir, 'dir');
  }

  private setXattrs(abs: string, h: TarHeader, rawPax: Map<string, Buffer> | undefined): void {
    const pax = h.pax;
    if (!pax) return;
    for (const key in pax) {
      if (!key.startsWith(XATTR_PAX_PREFIX)) continue;
      const name = key.slice(XATTR_PAX_PREFIX.length);
      // Overlay reads trusted.overlay.* (and user.overlay.* when mounted with userxattr) as its own
      // metadata; a layer that sets them could forge opaque dirs or redirects.
      if (name.startsWith('trusted.') || name.startsWith('user.overlay.')) {
        this.warn(`${this.label}: dropped xattr ${name}: reserved for the snapshotter`, false);
        continue;
      }
      const raw = rawPax?.get(key);
      const value = raw !== undefined ? Buffer.from(raw) : Buffer.from(pax[key] ?? '', 'utf8');
      try {
        nativeFs().lsetxattr(abs, name, value);
      } catch (e) {
        const code = errnoOf(e);
        if (code === 'ENOTSUP' || code === 'EPERM') {
          this.warn(`${this.label}: dropped xattr ${name}: ${code}`, false);
        } else if (code === 'EINVAL' || code === 'ERANGE') {
          throw new FastpullError('INVALID_LAYER', `${this.label}: invalid xattr ${name}`, { cause: e });
        } else {
          throw e;
        }
      }
    }
  }
}

/** Reads an entry's body to its end, for entries whose body is not extracted. */
async function drain(h: TarHeader, stream: EntryStream): Promise<void> {
  // tar-stream never hands out a directory's body, and an empty body needs no reading.
  if (h.type === 'directory' || !((h.size ?? 0) > 0)) return;
  const body = stream[Symbol.asyncIterator]();
  while (!(await nextChunk(body, `entry ${JSON.stringify(h.name)}`)).done) {
    // discard
  }
}

/** The next piece of an entry's body. The body fails only when the tar does (cut short, corrupt). */
async function nextChunk(body: AsyncIterator<unknown>, label: string): Promise<IteratorResult<unknown>> {
  try {
    return await body.next();
  } catch (e) {
    throw new FastpullError('INVALID_LAYER', `${label}: corrupt or truncated tar: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

function writeAll(fd: number, chunk: Buffer): void {
  let off = 0;
  while (off < chunk.length) off += fs.writeSync(fd, chunk, off, chunk.length - off);
}

function modeOf(h: TarHeader, fallback: number): number {
  return (h.mode ?? fallback) & 0o7777;
}

// PAX uid/gid hold ids too large for the ustar fields; tar-stream leaves them in header.pax.
function uidOf(h: TarHeader): number {
  return paxNumber(h.pax?.uid) ?? h.uid ?? 0;
}

function gidOf(h: TarHeader): number {
  return paxNumber(h.pax?.gid) ?? h.gid ?? 0;
}

/** Seconds since the epoch; PAX times carry fractions. atime is the later of atime and mtime, as containerd does. */
function timesOf(h: TarHeader): { atime: number; mtime: number } {
  const header = h.mtime ? h.mtime.getTime() / 1000 : 0;
  const mtime = paxNumber(h.pax?.mtime) ?? (Number.isFinite(header) ? header : 0);
  const atime = paxNumber(h.pax?.atime);
  return { atime: atime !== undefined && atime > mtime ? atime : mtime, mtime };
}

/** Filesystem failures: ENOSPC -> NO_SPACE; names the layer cannot have -> INVALID_LAYER; else INTERNAL. */
function fsError(e: unknown, what: string): FastpullError {
  const code = errnoOf(e);
  const layerFault = code === 'ENAMETOOLONG' || code === 'EINVAL' || code === 'ELOOP';
  return fromFsError(e, what, layerFault ? 'INVALID_LAYER' : 'INTERNAL');
}
