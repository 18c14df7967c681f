// Where each containerd snapshot's tree is and what it mounts: its own directories or the store's
// chainID snapshot it borrows, its parents' trees, and the short links a long stack is mounted by.
import { join } from 'node:path';
import { FastpullError } from '../../errors.js';
import type { Digest } from '../../oci/digest.js';
import { MAX_MOUNT_OPTIONS, type Mount, type Snapshotter } from '../store.js';
import { recordMounts } from './mounts.js';
import type { RecordFile } from './record-file.js';

/** The trees and mounts of the records in `byName`, which the records own and change. */
export class RecordTrees {
  /**
   * Short links (`<root>/snapshots/l/<prefix>`) to borrowed trees, by chainID: the mounts of a stack
   * whose full paths do not fit a page name its borrowed layers by these.
   */
  private readonly links = new Map<Digest, string>();

  /**
   * @param dir - `<root>/snapshots/containerd`, where records keep their own directories.
   * @param snapshots - the store's chainID snapshots, which committed records may borrow.
   * @param indexOff - put `index=off` on overlay mounts.
   */
  constructor(
    private readonly dir: string,
    private readonly snapshots: Snapshotter,
    private readonly byName: ReadonlyMap<string, RecordFile>,
    private readonly indexOff: boolean,
  ) {}

  /** The tree of a snapshot: its own fs, or the committed chainID snapshot it borrows. */
  fsOf(rec: RecordFile): string {
    return rec.chainID !== undefined ? this.snapshots.fsPath(rec.chainID) : join(this.dir, rec.id, 'fs');
  }

  /** The trees of a snapshot's parents, immediate parent first; borrowed ones by their short links when `linked`. */
  private parentTrees(parent: string | undefined, linked = false): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    for (let name = parent; name !== undefined;) {
      if (seen.has(name)) throw new FastpullError('INTERNAL', `snapshot parents form a loop at ${JSON.stringify(name)}`);
      seen.add(name);
      const rec = this.byName.get(name);
      if (!rec) throw new FastpullError('NOT_FOUND', `parent snapshot ${JSON.stringify(name)} does not exist`);
      const link = linked && rec.chainID !== undefined ? this.links.get(rec.chainID) : undefined;
      out.push(link ?? this.fsOf(rec));
      name = rec.parent;
    }
    return out;
  }

  private mountsOf(rec: RecordFile, linked = false): Mount[] {
    return recordMounts(
      { kind: rec.kind, fs: this.fsOf(rec), work: join(this.dir, rec.id, 'work'), parents: this.parentTrees(rec.parent, linked) },
      { indexOff: this.indexOff },
    );
  }

  /**
   * The mounts containerd gets. mount(2) takes the options in one page, and containerd's mount code,
   * past the length below, shortens the lowerdirs to their paths under their longest common
   * directory and mounts from there. A borrowed tree's path ends in its 64-hex chainID, so past
   * about fifty layers even that does not fit; a stack that long names each borrowed layer by its
   * short link instead, which all sit in one directory under names of a dozen characters.
   */
  mountsFor(rec: RecordFile): Mount[] {
    const plain = this.mountsOf(rec);
    return tooLong(plain) ? this.mountsOf(rec, true) : plain;
  }

  /** Makes the short links {@link mountsFor} names for `rec`'s borrowed parents, when its stack needs them. */
  async linkParents(rec: RecordFile): Promise<void> {
    if (!tooLong(this.mountsOf(rec))) return;
    for (let name = rec.parent; name !== undefined;) {
      const parent = this.byName.get(name);
      if (!parent) return;
      if (parent.chainID !== undefined) this.links.set(parent.chainID, await this.snapshots.shortLink(parent.chainID));
      name = parent.parent;
    }
  }
}

/** Whether an overlay's options reach the length past which containerd's mount code shortens them. */
function tooLong(mounts: readonly Mount[]): boolean {
  return mounts.some((m) => m.type === 'overlay' && m.options.join(',').length >= MAX_MOUNT_OPTIONS);
}
