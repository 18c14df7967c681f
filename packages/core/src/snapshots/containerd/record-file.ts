// containerd-style snapshot records on disk, under `<root>/snapshots/containerd`: one directory per
// snapshot, named by an id of its own (containerd's keys hold slashes and spaces), holding
// `record.json` and the directories that back it: `fs` (and `work` for an active snapshot), or none
// when it borrows one of the store's committed chainID snapshots. A snapshot is made in a `.new-*`
// directory and renamed into place whole, and removed by a rename to `.trash-*` before its files go,
// so a crash at any moment leaves whole records and litter that the next open sweeps.
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../../errors.js';
import { isDigest, type Digest } from '../../oci/digest.js';
import { randomId, syncDir, TEMP_PREFIX, writeFileAtomic } from '../../util/fs.js';
import type { SnapshotUsage } from '../usage.js';

/** The kinds of containerd snapshot: being written, read-only over a parent, or immutable. */
export type SnapshotKind = 'active' | 'view' | 'committed';

/** One record as stored in `record.json`. */
export interface RecordFile {
  readonly version: 1;
  /** Its directory's name under `<root>/snapshots/containerd`. */
  readonly id: string;
  readonly kind: SnapshotKind;
  /** containerd's key (active, view) or name (committed). */
  readonly name: string;
  /** Name of the committed snapshot below; absent for a bottom one. */
  readonly parent?: string;
  readonly labels: Readonly<Record<string, string>>;
  /** RFC 3339 with nanoseconds, UTC. */
  readonly created: string;
  readonly updated: string;
  /** Set when the snapshot is one of the store's committed chainID snapshots, not a directory of its own. */
  readonly chainID?: Digest;
  /** Measured once, for a committed snapshot (its files never change). */
  readonly usage?: SnapshotUsage;
}

const RECORD_FILE = 'record.json';
/** Prefix of a snapshot directory being made. */
export const NEW_PREFIX = '.new-';
/** Prefix of a removed snapshot's directory whose files are being deleted. */
export const TRASH_PREFIX = '.trash-';
/** The lock file its one writer holds. */
export const LOCK_FILE = '.lock';
const ID = /^[0-9a-z]+-[0-9a-f]{12}$/;

/** `<root>/snapshots/containerd`. */
export function recordsDir(root: string): string {
  return join(root, 'snapshots', 'containerd');
}

/** Wall-clock time of performance.now()'s origin, kept within a millisecond of Date.now(). */
let clockAnchor = Date.now() - performance.now();
/** The last time given, so that times never go back while the two clocks are reconciled. */
let lastTime = 0;

/**
 * Now, as RFC 3339 with nanoseconds (microseconds measured): containerd compares snapshot times
 * with its own clock's nanoseconds, so a time rounded down to the millisecond could read as before
 * the call that made it. Never before Date.now() at the call, never more than a millisecond after,
 * and never before a time given earlier (unless the wall clock was set back).
 */
export function snapshotTime(): string {
  const wall = Date.now();
  let ms = clockAnchor + performance.now();
  if (ms < wall || ms > wall + 1) {
    // The wall clock was stepped, or the monotonic one drifted from it: follow the wall clock.
    clockAnchor = wall - performance.now();
    ms = clockAnchor + performance.now();
  }
  // Set back by more than the clocks' difference: the earlier times no longer bound this one.
  if (lastTime > wall + 1) lastTime = 0;
  ms = Math.max(ms, lastTime);
  lastTime = ms;
  const micros = Math.round(ms * 1000);
  const seconds = Math.floor(micros / 1_000_000);
  const frac = String(micros % 1_000_000).padStart(6, '0');
  return `${new Date(seconds * 1000).toISOString().slice(0, 19)}.${frac}000Z`;
}

/** A record read back from disk; undefined when it is not one (a half-written or foreign file). */
function parseRecord(raw: string, id: string): RecordFile | undefined {
  let r: Partial<RecordFile>;
  try {
    r = JSON.parse(raw) as Partial<RecordFile>;
  } catch {
    return undefined;
  }
  const kinds: readonly unknown[] = ['active', 'view', 'committed'];
  if (r === null || typeof r !== 'object' || r.version !== 1 || r.id !== id || !kinds.includes(r.kind)) return undefined;
  if (typeof r.name !== 'string' || r.name === '' || (r.parent !== undefined && typeof r.parent !== 'string')) return undefined;
  if (typeof r.created !== 'string' || typeof r.updated !== 'string' || typeof r.labels !== 'object' || r.labels === null) return undefined;
  if (r.chainID !== undefined && (!isDigest(r.chainID) || r.kind !== 'committed')) return undefined;
  return { ...r, labels: labelSet(r.labels) } as RecordFile;
}

/** The record of each snapshot directory, and the entries no record owns (litter for Cleanup). */
export async function readRecords(dir: string): Promise<{ records: RecordFile[]; unowned: string[] }> {
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], unowned: [] };
    throw fromFsError(e, `reading snapshot records in ${dir}`);
  }
  const records: RecordFile[] = [];
  const unowned: string[] = [];
  for (const name of names.sort()) {
    if (name === LOCK_FILE) continue;
    if (!ID.test(name)) {
      unowned.push(name);
      continue;
    }
    let raw: string;
    try {
      raw = await fsp.readFile(join(dir, name, RECORD_FILE), 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        unowned.push(name);
        continue;
      }
      throw fromFsError(e, `reading snapshot record ${name}`);
    }
    const record = parseRecord(raw, name);
    if (record) records.push(record);
    else unowned.push(name);
  }
  return { records, unowned };
}

/** What backs a new snapshot: its own directories, or a committed chainID snapshot of the store. */
export interface NewRecordDirs {
  /** Make `fs` (and, for an active snapshot, `work`). */
  readonly ownDirs: boolean;
  /** Owner to give `fs` (containerd gives it its parent's), when known. */
  readonly owner?: { readonly uid: number; readonly gid: number };
}

/** A fresh id for a snapshot directory. */
export function newRecordId(): string {
  return randomId();
}

/**
 * Makes a snapshot's directory whole in a `.new-*` directory (dirs, record.json, fsynced), then
 * renames it into place: it is either absent or complete.
 */
export async function createRecordDir(dir: string, record: RecordFile, how: NewRecordDirs): Promise<void> {
  const tmp = join(dir, `${NEW_PREFIX}${randomId()}`);
  try {
    await fsp.mkdir(tmp, { recursive: true, mode: 0o700 });
    if (how.ownDirs) {
      const fs = join(tmp, 'fs');
      await fsp.mkdir(fs, { mode: 0o755 });
      // The root of a snapshot is the container's root: 0755 whatever the umask says.
      await fsp.chmod(fs, 0o755);
      if (how.owner) await fsp.lchown(fs, how.owner.uid, how.owner.gid);
      if (record.kind === 'active') {
        await fsp.mkdir(join(tmp, 'work'), { mode: 0o711 });
        await fsp.chmod(join(tmp, 'work'), 0o711);
      }
    }
    await writeFileAtomic(join(tmp, RECORD_FILE), JSON.stringify(record));
    await fsp.rename(tmp, join(dir, record.id));
    await syncDir(dir);
  } catch (e) {
    await fsp.rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    throw fromFsError(e, `creating snapshot ${JSON.stringify(record.name)}`);
  }
}

/** Replaces a snapshot's record atomically (commit, label updates, measured usage). */
export async function writeRecord(dir: string, record: RecordFile): Promise<void> {
  try {
    await writeFileAtomic(join(dir, record.id, RECORD_FILE), JSON.stringify(record));
  } catch (e) {
    throw fromFsError(e, `writing the record of snapshot ${JSON.stringify(record.name)}`);
  }
}

/**
 * Takes a snapshot's directory out of the records in one step (a rename to `.trash-*`), then
 * deletes its files. A crash before the deletion finishes leaves litter that open() sweeps.
 */
export async function removeRecordDir(dir: string, id: string): Promise<void> {
  const trash = join(dir, `${TRASH_PREFIX}${id}`);
  try {
    await fsp.rename(join(dir, id), trash);
    await syncDir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw fromFsError(e, `removing snapshot directory ${id}`);
  }
  await fsp.rm(trash, { recursive: true, force: true }).catch(() => undefined);
}

/**
 * Removes what crashes leave: half-made (`.new-*`) and half-deleted (`.trash-*`) snapshot
 * directories, and temporary files of interrupted record writes. Only the records' one writer
 * (the holder of the lock) may call it. Returns how many entries went.
 */
export async function sweepRecordLitter(dir: string, records: readonly RecordFile[]): Promise<number> {
  let removed = 0;
  for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
    if (name.startsWith(NEW_PREFIX) || name.startsWith(TRASH_PREFIX)) {
      await fsp.rm(join(dir, name), { recursive: true, force: true });
      removed++;
    }
  }
  for (const r of records) {
    for (const name of await fsp.readdir(join(dir, r.id)).catch(() => [] as string[])) {
      if (name.startsWith(TEMP_PREFIX)) {
        await fsp.rm(join(dir, r.id, name), { force: true });
        removed++;
      }
    }
  }
  return removed;
}

/**
 * The chainIDs of the store's committed snapshots that containerd records borrow, read from disk
 * (any process may call it; garbage collection does, under the collection lock).
 */
export async function recordedChainIDs(root: string): Promise<Set<Digest>> {
  const { records } = await readRecords(recordsDir(root));
  const out = new Set<Digest>();
  for (const r of records) if (r.chainID !== undefined) out.add(r.chainID);
  return out;
}

/**
 * Checks a label set as containerd does (each key and value together at most
 * {@link MAX_LABEL_SIZE} bytes), and all of them together at most {@link MAX_LABELS_SIZE}.
 */
export function checkLabels(labels: Readonly<Record<string, string>>, what: string): void {
  let total = 0;
  for (const [k, v] of Object.entries(labels)) {
    if (typeof v !== 'string') throw new FastpullError('INVALID_ARGUMENT', `${what}: label ${JSON.stringify(k)} is not a string`);
    const size = Buffer.byteLength(k) + Buffer.byteLength(v);
    if (k === '' || size > MAX_LABEL_SIZE) {
      throw new FastpullError(
        'INVALID_ARGUMENT',
        `${what}: label ${JSON.stringify(k.slice(0, 64))} ${k === '' ? 'has an empty key' : `is ${size} bytes, over ${MAX_LABEL_SIZE}`}`,
      );
    }
    total += size;
  }
  if (total > MAX_LABELS_SIZE) throw new FastpullError('INVALID_ARGUMENT', `${what}: labels of ${total} bytes in all, over ${MAX_LABELS_SIZE}`);
}

/** containerd's limit on one label, key and value together. */
export const MAX_LABEL_SIZE = 4096;

/**
 * The most all labels of one snapshot may hold, keys and values together. containerd bounds only
 * each label; this keeps a snapshot's info far below the 16 MiB containerd takes in one message
 * (its snapshot collection reads them all through List), and above the few labels containerd and
 * remote snapshotters set.
 */
export const MAX_LABELS_SIZE = 64 * 1024;

/**
 * The longest snapshot key or name, in bytes: containerd keeps its snapshot keys as keys of its
 * bolt database, which takes none longer.
 */
export const MAX_KEY_SIZE = 32 * 1024;

/** Throws INVALID_ARGUMENT for an empty key or name, or one over {@link MAX_KEY_SIZE} bytes. */
export function checkKey(key: string, what: string): void {
  if (key === '') throw new FastpullError('INVALID_ARGUMENT', `${what}: the snapshot key is empty`);
  const size = Buffer.byteLength(key);
  if (size > MAX_KEY_SIZE)
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `${what}: a snapshot key of ${size} bytes, over ${MAX_KEY_SIZE} (it starts ${JSON.stringify(key.slice(0, 64))})`,
    );
}

/**
 * A label set with no prototype: a client's label may be named `__proto__`, `constructor` or
 * `toString`, and each must read and write as any other name.
 */
export function labelSet(from: Readonly<Record<string, string>> = {}): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(from)) out[k] = v;
  return out;
}

/** Labels without empty values (containerd stores none: an empty value deletes the label). */
export function cleanLabels(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const out = labelSet();
  for (const [k, v] of Object.entries(labels ?? {})) if (v !== '') out[k] = v;
  return out;
}
