// Records of writable mounts made over an image (`fastpull mount`): each has its own upper and work
// directories under <root>/mounts/<id>/ and a mount.json saying what is mounted where over which
// snapshots, so unmount can undo it and gc keeps those snapshots while the record exists.
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { Digest } from '../oci/digest.js';
import { writeFileAtomic } from '../util/fs.js';

/** One writable mount of an image. */
export interface MountRecord {
  /** Its directory's name under `<root>/mounts`. */
  readonly id: string;
  /** The image's canonical name. */
  readonly image: string;
  /** The image's manifest digest. */
  readonly manifest: string;
  /** chainIDs of the snapshots in the lowerdir stack, bottom first. */
  readonly snapshots: readonly Digest[];
  /** The mount point: absolute, symlinks resolved. */
  readonly target: string;
  /** Where the mount's changes go. */
  readonly upper: string;
  /** overlayfs's work directory for the mount. */
  readonly work: string;
  /** When it was made (ISO 8601). */
  readonly created: string;
}

/**
 * `<root>/mounts`.
 * @example mountsDir('/var/lib/fastpull') // '/var/lib/fastpull/mounts'
 */
export function mountsDir(root: string): string {
  return join(root, 'mounts');
}

/**
 * Every finished mount record of the store (a directory without its record was never mounted).
 * @example
 * const targets = (await listMountRecords(root)).map((r) => r.target);
 */
export async function listMountRecords(root: string): Promise<MountRecord[]> {
  const out: MountRecord[] = [];
  for (const id of await fsp.readdir(mountsDir(root)).catch(() => [] as string[])) {
    const rec = await readMountRecord(join(mountsDir(root), id));
    if (rec) out.push(rec);
  }
  return out;
}

/**
 * The record in a mount's directory, or undefined when there is none or it is unreadable.
 * @example
 * const record = await readMountRecord(join(mountsDir(root), id));
 */
export async function readMountRecord(dir: string): Promise<MountRecord | undefined> {
  try {
    const rec = JSON.parse(await fsp.readFile(join(dir, 'mount.json'), 'utf8')) as Partial<MountRecord>;
    if (typeof rec.id !== 'string' || typeof rec.target !== 'string' || !Array.isArray(rec.snapshots)) return undefined;
    return rec as MountRecord;
  } catch {
    return undefined;
  }
}

/**
 * Makes the directories of a new mount and writes its record, before anything is mounted: a crash in
 * between leaves something unmount (and gc, which keeps its snapshots) can see.
 * @example
 * const record = await createMountRecord(root, { image: image.name, manifest: image.manifest.digest, snapshots, target });
 */
export async function createMountRecord(root: string, what: Pick<MountRecord, 'image' | 'manifest' | 'snapshots' | 'target'>): Promise<MountRecord> {
  const id = randomBytes(8).toString('hex');
  const home = join(mountsDir(root), id);
  const record: MountRecord = { id, ...what, upper: join(home, 'upper'), work: join(home, 'work'), created: new Date().toISOString() };
  await fsp.mkdir(record.upper, { recursive: true });
  await fsp.mkdir(record.work, { recursive: true });
  await writeFileAtomic(join(home, 'mount.json'), `${JSON.stringify(record, null, 2)}\n`);
  return record;
}

/**
 * Removes a mount's directories and record (its changes with them).
 * @example
 * await removeMountRecord(root, record.id);
 */
export async function removeMountRecord(root: string, id: string): Promise<void> {
  await fsp.rm(join(mountsDir(root), id), { recursive: true, force: true });
}
