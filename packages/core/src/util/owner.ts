// Ownership of work-in-progress directories (ingests, active snapshots) across processes: the
// writer holds an flock on `<dir>/owner` for as long as it works there; the kernel releases it when
// the writer exits, kill -9 included. A directory whose lock can be taken has no live writer: it
// is litter from a crash, and any process may remove it.
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, promises as fsp, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { nativeFs } from '../native/addon.js';

const OWNER_FILE = 'owner';
/** A directory without an owner file is younger than this only if its writer is still creating it. */
const UNCLAIMED_GRACE_MS = 60_000;

/**
 * Claims a fresh directory for this process; returns the release (call it once the work is done).
 * The owner file is locked under a name of its own and only then renamed to `owner`: a sweeper in
 * another process that opened `owner` between its creation and its lock would have found it free,
 * taken the directory for litter and removed it (a pull then failed with "cannot lock").
 */
export function claimDir(dir: string): () => void {
  const pending = join(dir, `${OWNER_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`);
  const fd = openSync(pending, 'wx', 0o600);
  try {
    if (!nativeFs().tryLock(fd, true)) throw new Error(`cannot lock ${pending}`);
    // The lock belongs to the open file, not the name: it holds across the rename.
    renameSync(pending, join(dir, OWNER_FILE));
  } catch (e) {
    closeSync(fd);
    rmSync(pending, { force: true });
    throw e;
  }
  let open = true;
  return () => {
    if (!open) return;
    open = false;
    closeSync(fd);
  };
}

/**
 * Takes over a directory whose owner died: returns the release when its owner lock was free (and is
 * now ours), undefined when a live process holds it or it has no owner file.
 */
export function tryClaimDir(dir: string): (() => void) | undefined {
  let fd: number;
  try {
    fd = openSync(join(dir, OWNER_FILE), 'r');
  } catch {
    return undefined;
  }
  if (!nativeFs().tryLock(fd, true)) {
    closeSync(fd);
    return undefined;
  }
  let open = true;
  return () => {
    if (!open) return;
    open = false;
    closeSync(fd);
  };
}

/** Removes the owner file of a claimed directory (before it is renamed into its final place). */
export async function disownDir(dir: string): Promise<void> {
  await fsp.rm(join(dir, OWNER_FILE), { force: true });
}

/** Options of {@link sweepDeadDirs}. */
export interface SweepOptions {
  /** Name what would be removed, remove nothing. */
  readonly dryRun?: boolean;
  /**
   * Asked, while its owner lock is held, of a dead directory younger than `olderThanMs`: true
   * removes it at once all the same (what it was kept for is no longer needed).
   */
  readonly unneeded?: (dir: string) => Promise<boolean>;
}

/**
 * Removes the subdirectories of `parent` that no live process owns and that nobody touched for
 * `olderThanMs` (0: at once), or that `options.unneeded` says are no use. Returns their names. Safe
 * to run while other processes work in `parent`: a directory is removed only while this process
 * holds its owner lock, or when it never got an owner file and is older than a minute.
 */
export async function sweepDeadDirs(parent: string, olderThanMs = 0, options: SweepOptions = {}): Promise<string[]> {
  let names: string[];
  try {
    names = await fsp.readdir(parent);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const dir = join(parent, name);
    let fd: number | undefined;
    try {
      fd = openSync(join(dir, OWNER_FILE), 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') continue;
      const st = await fsp.stat(dir).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > UNCLAIMED_GRACE_MS) {
        if (!options.dryRun) await fsp.rm(dir, { recursive: true, force: true });
        removed.push(name);
      }
      continue;
    }
    try {
      if (!nativeFs().tryLock(fd, true)) continue;
      if (olderThanMs > 0) {
        // Kept for resuming until it has sat unused this long (by its last write).
        const st = await fsp.stat(dir).catch(() => undefined);
        const data = await fsp.stat(join(dir, 'data')).catch(() => undefined);
        const last = Math.max(st?.mtimeMs ?? 0, data?.mtimeMs ?? 0);
        if (Date.now() - last < olderThanMs && !(await options.unneeded?.(dir))) continue;
      }
      if (!options.dryRun) await fsp.rm(dir, { recursive: true, force: true });
      removed.push(name);
    } finally {
      closeSync(fd);
    }
  }
  return removed;
}
