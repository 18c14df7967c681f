// What a committed snapshot takes on disk, and the stack of snapshots below one.
import { promises as fsp } from 'node:fs';
import { FastpullError } from '../errors.js';
import type { Digest } from '../oci/digest.js';
import type { Snapshotter } from './store.js';

/** Disk usage of a snapshot's tree: allocated bytes and inodes, each hard-linked inode once. */
export interface SnapshotUsage {
  /** Bytes allocated on disk. */
  readonly size: number;
  /** Inodes (files, directories, links), each hard-linked one once. */
  readonly inodes: number;
}

/**
 * Walks a committed snapshot's tree and adds up what it allocates. Throws NOT_FOUND when `chainID` is
 * not committed, INTERNAL when the tree cannot be read.
 * @example
 * const { size, inodes } = await snapshotUsage(openStore(root).snapshots, chainID);
 */
export async function snapshotUsage(snapshots: Snapshotter, chainID: Digest): Promise<SnapshotUsage> {
  if (!(await snapshots.isCommitted(chainID))) throw new FastpullError('NOT_FOUND', `snapshot ${chainID} is not committed`);
  try {
    return await treeUsage(snapshots.fsPath(chainID));
  } catch (e) {
    throw new FastpullError('INTERNAL', `measuring snapshot ${chainID}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Allocated bytes and inodes under `root` (itself included), each inode counted once.
 * @example
 * const { size } = await treeUsage('/var/lib/fastpull/mounts/1234/upper');
 */
export async function treeUsage(root: string): Promise<SnapshotUsage> {
  let size = 0;
  let inodes = 0;
  const seen = new Set<string>();
  const count = (st: { dev: bigint; ino: bigint; blocks: bigint }): boolean => {
    const id = `${st.dev}:${st.ino}`;
    if (seen.has(id)) return false;
    seen.add(id);
    inodes++;
    size += Number(st.blocks) * 512;
    return true;
  };
  count(await fsp.lstat(root, { bigint: true }));
  // Iterative: a deep tree must not grow the stack.
  const dirs = [root];
  for (let dir = dirs.pop(); dir !== undefined; dir = dirs.pop()) {
    for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (count(await fsp.lstat(path, { bigint: true })) && entry.isDirectory()) dirs.push(path);
    }
  }
  return { size, inodes };
}

/**
 * The stack of committed snapshots from the bottom up to `top`, found through their parents. Throws
 * NOT_FOUND when `top` or a parent is not committed, INTERNAL when the parents form a loop.
 * @example
 * const mounts = await snapshots.mounts(await snapshotChain(snapshots, top));
 */
export async function snapshotChain(snapshots: Snapshotter, top: Digest): Promise<Digest[]> {
  const chain: Digest[] = [];
  const seen = new Set<Digest>();
  for (let id: Digest | undefined = top; id !== undefined;) {
    if (seen.has(id)) throw new FastpullError('INTERNAL', `snapshot ${top}: its parents form a loop at ${id}`);
    seen.add(id);
    const info = await snapshots.info(id);
    if (!info) throw new FastpullError('NOT_FOUND', id === top ? `snapshot ${id} is not committed` : `snapshot ${top}: its parent ${id} is not committed`);
    chain.unshift(id);
    id = info.parent;
  }
  return chain;
}
