// The flush of what containerd writes into an active snapshot, before its commit: through an fd of
// the snapshot's directory opened at Prepare, before anything was written there, as the store's own
// snapshots are (durable.ts): a write-back error is reported once per open file, so a flush through a
// file opened at Commit would miss one that another flush of the filesystem consumed meanwhile.
import { closeForFlush, flushTree, openForFlush } from '../durable.js';

/**
 * Directory fds held open at once. Each active snapshot holds one until it is committed or removed,
 * and a running container's snapshot stays active for its life: past this many (far more than a node
 * runs), a snapshot is flushed by path, as one prepared before fastpulld last started is.
 */
export const MAX_FLUSH_HANDLES = 4096;

/** The open directory fds of active snapshots, by record id. */
export class FlushHandles {
  private readonly fds = new Map<string, number>();

  /** Opens `dir`, the directory of the new active snapshot `id`, for its flush; nothing when full or when it cannot be opened. */
  open(id: string, dir: string): void {
    if (this.fds.size >= MAX_FLUSH_HANDLES) return;
    try {
      const fd = openForFlush(dir);
      if (fd !== undefined) this.fds.set(id, fd);
    } catch {
      // Out of descriptors, most likely: the commit flushes by path.
    }
  }

  /** Flushes the snapshot `id` (its directory `dir`) to stable storage, through its fd when it has one. */
  flush(id: string, dir: string): Promise<void> {
    return flushTree(dir, undefined, this.fds.get(id));
  }

  /** Closes the fd of `id` (committed or removed). */
  release(id: string): void {
    const fd = this.fds.get(id);
    this.fds.delete(id);
    closeForFlush(fd);
  }

  /** Closes every fd. */
  releaseAll(): void {
    for (const id of [...this.fds.keys()]) this.release(id);
  }
}
