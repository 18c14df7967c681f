// Making a snapshot durable before it is committed: after a power cut a committed snapshot must hold
// every byte and attribute it was verified with, for nothing checks it again. Before the commit's
// rename, one syncfs(2) of the store's filesystem writes what is dirty and flushes the device's
// cache. The extractor has started the write-back as it wrote (unpack/apply/writeback.ts: large files in
// steps, and a syncfs not waited for after each 8 MiB the layer writes), so that the device works
// while extraction goes on and the final syncfs finds little left. Without the native addon's
// calls, every file and directory of the snapshot is fsynced instead: correct, and slower.
// bench/src/sync-before-commit.ts measured the ways (bench/README.md has the figures).
import { closeSync, constants, openSync, promises as fsp } from 'node:fs';
import { nativeSync } from '../native/addon.js';
import type { SyncMethod } from '../tuning.js';

/**
 * What the extractor starts (unpack/apply/writeback.ts), as an unpack option. `background` (the only mode;
 * the option is absent when nothing is to be started): sync_file_range of each 8 MiB step of a large
 * file, and a syncfs of the filesystem, not waited for, each time the layer has written another 8 MiB
 * (at most one at a time), which writes trees of small files in bulk while extraction goes on.
 */
export type WritebackMode = 'background';

/**
 * How a snapshot is flushed. `syncfs` (the default): write-back started while extracting, then one
 * syncfs. `fsync`: an fsync of every file and directory (what runs where the native addon cannot
 * load). The benchmark and the durability test ask for `fsync` (Tuning.syncMethod) to run the
 * fallback with the addon loaded; nothing else should.
 */
export type { SyncMethod };

/** `asked` (the pull's Tuning.syncMethod), else `syncfs`; without the addon, `fsync`. */
export function syncMethod(asked?: SyncMethod): SyncMethod {
  return nativeSync() === undefined ? 'fsync' : (asked ?? 'syncfs');
}

/** The extractor's part of `method`: the write-back it starts, as an unpack option. */
export function writebackFor(method: SyncMethod): { writeback?: WritebackMode } {
  return method === 'syncfs' ? { writeback: 'background' } : {};
}

/**
 * An fd of the directory `dir` for {@link flushTree} to flush through, opened before anything is
 * written under it; undefined where the flush opens nothing (the fsync fallback). A write-back error
 * is reported once per open file: a syncfs through a file opened later would miss one that a syncfs
 * started while extracting (or another process's) has already seen. Close it with {@link closeForFlush}.
 */
export function openForFlush(dir: string, method: SyncMethod = syncMethod()): number | undefined {
  return method === 'syncfs' ? openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW) : undefined;
}

export function closeForFlush(fd: number | undefined): void {
  if (fd !== undefined) closeSync(fd);
}

/**
 * Returns once everything under `dir` (data, inodes, directory entries) is on stable storage.
 * `opened`: an fd of `dir` from {@link openForFlush}, so that the flush also reports write-back
 * errors since it was opened. Rejects with the errno error of the flush (EIO when write-back failed).
 */
export async function flushTree(dir: string, method: SyncMethod = syncMethod(), opened?: number): Promise<void> {
  const native = nativeSync();
  if (native !== undefined && method !== 'fsync') return native.syncfs(opened ?? dir);
  await fsyncTree(Buffer.from(dir));
}

/** fsyncs in flight at once: the kernel merges their journal commits, and the disk queue stays fed. */
const FSYNC_CONCURRENCY = 16;

/**
 * fsync(2) of every regular file and directory under `root` and of `root`, children before their
 * directory. Symlinks, devices and fifos cannot be opened to fsync: their inodes and names are made
 * durable by the fsync of the directory holding them. Paths stay bytes (names need not be UTF-8).
 */
async function fsyncTree(root: Buffer): Promise<void> {
  const files: Buffer[] = [];
  const dirs: Buffer[] = [];
  const walk = async (dir: Buffer): Promise<void> => {
    for (const entry of await fsp.readdir(dir, { withFileTypes: true, encoding: 'buffer' })) {
      const path = Buffer.concat([dir, SLASH, entry.name]);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) files.push(path);
    }
    dirs.push(dir);
  };
  await walk(root);
  await fsyncAll(files);
  await fsyncAll(dirs);
}

const SLASH = Buffer.from('/');

async function fsyncAll(paths: readonly Buffer[]): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < paths.length) {
      const fh = await fsp.open(paths[next++]!, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FSYNC_CONCURRENCY, paths.length) }, lane));
}
