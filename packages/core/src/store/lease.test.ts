// Leases and the collection lock: a live lease is seen by collection until released, and taking one
// waits for a collection that holds the lock (leases of dead processes: test/gc.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { acquireLease, liveLeaseRefs } from './lease.js';
import { withCollectionLock } from '../util/collection-lock.js';

const roots: string[] = [];
afterEach(() => {
  for (const d of roots.splice(0)) rmSync(d, { recursive: true, force: true });
});

function storeRoot(): string {
  const d = mkdtempSync(join(tmpdir(), 'fastpull-lease-'));
  roots.push(d);
  return d;
}

describe('leases', () => {
  it('keep what they name until released, and the caller can leave its own out', async () => {
    const root = storeRoot();
    const blob = sha256Digest('blob');
    const snap = sha256Digest('snap');
    const lease = await acquireLease(root, { blobs: [blob], snapshots: [snap] });
    expect(await liveLeaseRefs(root)).toEqual({ blobs: new Set([blob]), snapshots: new Set([snap]) });
    expect(await liveLeaseRefs(root, lease.id)).toEqual({ blobs: new Set(), snapshots: new Set() });
    await lease.release();
    expect(await liveLeaseRefs(root)).toEqual({ blobs: new Set(), snapshots: new Set() });
  });

  it('are taken only when no collection holds the lock: a collection sees a lease or ran before it', async () => {
    const root = storeRoot();
    const order: string[] = [];
    let leased: Promise<unknown> | undefined;
    await withCollectionLock(root, 'exclusive', async () => {
      let waiting!: () => void;
      const waits = new Promise<void>((r) => (waiting = r));
      leased = acquireLease(root, { blobs: [], snapshots: [sha256Digest('s')] }, undefined, waiting).then((l) => (order.push('leased'), l));
      // The taker found the store held and waits; nothing of its lease is on disk meanwhile.
      await waits;
      expect(await liveLeaseRefs(root)).toEqual({ blobs: new Set(), snapshots: new Set() });
      order.push('collected');
    });
    const lease = (await leased) as { release: () => Promise<void> };
    expect(order).toEqual(['collected', 'leased']);
    await lease.release();
  });

  it('waiting for the collection lock stops with ABORTED when the signal fires', async () => {
    const root = storeRoot();
    const ac = new AbortController();
    await withCollectionLock(root, 'exclusive', async () => {
      const waiting = acquireLease(root, { blobs: [], snapshots: [] }, ac.signal);
      ac.abort();
      await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    });
  });
});
