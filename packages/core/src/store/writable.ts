// Writable mounts of an image (`fastpull mount`), as store records: the store makes the mount's upper
// and work dirs and its record, and gives the overlay mount as data; whoever can reach the mount point
// (the CLI, on the user's host and in the user's mount namespace) makes the mount itself.
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { isAbsolute, join, posix } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import { createMountRecord, listMountRecords, mountsDir, readMountRecord, removeMountRecord, type MountRecord } from '../snapshots/mountrecords.js';
import { nativeFs } from '../native/addon.js';
import { sleep } from '../util/retry.js';
import type { Mount } from '../snapshots/store.js';
import type { Store } from './root.js';
import type { ImageRecord } from '../images/store.js';

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

/** The longest mount point, in bytes: PATH_MAX less the terminating NUL. */
const MAX_TARGET_BYTES = 4095;

/**
 * The system's own trees: a mount at or under one would hide what the host runs on (or, in /proc,
 * /sys and /dev, what the kernel shows), so no record may name one.
 */
const SYSTEM_TREES = ['/proc', '/sys', '/dev', '/etc', '/boot', '/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

const within = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

/**
 * Throws INVALID_ARGUMENT for a mount point no writable mount may have: one that is not absolute,
 * holds a NUL, is longer than a path may be, is not in canonical form (`.`, `..`, `//` or a trailing
 * `/`), is `/`, lies at or under a system tree ({@link SYSTEM_TREES}), or at, under or above the
 * store root.
 */
function checkTarget(target: string, root: string): void {
  const shown = JSON.stringify(target.length > 200 ? `${target.slice(0, 200)}…` : target);
  const refuse = (why: string): never => {
    throw new FastpullError('INVALID_ARGUMENT', `mount point ${shown}: ${why}`);
  };
  if (!isAbsolute(target)) refuse('not an absolute path');
  if (target.includes('\0')) refuse('holds a NUL byte');
  if (Buffer.byteLength(target) > MAX_TARGET_BYTES) refuse(`${Buffer.byteLength(target)} bytes, longer than a path may be (${MAX_TARGET_BYTES})`);
  if (target.length > 1 && (posix.normalize(target) !== target || target.endsWith('/')))
    refuse(`not in canonical form; name it as ${JSON.stringify(posix.normalize(target).replace(/(.)\/$/, '$1'))}`);
  if (target === '/') refuse('the root of the filesystem');
  const tree = SYSTEM_TREES.find((dir) => within(target, dir));
  if (tree) refuse(`in ${tree}, a system tree no fastpull mount may hide`);
  if (within(target, root) || within(root, target)) refuse(`at, under or above the store root ${root}`);
}

/** How often a waiter tries the store's mount lock again (flock cannot wait without blocking the thread). */
const LOCK_POLL_MS = 20;

/**
 * Runs `fn` holding the exclusive lock of the store's writable-mount records (`<root>/mounts.lock`):
 * the check that a target is free and the record that takes it are one step for every process.
 */
async function withMountsLock<T>(root: string, fn: () => Promise<T>): Promise<T> {
  let fd: number;
  try {
    mkdirSync(root, { recursive: true });
    fd = openSync(join(root, 'mounts.lock'), 'a', 0o600);
  } catch (e) {
    throw fromFsError(e, `locking the writable mounts of ${root}`);
  }
  try {
    while (!nativeFs().tryLock(fd, true)) await sleep(LOCK_POLL_MS);
    return await fn();
  } finally {
    closeSync(fd);
  }
}

/**
 * Records a writable mount of `image` at `target` (an absolute path, symlinks resolved) and gives
 * the overlay to mount there. INVALID_ARGUMENT when `target` is no place for one (relative, with a
 * NUL, too long, not canonical, `/`, in a system tree such as /etc or /proc, at or around the store
 * root) or a record of the store has that target already; NOT_FOUND when a snapshot of the image is
 * gone. Of two calls for one target at once, one succeeds.
 * @example
 * const { record, mount } = await createWritableMount(store, image, '/mnt/app');
 * // mount -t overlay overlay -o <mount.options joined by ','> /mnt/app
 */
export async function createWritableMount(store: Store, image: ImageRecord, target: string): Promise<WritableMount> {
  checkTarget(target, store.root);
  const snapshots = image.layers.map((l) => l.chainID);
  const [ro] = await store.snapshots.mounts(snapshots);
  // The read-only mounts give one layer as a bind; a writable root is always an overlay.
  const lower = ro!.type === 'overlay' ? ro!.options.filter((o) => o !== 'ro') : [`lowerdir=${ro!.source}`];
  const record = await withMountsLock(store.root, async () => {
    if ((await listMountRecords(store.root)).some((m) => m.target === target)) {
      throw new FastpullError('INVALID_ARGUMENT', `${target} already holds a fastpull mount; unmount it first`);
    }
    try {
      return await createMountRecord(store.root, { image: image.name, manifest: image.manifest.digest, snapshots, target });
    } catch (e) {
      throw fromFsError(e, `recording a writable mount of ${image.name} at ${target}`);
    }
  });
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
