// Garbage collection: removes the blobs and snapshots that no image record, running pull (lease) or
// live mount refers to, and the litter of dead processes. Safe while other processes pull into the
// same store: see lease.ts for why nothing a pull needs can go.
import { promises as fsp } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Digest } from '../oci/digest.js';
import { formatPlatform } from '../oci/platform.js';
import type { ImageRecord } from '../images/store.js';
import type { Store } from '../store/root.js';
import { liveLeaseRefs, readLiveLeases } from '../store/lease.js';
import { withCollectionLock } from '../util/collection-lock.js';
import { mountInfo, type MountInfo } from '../snapshots/mountinfo.js';
import { recordedChainIDs } from '../snapshots/containerd/record-file.js';
import { listMountRecords } from '../snapshots/mountrecords.js';
import { sweepDeadLeases, sweepLeftovers, type GcLeftover } from './leftovers.js';

/** Options of {@link collectGarbage}. */
export interface GcOptions {
  /** Say what would be removed, remove nothing. */
  readonly dryRun?: boolean;
  /** Stops waiting for the collection lock (ABORTED); a collection that holds it runs to the end. */
  readonly signal?: AbortSignal;
}

/** What {@link collectGarbage} removed (or, with `dryRun`, would remove). */
export interface GcResult {
  /** Blobs removed, with their sizes in bytes. */
  readonly blobs: readonly { readonly digest: Digest; readonly size: number }[];
  /** Snapshots removed, with the uncompressed size of their layer in bytes. */
  readonly snapshots: readonly { readonly chainID: Digest; readonly size: number }[];
  /**
   * What processes that died left, removed (or, with `dryRun`, that would be): partial downloads and
   * unpacks, leases, snapshots a collection had begun to delete, and temporary files of records and
   * blobs (once a minute old). As many as `leftovers` names.
   */
  readonly litter: number;
  /**
   * Each of those leftovers, named (a dry run names exactly what a collection run instead would
   * remove). Absent from a service that counts them only; a fastpulld from before its wire carried
   * them answers an empty list.
   */
  readonly leftovers?: readonly GcLeftover[];
  /** Blob bytes plus uncompressed layer bytes of the removed snapshots. */
  readonly bytes: number;
  /**
   * Image records held for containerd (ImageRecord.heldFor) that no containerd snapshot record used
   * any more, removed before their layers were weighed.
   */
  readonly images: readonly { readonly name: string; readonly platform: string }[];
}

/**
 * How old a record held for containerd must be before collection may drop it for want of
 * containerd records: the fast path writes the image record as its pull ends, and containerd's
 * records of the last layers come moments after.
 */
export const HELD_FOR_CONTAINERD_GRACE_MS = 10 * 60_000;

/**
 * Removes what nothing refers to. A snapshot is kept while an image lists its chainID, a running
 * pull holds it, a mount in this namespace uses it, a `fastpull mount` record names it, or a
 * containerd snapshot record (`snapshots/containerd`, see SnapshotRecords) borrows it; the records'
 * own directories are containerd's to remove, never collection's. A manifest, config or index blob
 * is kept while an image names it; a layer blob only while an image pulled with `keepBlobs` lists it, its snapshot is not
 * committed (it is needed to unpack), or a running pull holds it. Safe while other processes pull
 * into the same store; also removes what dead processes left (partial downloads and unpacks, and
 * temporary files of interrupted record and blob writes once a minute old).
 * Throws ABORTED when `signal` fires while waiting for the collection lock.
 * @example
 * const { bytes } = await collectGarbage(openStore('/var/lib/fastpull'));
 */
export async function collectGarbage(store: Store, options: GcOptions = {}): Promise<GcResult> {
  const trash: Array<() => Promise<void>> = [];
  const decided = await withCollectionLock(
    store.root,
    'exclusive',
    async () => {
      // Leases before images: a pull records its image and only then ends its lease, so reading in
      // this order sees every finishing pull at least once (as a lease, or as an image).
      const deadLeases = await sweepDeadLeases(store, options.dryRun === true);
      const leased = await (options.dryRun ? readLiveLeases(store.root) : liveLeaseRefs(store.root));
      const borrowed = await recordedChainIDs(store.root);
      const { images, released } = await releaseHeldImages(store, await store.images.list(), borrowed, options.dryRun === true);
      const mounted = mountedPaths(await mountInfo());
      const mountedChains = new Set<Digest>();
      const links = await store.snapshots.shortLinks();
      // A mount of many layers names them by their short links (snapshots/l/<prefix>).
      for (const m of mounted) {
        const chainID = links.get(m);
        if (chainID !== undefined) mountedChains.add(chainID);
      }
      // containerd's snapshot records (served by fastpulld) that borrow committed snapshots keep them.
      const wantSnapshots = new Set<Digest>([...leased.snapshots, ...(await recordedMountSnapshots(store.root)), ...borrowed]);
      for (const img of images) for (const l of img.layers) wantSnapshots.add(l.chainID);
      const snapshots: Array<{ chainID: Digest; size: number }> = [];
      const committed = new Set<Digest>(); // the snapshots that stay
      for (const info of await store.snapshots.list()) {
        // `/committed/<hex>/fs`, alone or with more below it: a bind mount shows its path from the
        // root of its filesystem, which need not be the store's.
        const dir = dirname(store.snapshots.fsPath(info.chainID));
        const tail = `/${basename(dirname(dir))}/${basename(dir)}/fs`;
        if (wantSnapshots.has(info.chainID) || mountedChains.has(info.chainID) || mounted.some((m) => m.endsWith(tail) || m.includes(`${tail}/`))) {
          committed.add(info.chainID);
          continue;
        }
        snapshots.push({ chainID: info.chainID, size: info.size });
        if (!options.dryRun) trash.push(await store.snapshots.discard(info.chainID));
      }
      if (!options.dryRun) {
        for (const [link, chainID] of links) if (!committed.has(chainID)) await fsp.rm(link, { force: true });
      }
      const keepBlobs = blobsToKeep(images, committed);
      for (const b of leased.blobs) keepBlobs.add(b);
      const blobs: Array<{ digest: Digest; size: number }> = [];
      for (const blob of await store.content.list()) {
        if (keepBlobs.has(blob.digest)) continue;
        blobs.push({ digest: blob.digest, size: blob.size });
        if (!options.dryRun) await store.content.delete(blob.digest);
      }
      return { blobs, snapshots, deadLeases, images: released };
    },
    options.signal,
  );
  // Discarded snapshots were renamed out of sight under the lock; deleting their files can take
  // long, and needs no lock.
  for (const remove of trash) await remove();
  const { deadLeases, images, ...result } = decided;
  const leftovers = [...deadLeases, ...(await sweepLeftovers(store, options.dryRun === true))];
  const bytes = result.blobs.reduce((n, b) => n + b.size, 0) + result.snapshots.reduce((n, s) => n + s.size, 0);
  return { ...result, litter: leftovers.length, leftovers, bytes, images };
}

/** The blobs images need, given which of their snapshots are committed. */
export function blobsToKeep(images: readonly ImageRecord[], committed: ReadonlySet<Digest>): Set<Digest> {
  const keep = new Set<Digest>();
  for (const img of images) {
    keep.add(img.target.digest);
    keep.add(img.manifest.digest);
    keep.add(img.config.digest);
    for (const l of img.layers) if (img.keepBlobs === true || !committed.has(l.chainID)) keep.add(l.digest);
  }
  return keep;
}

/**
 * Drops (or, in a dry run, names) the image records held for containerd, past the grace time, of
 * which containerd's records borrow no layer; returns the records that stay and those dropped. Each
 * is read again just before it goes, so a record a user's pull rewrote meanwhile stays.
 */
async function releaseHeldImages(
  store: Store,
  all: readonly ImageRecord[],
  borrowed: ReadonlySet<Digest>,
  dryRun: boolean,
): Promise<{ images: ImageRecord[]; released: { name: string; platform: string }[] }> {
  const images: ImageRecord[] = [];
  const released: { name: string; platform: string }[] = [];
  const before = Date.now() - HELD_FOR_CONTAINERD_GRACE_MS;
  const letGo = (r: ImageRecord | undefined): boolean =>
    r?.heldFor === 'containerd' && Date.parse(r.created) < before && !r.layers.some((l) => borrowed.has(l.chainID));
  for (const img of all) {
    if (!letGo(img)) {
      images.push(img);
      continue;
    }
    const platform = formatPlatform(img.platform);
    const now = dryRun ? img : await store.images.get(img.name, platform);
    if (now && letGo(now) && (dryRun || (await store.images.delete(img.name, platform)))) released.push({ name: img.name, platform });
    else if (now) images.push(now);
  }
  return { images, released };
}

/** The snapshots `fastpull mount` records use (a record is written before its mount is made). */
async function recordedMountSnapshots(root: string): Promise<Digest[]> {
  return (await listMountRecords(root)).flatMap((r) => r.snapshots);
}

/**
 * The directories the mounts of this namespace show: each mount's root within its filesystem (a
 * bind mount of a snapshot) and each overlay's lower directories (a snapshot, or its short link).
 */
function mountedPaths(mounts: readonly MountInfo[]): string[] {
  const out: string[] = [];
  for (const m of mounts) {
    out.push(m.root);
    if (m.fsType !== 'overlay') continue;
    for (const option of m.superOptions.split(',')) {
      if (option.startsWith('lowerdir=')) out.push(...option.slice('lowerdir='.length).split(':'));
    }
  }
  return out;
}
