// The generic apply: writes each tar entry into the layer's tree, leaving deletions to a whiteout converter.
import fs from 'node:fs';
import { abortError, isFastpullError } from '../../errors.js';
import { type FileSink, SINK_MAX_FILE } from '../filesink.js';
import { LayerTree, leaf, type Node } from './layertree.js';
import { type ApplyLimits, limitCode } from './limits.js';
import { nativeFs } from '../../native/addon.js';
import { baseOf, cleanEntryPath, display, errnoOf, fsPath } from './rawpath.js';
import { type ApplyReport, fsError } from './report.js';
import type { ParsedTarEntry, TarReader } from '../tar/tarreader.js';
import { entryTimes, setTimesAt, setTimesFd, type Times } from './times.js';
import type { WhiteoutConverter } from './whiteouts.js';
import type { FileWriteback, LayerWriteback } from './writeback.js';
import { hasXattrs, setXattrs, xattrFootprint } from './xattrs.js';
import { WHITEOUT_PREFIX } from './whiteouts.js';

const { S_IFCHR, S_IFBLK, S_IFIFO, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
/** Linux dev_t as the kernel takes it from mknod: 12 bits of major, 20 of minor. Larger numbers would be truncated into other devices. */
const MAX_DEV_MAJOR = 0xfff;
const MAX_DEV_MINOR = 0xfffff;
/** (uid_t)-1 tells chown "leave it": an owner the layer names must never mean that. */
const MAX_ID = 0xffff_fffe;

/** Makes the whiteout converter of one apply, over its tree; `owner` checks the owner an entry names. */
export type WhiteoutConverterFactory = (tree: LayerTree, report: ApplyReport, owner: (e: ParsedTarEntry) => { uid: number; gid: number }) => WhiteoutConverter;

/** What a {@link LayerWriter} writes with. */
export interface LayerWriterOptions {
  /** The destination: an existing empty directory. */
  root: string;
  /** Give files the owners the layer names. */
  sameOwner: boolean;
  limits: ApplyLimits;
  signal: AbortSignal | undefined;
  /** Where file data comes from: the reader that gave the entry. */
  reader: TarReader;
  whiteouts: WhiteoutConverterFactory;
  /** Starts the write-back of files as they are written (apply.ts ApplyOptions.writeback); none when undefined. */
  writeback?: LayerWriteback | undefined;
  /** Writer threads for small new files (unpack/filesink.ts); without it every file is written on this thread. */
  sink?: FileSink | undefined;
  /**
   * Called after each piece of a large file is written: nothing this writer holds refers to the
   * stream before {@link TarReader.consumed} any more (apply.ts ApplyOptions.onReleased).
   */
  released?: (() => void) | undefined;
}

/** Writes entries into the directory, in order; see applyLayer for the rules. */
export class LayerWriter {
  private readonly tree: LayerTree;
  private readonly whiteouts: WhiteoutConverter;
  private readonly sameOwner: boolean;
  private readonly limits: ApplyLimits;
  private readonly signal: AbortSignal | undefined;
  private readonly reader: TarReader;
  private readonly writeback: LayerWriteback | undefined;
  private readonly sink: FileSink | undefined;
  private readonly released: (() => void) | undefined;
  private readonly euid = process.geteuid?.() ?? -1;
  private readonly egid = process.getegid?.() ?? -1;
  /** Bytes of all files made so far, sparse ones at full size. */
  private fileBytes = 0;

  constructor(
    private readonly report: ApplyReport,
    options: LayerWriterOptions,
  ) {
    ({
      sameOwner: this.sameOwner,
      limits: this.limits,
      signal: this.signal,
      reader: this.reader,
      writeback: this.writeback,
      sink: this.sink,
      released: this.released,
    } = options);
    this.tree = new LayerTree(options.root, report, (dir) => this.whiteouts.madeDir(dir, true));
    this.whiteouts = options.whiteouts(this.tree, report, (e) => this.owner(e));
  }

  /**
   * Writes one entry. Undefined when it is done already (a small file whose data was buffered went
   * to the writer threads, say), else a promise of it: most entries of a layer of small files take
   * no promise at all.
   */
  entry(e: ParsedTarEntry): Promise<void> | undefined {
    const report = this.report;
    report.begin(e);
    try {
      if (report.stats.entries > this.limits.maxEntries) this.overLimit('maxEntries', `the layer has more than ${this.limits.maxEntries} entries`);
      if (e.pax.size > 0) {
        const { count, bytes } = xattrFootprint(e);
        if (count > this.limits.maxXattrs) this.overLimit('maxXattrs', `the entry has ${count} extended attributes`);
        if (bytes > this.limits.maxXattrBytes) this.overLimit('maxXattrBytes', `the entry's extended attributes hold ${bytes} bytes`);
      }
      const rel = this.cleanPath(e.name, 'path');
      if (rel === '') {
        // The root is the snapshot directory itself; containerd ignores such entries too.
        report.stats.skipped++;
        return undefined;
      }
      // A whiteout may remove or replace what this layer made: nothing of it may still be queued.
      if (baseOf(rel).startsWith(WHITEOUT_PREFIX)) return this.caught(this.settle().then(() => this.convertOrWrite(rel, e)));
      return this.caught(this.convertOrWrite(rel, e));
    } catch (err) {
      throw this.entryError(err);
    }
  }

  private convertOrWrite(rel: string, e: ParsedTarEntry): Promise<void> | undefined {
    return this.whiteouts.convert(rel, e) ? undefined : this.write(rel, e);
  }

  /** `p` with its failure reported as the entry's (see {@link entryError}). */
  private caught(p: Promise<void> | undefined): Promise<void> | undefined {
    return p?.catch((err: unknown) => {
      throw this.entryError(err);
    });
  }

  /** An error while writing the current entry, as the caller sees it: a filesystem error names the entry. */
  private entryError(err: unknown): unknown {
    if (isFastpullError(err) || err === this.reader.sourceError) return err;
    if (this.signal?.aborted) return abortError(this.signal, this.report.what);
    return fsError(err, this.report.label, this.report.entryDetails);
  }

  /**
   * Resolves once every file handed to the writer threads is made (rejects with the first that
   * failed). Before anything that could touch a queued name, and before {@link finish}.
   */
  async settle(): Promise<void> {
    await this.sink?.drain();
  }

  /** After a failure: nothing this writer queued is written once this resolves. */
  async abandon(): Promise<void> {
    await this.sink?.abandon();
  }

  /** Applies directory modes and mtimes, deepest first, and lists what the layers below must settle (after {@link settle}). */
  finish(): void {
    this.tree.finish(this.report.stats.lowerChecks);
  }

  private overLimit(limit: keyof ApplyLimits, message: string): never {
    this.report.refuse(limitCode(limit), `${message} (limit ${limit} = ${this.limits[limit]})`, { limit, max: this.limits[limit] });
  }

  /** A name or hardlink target from the tar, cleaned and within the limits. */
  private cleanPath(raw: string, what: string): string {
    if (raw.length > this.limits.maxPathBytes) this.overLimit('maxPathBytes', `the ${what} has ${raw.length} bytes`);
    const rel = cleanEntryPath(raw, `${this.report.label}: ${what}`);
    let depth = rel === '' ? 0 : 1;
    for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) depth++;
    if (depth > this.limits.maxPathDepth) this.overLimit('maxPathDepth', `the ${what} has ${depth} components`);
    return rel;
  }

  private write(rel: string, e: ParsedTarEntry): Promise<void> | undefined {
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
        this.report.refuse('INVALID_LAYER', `unsupported tar entry type ${JSON.stringify(e.flag)} (0x${e.flag.charCodeAt(0).toString(16).padStart(2, '0')})`, {
          typeflag: e.flag,
        });
    }
  }

  private file(rel: string, e: ParsedTarEntry): Promise<void> | undefined {
    this.fileBytes += e.size;
    if (this.fileBytes > this.limits.maxTotalBytes) this.overLimit('maxTotalBytes', `the layer's files reach ${this.fileBytes} bytes`);
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    // Replacing what this layer made: that must be on disk before it is removed.
    if (this.tree.lookup(rel) !== undefined) return this.settle().then(() => this.newFile(rel, e, mode, uid, gid, t));
    return this.newFile(rel, e, mode, uid, gid, t);
  }

  private newFile(rel: string, e: ParsedTarEntry, mode: number, uid: number, gid: number, t: Times): Promise<void> | undefined {
    if (this.sink !== undefined && e.sparse === undefined && e.size <= SINK_MAX_FILE && !hasXattrs(e)) return this.queueFile(this.sink, rel, mode, uid, gid, t);
    return this.writeFile(rel, e, mode, uid, gid, t);
  }

  /** A file written here, by this thread, as its data streams. */
  private async writeFile(rel: string, e: ParsedTarEntry, mode: number, uid: number, gid: number, t: Times): Promise<void> {
    const parent = this.tree.prepare(rel, false);
    // O_EXCL: never through an existing name, a symlink above all.
    const fd = fs.openSync(this.tree.paths.fs(rel), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    parent.set(baseOf(rel), leaf('file'));
    try {
      const writeback = this.writeback?.file(fd);
      if (e.sparse !== undefined) await this.writeSparse(fd, e.sparse, e.size);
      else await this.writeData(fd, writeback);
      writeback?.end(e.size);
      // A new file already belongs to this process (no directory here is setgid until finish()):
      // most files of most layers are root's, so the common case needs no call.
      if (this.sameOwner && (uid !== this.euid || gid !== this.egid)) fs.fchownSync(fd, uid, gid);
      fs.fchmodSync(fd, mode); // after chown, which clears setuid
      setXattrs(this.tree.paths, this.report, rel, e);
      setTimesFd(fd, t);
    } finally {
      fs.closeSync(fd);
    }
    this.report.stats.files++;
  }

  /**
   * A small new file, to the writer threads: its data is gathered here (views of the tar stream's
   * buffers, copied by the sink) and the file made there, as writeFile() would make it. Without a
   * promise when the data is buffered already and the sink has room.
   */
  private queueFile(sink: FileSink, rel: string, mode: number, uid: number, gid: number, times: Times): Promise<void> | undefined {
    const parent = this.tree.prepare(rel, false);
    const chunks = this.reader.takeData();
    if (chunks === undefined) return this.gatherThenQueue(sink, parent, rel, mode, uid, gid, times);
    return this.queue(sink, parent, rel, chunks, mode, uid, gid, times);
  }

  /** The data of a small file that is not all buffered yet, then the file to the sink. */
  private async gatherThenQueue(sink: FileSink, parent: Map<string, Node>, rel: string, mode: number, uid: number, gid: number, times: Times): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.reader.data()) {
      chunks.push(chunk);
      if (this.signal?.aborted) throw abortError(this.signal, this.report.what);
    }
    await this.queue(sink, parent, rel, chunks, mode, uid, gid, times);
  }

  private queue(
    sink: FileSink,
    parent: Map<string, Node>,
    rel: string,
    chunks: Buffer[],
    mode: number,
    uid: number,
    gid: number,
    times: Times,
  ): Promise<void> | undefined {
    let size = 0;
    for (const c of chunks) size += c.length;
    const stats = this.report.stats;
    parent.set(baseOf(rel), leaf('file'));
    stats.bytes += size;
    this.writeback?.wrote(size);
    const owner = this.sameOwner && (uid !== this.euid || gid !== this.egid) ? { uid, gid } : undefined;
    const { label, entryDetails: details } = this.report;
    const added = sink.add({ path: Buffer.from(this.tree.paths.abs(rel), 'latin1'), chunks, mode, owner, times, label, details });
    if (added === undefined) {
      stats.files++;
      return undefined;
    }
    return added.then(() => {
      stats.files++;
    });
  }

  private async writeData(fd: number, writeback?: FileWriteback): Promise<void> {
    const stats = this.report.stats;
    let position = 0;
    for await (const chunk of this.reader.data()) {
      writeAll(fd, chunk, position);
      this.released?.();
      position += chunk.length;
      writeback?.wrote(position);
      stats.bytes += chunk.length;
      if (this.signal?.aborted) throw abortError(this.signal, this.report.what);
    }
  }

  /** Puts each region's bytes at its offset; the holes between are never written, so they take no disk. */
  private async writeSparse(fd: number, regions: readonly { offset: number; length: number }[], size: number): Promise<void> {
    const stats = this.report.stats;
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
      this.released?.();
      stats.bytes += chunk.length;
      if (this.signal?.aborted) throw abortError(this.signal, this.report.what);
    }
    fs.ftruncateSync(fd, size); // the trailing hole, if any
  }

  private async directory(rel: string, e: ParsedTarEntry): Promise<void> {
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const times = this.timesOf(e);
    let node = this.tree.lookup(rel);
    if (node?.kind !== 'dir') {
      const replaced = node !== undefined;
      if (replaced) await this.settle();
      const parent = this.tree.prepare(rel, true);
      // Owner-only until finish() sets the real mode: a 0555 directory must still take its children.
      fs.mkdirSync(this.tree.paths.fs(rel), 0o700);
      node = { kind: 'dir', children: new Map() };
      parent.set(baseOf(rel), node);
      this.whiteouts.madeDir(rel, replaced);
    }
    if (this.sameOwner) fs.lchownSync(this.tree.paths.fs(rel), uid, gid);
    setXattrs(this.tree.paths, this.report, rel, e);
    node.meta = { mode, times };
  }

  private async symlink(rel: string, e: ParsedTarEntry): Promise<void> {
    const target = e.linkname;
    if (!target) this.report.refuse('INVALID_LAYER', 'symlink without a target');
    if (target.includes('\0')) this.report.refuse('HOSTILE_LAYER', 'NUL in symlink target');
    if (target.length > this.limits.maxSymlinkBytes) this.overLimit('maxSymlinkBytes', `the symlink target has ${target.length} bytes`);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    if (this.tree.lookup(rel) !== undefined) await this.settle();
    const parent = this.tree.prepare(rel, false);
    const abs = this.tree.paths.fs(rel);
    fs.symlinkSync(fsPath(target), abs); // kept verbatim: it resolves inside the container, never here
    parent.set(baseOf(rel), leaf('symlink'));
    if (this.sameOwner) fs.lchownSync(abs, uid, gid);
    setXattrs(this.tree.paths, this.report, rel, e);
    setTimesAt(this.tree.paths, rel, t);
  }

  private async hardlink(rel: string, e: ParsedTarEntry): Promise<void> {
    if (!e.linkname) this.report.refuse('INVALID_LAYER', 'hardlink without a target');
    // The target may still be queued, and this name may replace something queued.
    await this.settle();
    const target = this.cleanPath(e.linkname, 'hardlink target');
    const shown = JSON.stringify(display(e.linkname));
    const kind = this.tree.lookup(target, `hardlink target ${shown}`)?.kind;
    if (kind === undefined || kind === 'dir' || kind === 'whiteout') {
      this.report.refuse(
        'INVALID_LAYER',
        `hardlink target ${shown} is not a file made earlier in this layer${kind === undefined ? '' : ` (it is a ${kind === 'dir' ? 'directory' : 'whiteout'})`}`,
      );
    }
    if (target === rel) return; // a link to itself changes nothing
    const parent = this.tree.prepare(rel, false);
    // Making way may have removed the target (a directory replaced by a link to its own child).
    if (this.tree.lookup(target)?.kind !== kind) this.report.refuse('INVALID_LAYER', `hardlink target ${shown} was removed by this very entry`);
    // link(2) never follows a symlink target: a link to a symlink is a second name for the symlink.
    try {
      fs.linkSync(this.tree.paths.fs(target), this.tree.paths.fs(rel));
    } catch (err) {
      // The layer is legal; the snapshot's filesystem cannot hold it (ext4: 65000 names a file).
      if (errnoOf(err) === 'EMLINK')
        this.report.refuse('INVALID_LAYER', `hardlink target ${shown} has as many names as the snapshot's filesystem allows (EMLINK)`);
      throw err;
    }
    parent.set(baseOf(rel), leaf(kind));
  }

  private async special(rel: string, e: ParsedTarEntry): Promise<void> {
    const type = e.type === 'character-device' ? S_IFCHR : e.type === 'block-device' ? S_IFBLK : S_IFIFO;
    const { devmajor: major, devminor: minor } = e;
    if (
      type !== S_IFIFO &&
      !(Number.isInteger(major) && major >= 0 && major <= MAX_DEV_MAJOR && Number.isInteger(minor) && minor >= 0 && minor <= MAX_DEV_MINOR)
    ) {
      // mknod keeps only 12 bits of major and 20 of minor: 4097:1 would become 1:1 (/dev/mem).
      this.report.refuse('HOSTILE_LAYER', `device number ${major}:${minor} is out of range (major 0-${MAX_DEV_MAJOR}, minor 0-${MAX_DEV_MINOR})`, {
        devmajor: major,
        devminor: minor,
      });
    }
    const mode = modeOf(e);
    const { uid, gid } = this.owner(e);
    const t = this.timesOf(e);
    if (this.tree.lookup(rel) !== undefined) await this.settle();
    const parent = this.tree.prepare(rel, false);
    try {
      this.tree.paths.native(rel, true, (p) => nativeFs().mknod(p, type | mode, type === S_IFIFO ? 0 : major, type === S_IFIFO ? 0 : minor));
    } catch (err) {
      if (errnoOf(err) !== 'EPERM') throw err;
      this.report.warn(`${this.report.label}: skipped: creating a ${e.type} needs privilege (EPERM)`, true);
      return;
    }
    parent.set(baseOf(rel), leaf('special'));
    const abs = this.tree.paths.fs(rel);
    if (this.sameOwner) fs.lchownSync(abs, uid, gid);
    // chmod follows symlinks, but mknod just made this very name (it fails on an existing one), and only this apply writes here.
    fs.chmodSync(abs, mode); // mknod's mode passed through the umask
    setXattrs(this.tree.paths, this.report, rel, e);
    setTimesAt(this.tree.paths, rel, t);
  }

  private owner(e: ParsedTarEntry): { uid: number; gid: number } {
    this.checkId('uid', e.uid);
    this.checkId('gid', e.gid);
    return { uid: e.uid, gid: e.gid };
  }

  private checkId(what: 'uid' | 'gid', id: number): void {
    if (!Number.isInteger(id) || id < 0 || id > MAX_ID) {
      this.report.refuse('HOSTILE_LAYER', `${what} ${id} is out of range (0-${MAX_ID}; ${MAX_ID + 1} would mean "leave unchanged")`, { [what]: id });
    }
  }

  private timesOf(e: ParsedTarEntry): Times {
    return entryTimes(e, this.timeOutOfRange);
  }

  private readonly timeOutOfRange = (time: number): never => this.report.refuse('INVALID_LAYER', `time ${time} is out of range`);
}

function writeAll(fd: number, chunk: Buffer, position: number): void {
  let off = 0;
  while (off < chunk.length) off += fs.writeSync(fd, chunk, off, chunk.length - off, position + off);
}

function modeOf(e: ParsedTarEntry): number {
  return e.mode & 0o7777;
}
