// Cross-process locks per snapshot: two processes sharing a store (the CLI and the daemon, or two
// CLIs) unpack a layer once; the second waits, then finds it committed.
import { openSync, closeSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { FastpullError, throwIfAborted } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import { nativeFs } from '../native/addon.js';
import { sleep } from '../util/retry.js';

/** How often a waiter tries the lock again. flock cannot wait without blocking the thread. */
const POLL_MS = 50;

/**
 * Takes the exclusive lock of `chainID` under `<snapshots>/locks/`. Calls `onWait` once if another
 * holder has it, and keeps trying until it is free or `signal` fires. Returns the release function.
 * Lock files stay (unlinking one while another process waits on it would split the lock).
 */
export async function lockSnapshot(snapshotsDir: string, chainID: Digest, signal?: AbortSignal, onWait?: () => void): Promise<() => void> {
  const dir = join(snapshotsDir, 'locks');
  mkdirSync(dir, { recursive: true });
  const fd = openSync(join(dir, parseDigest(chainID).hex), 'a', 0o600);
  let waited = false;
  try {
    for (;;) {
      if (nativeFs().tryLock(fd, true)) return () => closeSync(fd);
      if (!waited) {
        waited = true;
        onWait?.();
      }
      throwIfAborted(signal, `waiting for another process to unpack ${chainID}`);
      await sleep(POLL_MS, signal);
    }
  } catch (e) {
    closeSync(fd);
    throw e instanceof FastpullError ? e : new FastpullError('INTERNAL', `locking snapshot ${chainID}: ${(e as Error).message}`, { cause: e });
  }
}
