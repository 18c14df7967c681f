// What dead processes left in a store, found and removed by garbage collection, each named by its path.
import { promises as fsp } from 'node:fs';
import { join, relative } from 'node:path';
import type { Store } from '../store/root.js';
import { sweepTempFiles } from '../util/fs.js';
import { sweepDeadDirs } from '../util/owner.js';

/** One leftover of a dead process that garbage collection removed (or, in a dry run, would remove). */
export interface GcLeftover {
  /**
   * What it is: `lease`, a dead process's lease; `ingest`, a partial download; `active`, a
   * half-written snapshot (an unpack that never committed); `trash`, a snapshot a killed collection
   * had begun to delete; `temp`, a temporary file of an interrupted record, blob or link write.
   */
  readonly kind: 'lease' | 'ingest' | 'active' | 'trash' | 'temp';
  /** Its path relative to the store root, `/`-separated (`content/ingest/<id>`, `leases/<id>`, ...). */
  readonly path: string;
}

/**
 * A writer renames its temporary file (util/fs.ts TEMP_PREFIX) moments after making it; one this
 * old was left by a process that died in between (a kill -9 while storing a manifest, say).
 */
const STALE_TEMP_MS = 60_000;

function named(store: Store, kind: GcLeftover['kind'], dir: string, names: readonly string[]): GcLeftover[] {
  return names.map((name) => ({ kind, path: relative(store.root, join(dir, name)) }));
}

/** Removes (with `dryRun`, names) the leases of dead processes; run under the collection lock, before leases are read. */
export async function sweepDeadLeases(store: Store, dryRun: boolean): Promise<GcLeftover[]> {
  const dir = join(store.root, 'leases');
  return named(store, 'lease', dir, await sweepDeadDirs(dir, 0, dryRun ? { dryRun: true } : {}));
}

/**
 * Removes (with `dryRun`, names) partial downloads and unpacks of dead processes, snapshots a killed
 * collection left in trash/, and stale temporary files. Run after this collection's own trash is
 * deleted, so that what trash/ still holds is another's.
 */
export async function sweepLeftovers(store: Store, dryRun: boolean): Promise<GcLeftover[]> {
  const trashDir = join(store.snapshots.dir, 'trash');
  const activeDir = join(store.snapshots.dir, 'active');
  const ingestDir = join(store.content.dir, 'ingest');
  const trashed = await fsp.readdir(trashDir).catch(() => [] as string[]);
  const [ingests, actives, temps] = await Promise.all([
    store.content.sweep(0, { dryRun }),
    // The snapshot store's sweep deletes trash/ too; the dry run lists it above and leaves it.
    store.snapshots.sweep({ dryRun }),
    sweepTemps(store, dryRun),
  ]);
  return [...named(store, 'ingest', ingestDir, ingests), ...named(store, 'active', activeDir, actives), ...named(store, 'trash', trashDir, trashed), ...temps];
}

/** Removes (or with `dryRun`, names) stale temporary files where atomic writes leave them: blob dirs, image records, short links. */
async function sweepTemps(store: Store, dryRun: boolean): Promise<GcLeftover[]> {
  const blobs = join(store.content.dir, 'blobs');
  const algorithms = await fsp.readdir(blobs).catch(() => [] as string[]);
  const dirs = [store.images.dir, join(store.snapshots.dir, 'l'), ...algorithms.map((a) => join(blobs, a))];
  const out: GcLeftover[] = [];
  for (const dir of dirs) out.push(...named(store, 'temp', dir, await sweepTempFiles(dir, STALE_TEMP_MS, dryRun)));
  return out;
}
