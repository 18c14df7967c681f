// The mounts of a containerd snapshot, as containerd's overlay snapshotter gives them: what the
// caller (containerd's applier, the runc shim) mounts to write a layer or run a container.
import { existsSync } from 'node:fs';
import type { Mount } from '../store.js';
import type { SnapshotKind } from './record-file.js';

/** The directories a snapshot's mounts are made of. */
export interface MountDirs {
  readonly kind: SnapshotKind;
  /** The snapshot's own tree (upperdir of an active one). */
  readonly fs: string;
  /** overlayfs's work directory of an active snapshot. */
  readonly work: string;
  /** The trees of its parents, immediate parent first. */
  readonly parents: readonly string[];
}

let indexOff: boolean | undefined;

/**
 * Whether overlay mounts take `index=off`: when the kernel has the index feature, as containerd
 * decides. With it on, a lower directory shared by many mounts (a layer of several containers)
 * could be refused by a later mount that finds another upper's index on it.
 */
export function overlayIndexOff(): boolean {
  indexOff ??= existsSync('/sys/module/overlay/parameters/index');
  return indexOff;
}

/**
 * The mounts of a snapshot: a writable bind of its tree when it has no parent; an overlay with
 * upperdir and workdir over its parents when active; a read-only bind of the one parent, or a
 * lowerdir-only overlay of several, for a view.
 * @example
 * recordMounts({ kind: 'active', fs: '/s/2/fs', work: '/s/2/work', parents: ['/s/1/fs'] });
 * // [{ type: 'overlay', source: 'overlay', options: ['index=off', 'workdir=/s/2/work', 'upperdir=/s/2/fs', 'lowerdir=/s/1/fs'] }]
 */
export function recordMounts(dirs: MountDirs, options: { readonly indexOff?: boolean } = {}): Mount[] {
  const { kind, fs, work, parents } = dirs;
  if (parents.length === 0) return [{ type: 'bind', source: fs, options: [kind === 'view' ? 'ro' : 'rw', 'rbind'] }];
  if (kind !== 'active' && parents.length === 1) return [{ type: 'bind', source: parents[0]!, options: ['ro', 'rbind'] }];
  const opts: string[] = [];
  if (options.indexOff ?? overlayIndexOff()) opts.push('index=off');
  if (kind === 'active') opts.push(`workdir=${work}`, `upperdir=${fs}`);
  opts.push(`lowerdir=${parents.join(':')}`);
  return [{ type: 'overlay', source: 'overlay', options: opts }];
}
