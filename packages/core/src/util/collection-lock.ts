// The collection lock, `<root>/gc.lock`: collection holds it exclusively while it decides what to
// remove; taking a lease (store/lease.ts) and recording what must survive a collection (containerd's
// snapshot records) hold it shared. Low in the floors so that every store that must not interleave
// with a collection can take it.
import { closeSync, openSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { throwIfAborted } from '../errors.js';
import { nativeFs } from '../native/addon.js';
import { sleep } from './retry.js';

const LOCK_POLL_MS = 20;

/**
 * Runs `fn` holding `<root>/gc.lock`: exclusive for collection, shared for whatever must not
 * interleave with one (taking a lease). Waits for the lock without blocking the thread, calling
 * `onWait` once when it has to; throws ABORTED when `signal` fires first. Whoever deletes content outside collection holds it exclusively.
 * @example
 * await withCollectionLock(store.root, 'exclusive', async () => {
 *   await store.content.delete(digest);
 * });
 */
export async function withCollectionLock<T>(
  root: string,
  mode: 'shared' | 'exclusive',
  fn: () => Promise<T>,
  signal?: AbortSignal,
  onWait?: () => void,
): Promise<T> {
  await fsp.mkdir(root, { recursive: true });
  const fd = openSync(join(root, 'gc.lock'), 'a', 0o600);
  try {
    for (let waited = false; !nativeFs().tryLock(fd, mode === 'exclusive'); waited = true) {
      if (!waited) onWait?.();
      throwIfAborted(signal, `waiting for the collection lock of ${root}`);
      await sleep(LOCK_POLL_MS, signal);
    }
    return await fn();
  } finally {
    closeSync(fd); // releases the lock
  }
}
