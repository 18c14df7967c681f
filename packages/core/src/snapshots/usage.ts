// Disk usage of one directory tree as containerd counts it for a snapshot: the blocks of each
// distinct inode (hard links once) and how many inodes there are, the root included.
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fromFsError } from '../errors.js';
import type { SnapshotUsage } from './record-file.js';

/**
 * Measures the tree at `dir` without following symlinks. Throws INTERNAL naming the path that
 * failed (the caller knows the tree exists).
 * @example
 * const { size, inodes } = await diskUsage('/var/lib/fastpull/snapshots/containerd/x/fs');
 */
export async function diskUsage(dir: string): Promise<SnapshotUsage> {
  const seen = new Set<string>();
  let size = 0;
  const count = (st: { dev: bigint; ino: bigint; blocks: bigint }): boolean => {
    const key = `${st.dev}:${st.ino}`;
    if (seen.has(key)) return false;
    seen.add(key);
    size += Number(st.blocks) * 512;
    return true;
  };
  const walk = async (path: string): Promise<void> => {
    for (const entry of await fsp.readdir(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      const st = await fsp.lstat(child, { bigint: true });
      if (count(st) && entry.isDirectory()) await walk(child);
    }
  };
  try {
    count(await fsp.lstat(dir, { bigint: true }));
    await walk(dir);
  } catch (e) {
    throw fromFsError(e, `measuring ${dir}`);
  }
  return { size, inodes: seen.size };
}
