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

/** Writes `data` to `path` atomically: temp file in the same dir, fsync, rename, fsync dir. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const dir = dirname(path);
  await fsp.mkdir(dir, { recursive: true });
  const tmp = join(dir, `.tmp-${randomBytes(6).toString('hex')}`);
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
