// Whiteouts: how an OCI layer's deletions (`.wh.NAME`, `.wh..wh..opq`) take a snapshot's form, kept apart from the generic apply.
//
// The generic apply (writer.ts) asks the converter about every entry before writing it, and tells
// it where it makes directories; the converter alone knows what a deletion looks like on disk. The
// overlay form is containerd's overlay snapshotter's: a character device 0:0 for a deleted name, an
// `overlay.opaque` xattr for a directory whose lower contents are gone.
import fs from 'node:fs';
import { leaf, type LayerTree } from './layertree.js';
import { nativeFs } from '../../native/addon.js';
import { baseOf, display, errnoOf } from './rawpath.js';
import type { ApplyReport } from './report.js';
import type { ParsedTarEntry } from '../tar/tarreader.js';

/** The rule that turns a layer's deletions into the snapshot's own form. */
export interface WhiteoutConverter {
  /**
   * Handles the entry at `rel` (clean, not the root) when it is a deletion or marker of the OCI
   * format, and returns true; false leaves it to the generic apply. Refuses an entry that would
   * forge the converter's own form of a deletion.
   */
  convert(rel: string, e: ParsedTarEntry): boolean;
  /**
   * A directory of this layer now stands at `rel`, new (`replaced`: where this layer had made
   * something else first). The layers below must not show through it if they were deleted there.
   */
  madeDir(rel: string, replaced: boolean): void;
}

export const WHITEOUT_PREFIX = '.wh.';
/** aufs's own bookkeeping names, and the opaque marker among them. */
export const WHITEOUT_META_PREFIX = '.wh..wh.';
export const WHITEOUT_OPAQUE = '.wh..wh..opq';
/** The xattr overlayfs reads for an opaque directory. */
export const OVERLAY_OPAQUE_XATTR = 'trusted.overlay.opaque';
/** What overlayfs reads instead when mounted with `userxattr` (rootless). */
export const ROOTLESS_OPAQUE_XATTR = 'user.overlay.opaque';
const { S_IFCHR } = fs.constants;

/** Options of {@link OverlayWhiteouts}. */
export interface OverlayWhiteoutOptions {
  /** The opaque xattr: {@link OVERLAY_OPAQUE_XATTR}, or {@link ROOTLESS_OPAQUE_XATTR} for the rootless layout. */
  opaqueXattr: string;
  /** Give whiteouts the owner the entry names (as containerd does). */
  sameOwner: boolean;
  /** The owner an entry names, checked (refuses ids that cannot be owners). */
  owner: (e: ParsedTarEntry) => { uid: number; gid: number };
}

/**
 * OCI deletions in overlayfs form:
 * - `DIR/.wh.NAME` becomes a character device 0:0 at `DIR/NAME`, owned as the entry says. A whiteout
 *   hides lower layers only (image-spec layer.md): what this layer itself made at `DIR/NAME`, before
 *   or after it, stays, and a directory there is made opaque.
 * - `DIR/.wh..wh..opq` sets the opaque xattr on DIR; other `.wh..wh.*` names (aufs) are dropped.
 * - A directory made where this layer deleted or replaced something is opaque.
 * - A character or block device 0:0 under an ordinary name is refused (HOSTILE_LAYER): overlayfs
 *   reads a character device 0:0 as a whiteout wherever it lies, so it would delete that name from
 *   the layers below, which OCI layers say only with `.wh.NAME`. So is a whiteout of `.`, `..` or ''.
 * Without privilege (EPERM, not as root), a whiteout or opaque xattr is skipped with a warning.
 */
export class OverlayWhiteouts implements WhiteoutConverter {
  /**
   * Paths a `.wh.NAME` of this layer named: the lower entry there is gone, so a directory this layer
   * makes there later is opaque, or the lower one's contents would show through it.
   */
  private readonly whitedOut = new Set<string>();
  private readonly isRoot = process.getuid?.() === 0;

  constructor(
    private readonly tree: LayerTree,
    private readonly report: ApplyReport,
    private readonly options: OverlayWhiteoutOptions,
  ) {}

  convert(rel: string, e: ParsedTarEntry): boolean {
    if (rel.startsWith(WHITEOUT_META_PREFIX) && rel !== WHITEOUT_OPAQUE) {
      // aufs bookkeeping at the top (.wh..wh.plnk/, .wh..wh.aufs): meaningless to overlay.
      this.report.stats.skipped++;
      return true;
    }
    const slash = rel.lastIndexOf('/');
    const base = rel.slice(slash + 1);
    if (base.startsWith(WHITEOUT_PREFIX)) {
      this.whiteout(slash === -1 ? '' : rel.slice(0, slash), base, e);
      return true;
    }
    if ((e.type === 'character-device' || e.type === 'block-device') && e.devmajor === 0 && e.devminor === 0) {
      // Both layouts refuse: unprivileged users may make a 0:0 character device too.
      const why =
        e.type === 'character-device'
          ? `a character device 0:0 is overlayfs's whiteout: it would hide ${JSON.stringify(display(rel))} of the layers below, a deletion OCI layers write only as a ".wh." entry`
          : `a block device 0:0 names no device (and 0:0 is overlayfs's whiteout number; OCI layers delete only with ".wh." entries)`;
      this.report.refuse('HOSTILE_LAYER', why, { devmajor: e.devmajor, devminor: e.devminor });
    }
    return false;
  }

  madeDir(rel: string, replaced: boolean): void {
    // Whiteout, then recreate; or a file of this layer, then a directory: either way the lower
    // directory there is gone (applied in order onto the merged tree, the earlier entry removed
    // it), so its contents must not show through the new one.
    if (replaced || this.whitedOut.has(rel)) this.setOpaque(rel);
  }

  private whiteout(dir: string, base: string, e: ParsedTarEntry): void {
    const { stats } = this.report;
    if (base !== WHITEOUT_OPAQUE && base.startsWith(WHITEOUT_META_PREFIX)) {
      stats.skipped++; // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): meaningless to overlay
      return;
    }
    // A marker is an empty regular file, or a hardlink to one (aufs linked its whiteouts to one
    // inode). A directory, symlink or device under a marker's name is no marker: taken as one, its
    // own entries (".wh.x/child") would land beside the whiteout it made.
    if (e.type !== 'file' && e.type !== 'link') {
      this.report.refuse('HOSTILE_LAYER', `${JSON.stringify(display(base))} is a whiteout marker's name on a ${e.type}: markers are regular files`, {
        type: e.type,
      });
    }
    if (base === WHITEOUT_OPAQUE) {
      // At the root it would hide every layer below, which no layer diff expresses (the root is
      // never removed and made again), and which overlayfs and other snapshotters read differently.
      if (dir === '') this.report.refuse('HOSTILE_LAYER', "an opaque marker at the layer's root would hide every layer below it");
      this.tree.ensureDir(dir);
      this.setOpaque(dir);
      stats.whiteouts++;
      return;
    }
    const name = base.slice(WHITEOUT_PREFIX.length);
    if (name === '' || name === '.' || name === '..') {
      this.report.refuse('HOSTILE_LAYER', `whiteout of ${JSON.stringify(name)} names no entry of its directory`);
    }
    const { uid, gid } = this.options.owner(e);
    const rel = dir === '' ? name : `${dir}/${name}`;
    const existing = this.tree.ensureParents(rel).get(name);
    this.whitedOut.add(rel);
    if (existing !== undefined && existing.kind !== 'whiteout') {
      // image-spec layer.md: a whiteout applies only to lower layers, never to its own layer's
      // entries. What this layer made here stays and already hides the lower entry, a directory
      // once it is opaque ("whiteout, then recreate").
      if (existing.kind === 'dir') this.setOpaque(rel);
      stats.whiteouts++;
      return;
    }
    const parent = this.tree.prepare(rel, false); // an earlier whiteout of the same name goes
    try {
      this.tree.paths.native(rel, true, (p) => nativeFs().mknod(p, S_IFCHR, 0, 0)); // overlayfs's whiteout: a 0:0 character device, mode 0
    } catch (err) {
      if (errnoOf(err) !== 'EPERM' || this.isRoot) throw err;
      this.report.warn(`${this.report.label}: skipped: creating an overlay whiteout needs privilege (EPERM)`, true);
      return;
    }
    parent.set(baseOf(rel), leaf('whiteout'));
    // As containerd: the whiteout belongs to whoever the entry names.
    if (this.options.sameOwner) fs.lchownSync(this.tree.paths.fs(rel), uid, gid);
    stats.whiteouts++;
  }

  private setOpaque(rel: string): void {
    const name = this.options.opaqueXattr;
    try {
      this.tree.paths.native(rel, false, (p) => nativeFs().lsetxattr(p, name, Buffer.from('y')));
    } catch (e) {
      if (errnoOf(e) !== 'EPERM' || this.isRoot) throw e;
      this.report.warn(`${this.report.label}: dropped: setting ${name} needs privilege (EPERM)`, false);
    }
  }
}
