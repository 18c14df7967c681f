// containerd's snapshots over fastpull's store, with containerd's semantics (its Snapshotter
// interface and overlay snapshotter): active, view and committed snapshots by key or name, parents,
// labels, mounts, usage. Each snapshot is backed by directories of its own or, for a committed one,
// by one of the store's committed chainID snapshots (a layer fastpull pulled: no copy). Records
// live on disk (record-file.ts) and in memory; one process at a time serves them (a lock file).
import { closeSync, fstatSync, openSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, fromFsError } from '../../errors.js';
import type { Digest } from '../../oci/digest.js';
import { nativeFs } from '../../native/addon.js';
import { withCollectionLock } from '../../util/collection-lock.js';
import {
  checkKey,
  checkLabels,
  cleanLabels,
  createRecordDir,
  labelSet,
  LOCK_FILE,
  newRecordId,
  readRecords,
  recordsDir,
  removeRecordDir,
  snapshotTime,
  sweepRecordLitter,
  writeRecord,
  type RecordFile,
  type SnapshotKind,
} from './record-file.js';
import { parseSnapshotFilters } from './filters.js';
import { overlayIndexOff } from './mounts.js';
import type { Mount, Snapshotter } from '../store.js';
import { RecordTrees } from './trees.js';
import { treeUsage, type SnapshotUsage } from '../usage.js';
import { FlushHandles } from './flush.js';

/** What containerd sees of a snapshot (its `snapshots.Info`). */
export interface SnapshotRecordInfo {
  /** Key (active, view) or name (committed). */
  readonly name: string;
  /** Name of the committed snapshot below; absent for a bottom one. */
  readonly parent?: string;
  /** Active (being written), view (read-only) or committed (immutable, may be a parent). */
  readonly kind: SnapshotKind;
  /** Labels; none has an empty value. */
  readonly labels: Readonly<Record<string, string>>;
  /** When it was made (RFC 3339, nanoseconds). */
  readonly created: string;
  /** When its labels last changed, or `created`. */
  readonly updated: string;
}

/** The parts of a store the records use: its root and its committed chainID snapshots. */
export interface RecordsStore {
  /** The store root; records live under `<root>/snapshots/containerd`. */
  readonly root: string;
  /** The store's chainID snapshots, which committed records may borrow. */
  readonly snapshots: Snapshotter;
}

/** Options of {@link SnapshotRecords.open}. */
export interface SnapshotRecordsOptions {
  /** Put `index=off` on overlay mounts; default: when the kernel has the overlay index feature (as containerd). */
  readonly indexOff?: boolean;
}

/**
 * The containerd snapshots of a store, under `<root>/snapshots/containerd`. Errors carry the codes
 * containerd's gRPC mapping expects: NOT_FOUND (no such key, or parent), ALREADY_EXISTS (key or name
 * taken), FAILED_PRECONDITION (mounts of a committed snapshot, commit of one not active, remove of
 * one with children), INVALID_ARGUMENT (a parent that is not committed, a bad label, an immutable
 * field in an update). Only one process may hold them open (FAILED_PRECONDITION otherwise).
 * @example
 * const records = await SnapshotRecords.open(openStore(root));
 * const mounts = await records.prepare('extract-1', undefined, {}); // a rw bind of a fresh dir
 * // ... apply a layer into the mounts ...
 * await records.commit('layer-1', 'extract-1', {});
 * await records.prepare('container-1', 'layer-1', {}); // an overlay over layer-1
 */
export class SnapshotRecords {
  /** `<root>/snapshots/containerd`. */
  readonly dir: string;
  private readonly byName = new Map<string, RecordFile>();
  private queue: Promise<unknown> = Promise.resolve();
  private lockFd: number | undefined;
  /** Active snapshots' directories, opened at Prepare for the flush at Commit. */
  private readonly flushes = new FlushHandles();

  private readonly trees: RecordTrees;

  private constructor(
    private readonly store: RecordsStore,
    indexOff: boolean,
  ) {
    this.dir = recordsDir(store.root);
    this.trees = new RecordTrees(this.dir, store.snapshots, this.byName, indexOff);
  }

  /**
   * Opens the records of `store`: takes the lock, sweeps what a crash left half made or half
   * deleted, loads every record.
   */
  static async open(store: RecordsStore, options: SnapshotRecordsOptions = {}): Promise<SnapshotRecords> {
    const r = new SnapshotRecords(store, options.indexOff ?? overlayIndexOff());
    try {
      await fsp.mkdir(r.dir, { recursive: true, mode: 0o700 });
      r.lockFd = openSync(join(r.dir, LOCK_FILE), 'a', 0o600);
    } catch (e) {
      throw fromFsError(e, `opening the snapshot records in ${r.dir}`);
    }
    if (!nativeFs().tryLock(r.lockFd, true)) {
      r.close();
      throw new FastpullError('FAILED_PRECONDITION', `another process serves the containerd snapshots of ${store.root}`);
    }
    try {
      const { records } = await readRecords(r.dir);
      await sweepRecordLitter(r.dir, records);
      for (const rec of records) r.byName.set(rec.name, rec);
      // containerd asks again for the mounts of snapshots made before a restart (a task started
      // later). Links that cannot be made leave those mounts naming full paths: no reason to
      // refuse every other snapshot.
      for (const rec of records) if (rec.kind !== 'committed') await r.trees.linkParents(rec).catch(() => undefined);
    } catch (e) {
      r.close();
      throw e;
    }
    return r;
  }

  /** Lets go of the lock; the records stay on disk for the next open. */
  close(): void {
    this.flushes.releaseAll();
    if (this.lockFd === undefined) return;
    closeSync(this.lockFd);
    this.lockFd = undefined;
  }

  /**
   * Resolves when the records can still be answered from disk: they are held open, their directory
   * reads, and its lock file is the one this process holds (a directory renamed, removed or mounted
   * over leaves the records in memory naming paths nobody can reach). Rejects with why not.
   */
  async check(): Promise<void> {
    if (this.lockFd === undefined) throw new FastpullError('FAILED_PRECONDITION', `the snapshot records in ${this.dir} are closed`);
    try {
      await fsp.readdir(this.dir);
      const held = fstatSync(this.lockFd);
      const onDisk = await fsp.stat(join(this.dir, LOCK_FILE));
      if (held.ino !== onDisk.ino || held.dev !== onDisk.dev)
        throw new FastpullError('FAILED_PRECONDITION', `the snapshot records in ${this.dir} were replaced: their lock file is not the one this process holds`);
    } catch (e) {
      throw fromFsError(e, `reading the snapshot records in ${this.dir}`);
    }
  }

  /** Runs mutations one at a time: containerd's checks (key free, no children) hold until each is done. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private get(key: string): RecordFile {
    const rec = this.byName.get(key);
    if (!rec) throw new FastpullError('NOT_FOUND', `snapshot ${JSON.stringify(key)} does not exist`);
    return rec;
  }

  /** The info of a snapshot by key or name; NOT_FOUND when there is none. */
  stat(key: string): SnapshotRecordInfo {
    return toInfo(this.get(key));
  }

  /** The snapshots that match any of `filters` (containerd's syntax; none: all), by name. */
  list(filters: readonly string[] = []): SnapshotRecordInfo[] {
    const f = parseSnapshotFilters(filters);
    return [...this.byName.values()]
      .filter((r) => f.match(r))
      .map(toInfo)
      .sort(byName);
  }

  /**
   * As {@link list}, for a client's filters: it gives the event loop back every few snapshots, so
   * that one List over many long keys never holds up the calls of others; stops when `signal` aborts.
   */
  async listYielding(filters: readonly string[], signal?: AbortSignal): Promise<SnapshotRecordInfo[]> {
    const f = parseSnapshotFilters(filters);
    const out: SnapshotRecordInfo[] = [];
    let n = 0;
    for (const r of [...this.byName.values()]) {
      if (++n % MATCHES_PER_TURN === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        signal?.throwIfAborted();
      }
      if (f.match(r)) out.push(toInfo(r));
    }
    return out.sort(byName);
  }

  /** Names of the snapshots whose parent is `name`. */
  children(name: string): string[] {
    return [...this.byName.values()].filter((r) => r.parent === name).map((r) => r.name);
  }

  /** A new active snapshot over `parent` (a committed name, or none); returns its mounts. */
  prepare(key: string, parent: string | undefined, labels: Readonly<Record<string, string>> = {}): Promise<Mount[]> {
    return this.create('active', key, parent, labels);
  }

  /** A new read-only view of `parent`; returns its mounts. */
  view(key: string, parent: string | undefined, labels: Readonly<Record<string, string>> = {}): Promise<Mount[]> {
    return this.create('view', key, parent, labels);
  }

  private create(kind: 'active' | 'view', key: string, parent: string | undefined, labels: Readonly<Record<string, string>>): Promise<Mount[]> {
    return this.exclusive(async () => {
      checkKey(key, kind === 'active' ? 'prepare' : 'view');
      checkLabels(labels, `snapshot ${JSON.stringify(key)}`);
      const parentRec = parent ? this.checkParent(parent) : undefined;
      if (this.byName.has(key)) throw new FastpullError('ALREADY_EXISTS', `snapshot ${JSON.stringify(key)} already exists`);
      let owner: { uid: number; gid: number } | undefined;
      if (parentRec) {
        // As containerd: the new tree's root takes the owner of the parent's.
        const st = await fsp.stat(this.trees.fsOf(parentRec)).catch(() => undefined);
        if (st) owner = { uid: st.uid, gid: st.gid };
      }
      const now = snapshotTime();
      const rec: RecordFile = {
        version: 1,
        id: newRecordId(),
        kind,
        name: key,
        ...(parentRec ? { parent: parentRec.name } : {}),
        labels: cleanLabels(labels),
        created: now,
        updated: now,
      };
      await this.trees.linkParents(rec);
      await createRecordDir(this.dir, rec, { ownDirs: true, ...(owner ? { owner } : {}) });
      // Before containerd is told where to write.
      if (kind === 'active' && this.store.snapshots.sync) this.flushes.open(rec.id, join(this.dir, rec.id));
      this.byName.set(key, rec);
      return this.trees.mountsFor(rec);
    });
  }

  private checkParent(parent: string): RecordFile {
    const rec = this.byName.get(parent);
    if (!rec) throw new FastpullError('NOT_FOUND', `parent snapshot ${JSON.stringify(parent)} does not exist`);
    if (rec.kind !== 'committed') throw new FastpullError('INVALID_ARGUMENT', `parent ${JSON.stringify(parent)} is not a committed snapshot`);
    return rec;
  }

  /** The mounts of an active snapshot or view (FAILED_PRECONDITION for a committed one). */
  mounts(key: string): Mount[] {
    const rec = this.get(key);
    if (rec.kind === 'committed')
      throw new FastpullError('FAILED_PRECONDITION', `snapshot ${JSON.stringify(key)} is committed: only active snapshots and views have mounts`);
    return this.trees.mountsFor(rec);
  }

  /**
   * Commits the active snapshot `key` as `name`, with `labels` (its own are not kept, as in
   * containerd). One atomic record write; its directory stays where it is.
   */
  commit(name: string, key: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    return this.exclusive(async () => {
      checkKey(name, `commit of ${JSON.stringify(key.slice(0, 64))}`);
      checkLabels(labels, `snapshot ${JSON.stringify(name)}`);
      if (this.byName.has(name)) throw new FastpullError('ALREADY_EXISTS', `committed snapshot ${JSON.stringify(name)} already exists`);
      const rec = this.get(key);
      if (rec.kind !== 'active')
        throw new FastpullError('FAILED_PRECONDITION', `snapshot ${JSON.stringify(key)} is not active (it is ${rec.kind === 'view' ? 'a view' : 'committed'})`);
      const now = snapshotTime();
      const committed: RecordFile = { ...rec, kind: 'committed', name, labels: cleanLabels(labels), created: now, updated: now };
      // Committed means durable, as for the store's own snapshots: what was written into it first.
      if (this.store.snapshots.sync) await this.flushes.flush(rec.id, join(this.dir, rec.id));
      await writeRecord(this.dir, committed);
      this.flushes.release(rec.id);
      this.byName.delete(key);
      this.byName.set(name, committed);
    });
  }

  /**
   * Records a committed snapshot named `name` that borrows the store's committed snapshot of
   * `chainID` (no copy), over `parent`. The store's snapshot stays the store's: removing this
   * record never deletes it, and garbage collection keeps it while the record exists. Throws
   * NOT_FOUND when the chainID snapshot is not committed or the parent does not exist.
   */
  commitChain(name: string, parent: string | undefined, chainID: Digest, labels: Readonly<Record<string, string>> = {}): Promise<SnapshotRecordInfo> {
    return this.exclusive(async () => {
      checkLabels(labels, `snapshot ${JSON.stringify(name)}`);
      checkKey(name, `recording ${chainID}`);
      if (this.byName.has(name)) throw new FastpullError('ALREADY_EXISTS', `snapshot ${JSON.stringify(name)} already exists`);
      const parentRec = parent ? this.checkParent(parent) : undefined;
      const now = snapshotTime();
      const rec: RecordFile = {
        version: 1,
        id: newRecordId(),
        kind: 'committed',
        name,
        ...(parentRec ? { parent: parentRec.name } : {}),
        labels: cleanLabels(labels),
        created: now,
        updated: now,
        chainID,
      };
      // Under the collection lock: a collection either sees this record, or ran before it and then
      // the check below sees what it left.
      await withCollectionLock(this.store.root, 'shared', async () => {
        if (!(await this.store.snapshots.isCommitted(chainID)))
          throw new FastpullError('NOT_FOUND', `snapshot ${chainID} is not committed in ${this.store.root}`);
        await createRecordDir(this.dir, rec, { ownDirs: false });
      });
      this.byName.set(name, rec);
      return toInfo(rec);
    });
  }

  /**
   * Removes a snapshot and its own directories (FAILED_PRECONDITION while it has children). A
   * snapshot that borrows a chainID snapshot only loses its record.
   */
  remove(key: string): Promise<void> {
    return this.exclusive(async () => {
      const rec = this.get(key);
      const children = this.children(key);
      if (children.length > 0) {
        throw new FastpullError(
          'FAILED_PRECONDITION',
          `cannot remove snapshot ${JSON.stringify(key)}: it has ${children.length} child snapshot(s), e.g. ${JSON.stringify(children[0])}`,
        );
      }
      await removeRecordDir(this.dir, rec.id);
      this.flushes.release(rec.id);
      this.byName.delete(key);
    });
  }

  /**
   * Updates the labels of a snapshot, as containerd does: with no `paths`, or `labels`, the labels
   * become `info.labels`; `labels.<key>` sets (or, absent or empty in `info.labels`, deletes) that one
   * label. Any other path is INVALID_ARGUMENT (name, parent, kind and times are immutable).
   */
  update(info: { readonly name: string; readonly labels?: Readonly<Record<string, string>> }, paths: readonly string[] = []): Promise<SnapshotRecordInfo> {
    return this.exclusive(async () => {
      const rec = this.get(info.name);
      const given = labelSet(info.labels);
      let labels = labelSet(rec.labels);
      if (paths.length === 0) labels = labelSet(given);
      for (const path of paths) {
        if (path.startsWith('labels.')) {
          const key = path.slice('labels.'.length);
          if (Object.hasOwn(given, key)) labels[key] = given[key]!;
          else delete labels[key];
        } else if (path === 'labels') labels = labelSet(given);
        else
          throw new FastpullError(
            'INVALID_ARGUMENT',
            `cannot update field ${JSON.stringify(path)} of snapshot ${JSON.stringify(info.name)}: only labels change`,
          );
      }
      labels = cleanLabels(labels);
      checkLabels(labels, `snapshot ${JSON.stringify(info.name)}`);
      const updated: RecordFile = { ...rec, labels, updated: snapshotTime() };
      await writeRecord(this.dir, updated);
      this.byName.set(info.name, updated);
      return toInfo(updated);
    });
  }

  /**
   * The disk usage of a snapshot's own files: measured now for an active one, nothing for a view
   * (its tree is its parent's), measured once and kept for a committed one.
   */
  async usage(key: string): Promise<SnapshotUsage> {
    const rec = this.get(key);
    if (rec.kind === 'view') return { size: 0, inodes: 0 };
    if (rec.kind === 'active') return measure(this.trees.fsOf(rec));
    if (rec.usage) return rec.usage;
    const usage = await measure(this.trees.fsOf(rec));
    // Kept so that kubelet's polling (every snapshot, every few seconds) costs nothing next time.
    await this.exclusive(async () => {
      const now = this.byName.get(key);
      if (now?.id !== rec.id || now.kind !== 'committed') return;
      const measured: RecordFile = { ...now, usage };
      await writeRecord(this.dir, measured).catch(() => undefined);
      this.byName.set(key, measured);
    });
    return usage;
  }

  /**
   * Removes the entries of `<root>/snapshots/containerd` that no record owns (directories of
   * snapshots whose record is gone or unreadable, and crash litter). Returns their names.
   */
  cleanup(): Promise<string[]> {
    return this.exclusive(async () => {
      const { unowned } = await readRecords(this.dir);
      const owned = new Set([...this.byName.values()].map((r) => r.id));
      const removed: string[] = [];
      for (const name of unowned) {
        if (owned.has(name)) continue;
        await fsp.rm(join(this.dir, name), { recursive: true, force: true });
        removed.push(name);
      }
      return removed;
    });
  }

  /** The directory that backs a snapshot's tree (its own fs, or the borrowed chainID snapshot's). */
  treeOf(key: string): string {
    return this.trees.fsOf(this.get(key));
  }

  /** The chainID snapshot a committed record borrows, if it borrows one. */
  chainOf(key: string): Digest | undefined {
    return this.get(key).chainID;
  }
}

/** Snapshots matched between two turns of the event loop in {@link SnapshotRecords.listYielding}. */
const MATCHES_PER_TURN = 64;

const byName = (a: SnapshotRecordInfo, b: SnapshotRecordInfo): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function toInfo(r: RecordFile): SnapshotRecordInfo {
  return {
    name: r.name,
    ...(r.parent !== undefined ? { parent: r.parent } : {}),
    kind: r.kind,
    labels: labelSet(r.labels),
    created: r.created,
    updated: r.updated,
  };
}

/** A tree's usage, failures named by the tree (the caller knows it exists). */
async function measure(dir: string): Promise<SnapshotUsage> {
  try {
    return await treeUsage(dir);
  } catch (e) {
    throw fromFsError(e, `measuring ${dir}`);
  }
}
