// Leases, taken under the collection lock (util/collection-lock.ts): what keeps garbage collection
// from removing what a running pull needs, across processes (the CLI and the daemon share a store),
// without a database.
//
// A pull takes a lease before it looks at the store: `<root>/leases/<id>/` with an owner flock
// (util/owner.ts) and `refs.json` naming the blobs and snapshots it will use. Collection holds
// `<root>/gc.lock` exclusively while it decides what to remove; a lease is created only under the
// same lock held shared. So collection either sees the lease, or ran entirely before it and the
// pull finds the store as collection left it. A lease of a process that died is free to take and
// counts for nothing; collection removes it.
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import { claimDir, sweepDeadDirs, tryClaimDir } from '../util/owner.js';
import { randomId, writeFileAtomic } from '../util/fs.js';
import { withCollectionLock } from '../util/collection-lock.js';

/** What a lease keeps: blob digests and snapshot chainIDs. */
export interface LeaseRefs {
  /** Digests of blobs to keep. */
  readonly blobs: readonly Digest[];
  /** chainIDs of snapshots to keep. */
  readonly snapshots: readonly Digest[];
}

/** A hold on content in a store: garbage collection keeps what it names until it is released or its process dies. */
export interface Lease {
  /** Its name under `<root>/leases`. */
  readonly id: string;
  /** Ends the lease: what it kept is collectable again, unless an image refers to it. */
  release(): Promise<void>;
}

/**
 * Takes a lease on `refs` in the store at `root`: garbage collection, in any process, keeps them
 * until `release()` is called or this process exits. Pulls take one for what they use; take one to
 * keep an image's snapshots while it is mounted. Calls `onWait` once if a collection holds the store
 * and it has to wait. Throws ABORTED when `signal` fires while waiting for the collection lock,
 * NO_SPACE or INTERNAL when the lease cannot be written.
 * @example
 * const lease = await acquireLease(store.root, { blobs: [], snapshots: image.layers.map((l) => l.chainID) });
 * try {
 *   // use the snapshots
 * } finally {
 *   await lease.release();
 * }
 */
export async function acquireLease(root: string, refs: LeaseRefs, signal?: AbortSignal, onWait?: () => void): Promise<Lease> {
  const id = randomId();
  const dir = join(root, 'leases', id);
  const release = await withCollectionLock(
    root,
    'shared',
    async () => {
      try {
        await fsp.mkdir(dir, { recursive: true });
        const unlock = claimDir(dir);
        await writeFileAtomic(join(dir, 'refs.json'), JSON.stringify(refs));
        return unlock;
      } catch (e) {
        await fsp.rm(dir, { recursive: true, force: true });
        throw fromFsError(e, 'taking a lease on the store');
      }
    },
    signal,
    onWait,
  );
  let released = false;
  return {
    id,
    async release() {
      if (released) return;
      released = true;
      await fsp.rm(dir, { recursive: true, force: true });
      release();
    },
  };
}

/**
 * The refs of every lease a live process holds, except `except` (the caller's own). Removes the
 * leases of dead processes on the way. Call under the collection lock for a stable answer.
 * @example
 * await withCollectionLock(root, 'exclusive', async () => {
 *   if (!(await liveLeaseRefs(root)).blobs.has(digest)) await openStore(root).content.delete(digest);
 * });
 */
export async function liveLeaseRefs(root: string, except?: string): Promise<{ blobs: Set<Digest>; snapshots: Set<Digest> }> {
  await sweepDeadDirs(join(root, 'leases'));
  return readLiveLeases(root, except);
}

/** {@link liveLeaseRefs} without removing dead leases (a collection's dry run removes nothing). */
export async function readLiveLeases(root: string, except?: string): Promise<{ blobs: Set<Digest>; snapshots: Set<Digest> }> {
  const parent = join(root, 'leases');
  const blobs = new Set<Digest>();
  const snapshots = new Set<Digest>();
  let names: string[];
  try {
    names = await fsp.readdir(parent);
  } catch {
    return { blobs, snapshots };
  }
  for (const name of names) {
    if (name === except) continue;
    const dir = join(parent, name);
    // A lease whose lock we can take has no live holder (sweep raced with its death): not counted.
    const mine = tryClaimDir(dir);
    if (mine) {
      mine();
      continue;
    }
    let refs: LeaseRefs;
    try {
      refs = JSON.parse(await fsp.readFile(join(dir, 'refs.json'), 'utf8')) as LeaseRefs;
    } catch (e) {
      // Held but without refs: being released (its files go before its lock). It cannot be being
      // made, for leases are made under the collection lock that our caller holds.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new FastpullError('INTERNAL', `lease ${name}: refs.json is unreadable`, { cause: e });
    }
    for (const b of refs.blobs) blobs.add(b);
    for (const s of refs.snapshots) snapshots.add(s);
  }
  return { blobs, snapshots };
}
