// Small filesystem helpers for crash-safe updates: atomic file replacement and directory fsync.
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';

/** fsyncs a directory so that a rename or create inside it survives a crash. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Prefix of the temporary names that writeFileAtomic and the snapshot store's short links are
 * renamed from: never a digest, an image record or a link in use.
 */
export const TEMP_PREFIX = '.tmp-';

/** Writes `data` to `path` atomically: temp file in the same dir, fsync, rename, fsync dir. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const dir = dirname(path);
  await fsp.mkdir(dir, { recursive: true });
  const tmp = join(dir, `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`);
  const fh = await fsp.open(tmp, 'wx', 0o644);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (e) {
    // A write that failed (ENOSPC) leaves no partial temp file holding space.
    await fh.close().catch(() => undefined);
    await fsp.rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  try {
    await fsp.rename(tmp, path);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
  await syncDir(dir);
}

/** A short random id for ingests and active snapshots. */
export function randomId(): string {
  return `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}

/**
 * Removes from `dir` the temporary files (TEMP_PREFIX) last changed more than `olderThanMs` ago: a
 * writer renames its own within moments, so these are what writers killed between creating and
 * renaming left. Returns the names of those that went (with `dryRun`, that would go; none is removed).
 */
export async function sweepTempFiles(dir: string, olderThanMs: number, dryRun = false): Promise<string[]> {
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    const path = join(dir, name);
    const st = await fsp.lstat(path).catch(() => undefined);
    if (!st || st.isDirectory() || Date.now() - st.mtimeMs < olderThanMs) continue;
    if (!dryRun) await fsp.rm(path, { force: true });
    removed.push(name);
  }
  return removed;
}
