// Applies one layer's tar stream to an empty directory, in the overlayfs lower-dir form of containerd's overlay snapshotter.
//
// The parts: unpack/tar/tarreader.ts reads entries; writer.ts writes each into the layer's tree (layertree.ts,
// paths as raw bytes in rawpath.ts, times in times.ts, xattrs in xattrs.ts); whiteouts.ts turns OCI
// deletions into overlay form. This file joins them and cleans up after a failure.
import fs from 'node:fs';
import path from 'node:path';
import { abortError, FastpullError, isFastpullError, throwIfAborted } from '../../errors.js';
import { type ApplyLimits, resolveLimits } from './limits.js';
import { ApplyReport, type ApplyStats } from './report.js';
import { TarReader } from '../tar/tarreader.js';
import { OVERLAY_OPAQUE_XATTR, OverlayWhiteouts, ROOTLESS_OPAQUE_XATTR } from './whiteouts.js';
import { FileSink } from '../filesink.js';
import { LayerWriter } from './writer.js';
import type { WritebackMode } from '../../snapshots/durable.js';
import { LayerWriteback } from './writeback.js';

export { DEFAULT_APPLY_LIMITS, type ApplyLimits } from './limits.js';
export { cleanEntryPath } from './rawpath.js';
export { MAX_WARNINGS, type ApplyStats } from './report.js';
export { parsePaxTime, type Timespec } from './times.js';

/** Options of {@link applyLayer}. */
export interface ApplyOptions {
  /** Stops the apply with ABORTED. */
  signal?: AbortSignal;
  /**
   * Most bytes the tar stream may hold when that is less than `limits.maxTotalBytes`: what its
   * compressed blob may inflate to (unpackLayer sets it; errors name the limit maxInflateRatio).
   */
  maxInflatedBytes?: number;
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
  /** Threads that make the small files (Tuning.writerThreads, for measuring); default one per core, 2 to 4 (unpack/filesink.ts). */
  writerThreads?: number;
  /**
   * Called with an offset in `tar` before which the apply holds no byte of the stream and no view of
   * one any more, so that the producer may fill those buffers again: before each entry is read
   * (every entry before it is written; the files that went to the writer threads were copied) and
   * after each piece of a large file is written. Offsets only grow.
   */
  onReleased?: (offset: number) => void;
}

/**
 * Extracts one layer's uncompressed tar into `dest`, an existing empty directory (the layer's active
 * snapshot), laid out as an overlayfs lower directory:
 * - `DIR/.wh.NAME` becomes a character device 0:0 at `DIR/NAME` (an overlay whiteout) owned as the
 *   entry says; `DIR/.wh..wh..opq` sets `trusted.overlay.opaque=y` on DIR; other `.wh..wh.*` names
 *   are dropped. A whiteout hides lower layers only (image-spec layer.md): what this layer itself
 *   made at `DIR/NAME`, before or after the whiteout, stays, and a directory there is made opaque.
 *   A character or block device 0:0 under an ordinary name (overlayfs's whiteout, forged) fails
 *   with HOSTILE_LAYER. These rules are whiteouts.ts's.
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
    maxTarBytes: Math.min(limits.maxTotalBytes, options.maxInflatedBytes ?? Infinity),
    ...(options.maxInflatedBytes !== undefined && options.maxInflatedBytes < limits.maxTotalBytes ? { tarLimit: 'maxInflateRatio' } : {}),
    // A listener per read, removed when the read settles. (Promise.race against one long-lived
    // "aborted" promise would keep every chunk ever read alive until the apply ends: memory would
    // grow with the layer.)
    ...(signal ? { race: <T>(p: Promise<T>) => raceAbort(p, signal, what) } : {}),
  });
  const opaqueXattr = rootless ? ROOTLESS_OPAQUE_XATTR : OVERLAY_OPAQUE_XATTR;
  const report = new ApplyReport(what);
  const writeback = LayerWriteback.open(options.writeback, root);
  const sink = FileSink.open(options.writerThreads);
  const { onReleased } = options;
  const released = onReleased ? () => onReleased(reader.consumed) : undefined;
  const writer = new LayerWriter(report, {
    root,
    sameOwner,
    limits,
    signal,
    reader,
    whiteouts: (tree, r, owner) => new OverlayWhiteouts(tree, r, { opaqueXattr, sameOwner, owner }),
    writeback,
    sink,
    released,
  });
  const started = performance.now();
  let ok = false;
  try {
    for (;;) {
      released?.();
      // Entries whose header and data are buffered already go through without a promise.
      let entry = reader.nextSync();
      if (entry === undefined) entry = await reader.next();
      if (entry === null) break;
      throwIfAborted(signal, what);
      const writing = writer.entry(entry);
      if (writing !== undefined) await writing;
    }
    await reader.drain(); // the rest of the stream, past the end of the tar
    await writer.settle();
    throwIfAborted(signal, what);
    writer.finish();
    ok = true;
    report.stats.extractMs = Math.max(0, performance.now() - started - reader.inputWaitMs);
    const writerCpuMs = sink?.cpuMs; // complete: settle() drained the sink
    if (writerCpuMs !== undefined) report.stats.writerCpuMs = writerCpuMs;
    return report.stats;
  } catch (e) {
    if (signal?.aborted && !isFastpullError(e) && e !== reader.sourceError) throw abortError(signal, what);
    throw e;
  } finally {
    // No file write and no background flush outlives the layer (it may be removed next, or the thread end).
    if (!ok) await writer.abandon();
    await writeback?.settled();
    if (!ok) {
      // Let go of the source (a stream is destroyed), without waiting, for it may be stuck, and only
      // after our error has reached the caller: a pipeline reports the first error it sees.
      setImmediate(
        () =>
          void Promise.resolve()
            .then(() => source.return?.())
            .catch(() => undefined),
      );
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
