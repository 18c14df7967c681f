// Writable mounts of an image (`fastpull mount`), as store records: the store makes the mount's upper
// and work dirs and its record, and gives the overlay mount as data; whoever can reach the mount point
// (the CLI, on the user's host and in the user's mount namespace) makes the mount itself.
import { isAbsolute, join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import { createMountRecord, listMountRecords, mountsDir, readMountRecord, removeMountRecord, type MountRecord } from '../snapshots/mountrecords.js';
import type { Mount } from '../snapshots/store.js';
import type { Store } from '../store.js';
import type { ImageRecord } from './store.js';

/** A writable mount's record and the overlay mount to make for it. */
export interface WritableMount {
  /** What the store recorded: gc keeps the snapshots it names until it is removed. */
  readonly record: MountRecord;
  /**
   * The overlay to mount at `record.target`: the image's snapshots as lowerdir (a one-layer image
   * too), `record.upper` as upperdir, `record.work` as workdir.
   */
  readonly mount: Mount;
}

/**
 * Records a writable mount of `image` at `target` (an absolute path, symlinks resolved) and gives
 * the overlay to mount there. INVALID_ARGUMENT when `target` is relative or a record of the store has
 * that target already; NOT_FOUND when a snapshot of the image is gone.
 * @example
 * const { record, mount } = await createWritableMount(store, image, '/mnt/app');
 * // mount -t overlay overlay -o <mount.options joined by ','> /mnt/app
 */
export async function createWritableMount(store: Store, image: ImageRecord, target: string): Promise<WritableMount> {
  if (!isAbsolute(target)) throw new FastpullError('INVALID_ARGUMENT', `a writable mount of ${image.name} needs an absolute mount point, not ${target}`);
  if ((await listMountRecords(store.root)).some((m) => m.target === target)) {
    throw new FastpullError('INVALID_ARGUMENT', `${target} already holds a fastpull mount; unmount it first`);
  }
  const snapshots = image.layers.map((l) => l.chainID);
  const [ro] = await store.snapshots.mounts(snapshots);
  // The read-only mounts give one layer as a bind; a writable root is always an overlay.
  const lower = ro!.type === 'overlay' ? ro!.options.filter((o) => o !== 'ro') : [`lowerdir=${ro!.source}`];
  let record: MountRecord;
  try {
    record = await createMountRecord(store.root, { image: image.name, manifest: image.manifest.digest, snapshots, target });
  } catch (e) {
    throw fromFsError(e, `recording a writable mount of ${image.name} at ${target}`);
  }
  return { record, mount: { type: 'overlay', source: 'overlay', options: [...lower, `upperdir=${record.upper}`, `workdir=${record.work}`] } };
}

/**
 * Removes a writable mount's record and its upper and work dirs (the changes made in it) and returns
 * the record; NOT_FOUND when the store has no record of that id. Unmount first: the store does not.
 * @example
 * await removeWritableMount(store, record.id);
 */
export async function removeWritableMount(store: Store, id: string): Promise<MountRecord> {
  // An id is a directory name under mounts/: nothing that could name another path.
  const record = /^[0-9a-f]{1,64}$/.test(id) ? await readMountRecord(join(mountsDir(store.root), id)) : undefined;
  if (!record) throw new FastpullError('NOT_FOUND', `no writable mount ${id} in the store at ${store.root}`);
  try {
    await removeMountRecord(store.root, record.id);
  } catch (e) {
    throw fromFsError(e, `removing the writable mount of ${record.image} at ${record.target}`);
  }
  return record;
}

/**
 * Every writable mount the store has a record of, by target.
 * @example
 * const busy = (await listWritableMounts(store)).some((m) => m.target === '/mnt/app');
 */
export async function listWritableMounts(store: Store): Promise<MountRecord[]> {
  return (await listMountRecords(store.root)).sort((a, b) => a.target.localeCompare(b.target));
}
