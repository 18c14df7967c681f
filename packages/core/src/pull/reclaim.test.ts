import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collectGarbage } from '../gc/gc.js';
import { acquireLease } from '../store/lease.js';
import type { Store } from '../store/root.js';
import { sampleImage } from '../testing/sample.js';
import { pull } from './pull.js';
import { freshStore, serve, workDir, type Served } from './pull.testkit.js';
import { reclaimDeadPulls } from './reclaim.js';

const work = workDir('reclaim');
afterAll(() => work.cleanup());
const names = async (dir: string) => readdir(dir).catch(() => [] as string[]);

/**
 * What a process killed in the middle of a pull leaves, as it lies on disk: its lease (owner file,
 * lock free, refs naming `blobs`) and ingests whose owner locks are free (suspended: the lock is
 * released, the data kept, as after a kill).
 */
async function deadPull(store: Store, served: Served, blobs: readonly number[], ingests: readonly number[]): Promise<void> {
  const lease = join(store.root, 'leases', `dead-${blobs.join('')}`);
  mkdirSync(lease, { recursive: true });
  writeFileSync(join(lease, 'owner'), '');
  writeFileSync(join(lease, 'refs.json'), JSON.stringify({ blobs: blobs.map((i) => served.layers[i]!.digest), snapshots: [] }));
  for (const i of ingests) {
    const l = served.layers[i]!;
    const ingest = await store.content.newIngest({ digest: l.digest, size: l.size, mediaType: l.mediaType });
    await ingest.write(new Uint8Array(Math.min(l.size, 100)), 0);
    await store.content.suspend(ingest);
  }
}

describe('reclaiming what dead pulls left', () => {
  it('removes dead leases, ingests no pull will resume and unkept layer blobs; keeps what live pulls and other images need', async () => {
    const image = await sampleImage(21, { layers: 3 });
    const other = await sampleImage(22, { layers: 1 });
    const served = await serve(image);
    served.reg.addImage('steps/other', '1', other);
    try {
      const store = freshStore(work.dir, 'reclaim');
      await pull(served.refText, { root: store.root, plainHttp: true });
      const [l0, l1, l2] = served.layers;
      // Layer 0: a dead ingest (killed between the snapshot's commit and the ingest's removal).
      // Layer 1: its blob committed (a kept blob, killed before the image record).
      // Layer 2: its blob committed too, but a live pull lists it.
      await deadPull(store, served, [0, 1], [0]);
      await store.content.putBytes(l1!, image.layers[1]!.blob);
      await store.content.putBytes(l2!, image.layers[2]!.blob);
      const live = await acquireLease(store.root, { blobs: [l2!.digest], snapshots: [] });
      // Another image's dead download: its own pull may still resume it.
      const otherLayer = other.layers[0]!;
      const foreign = await store.content.newIngest({ digest: otherLayer.digest, size: otherLayer.size, mediaType: otherLayer.mediaType });
      await store.content.suspend(foreign);

      const mine = await acquireLease(store.root, { blobs: served.layers.map((l) => l.digest), snapshots: [] });
      const r = await reclaimDeadPulls(store, served.layers, mine.id, false);
      expect(r.ingests).toHaveLength(1);
      expect(r.blobs).toEqual([l1!.digest]);
      expect((await names(join(store.root, 'leases'))).sort()).toEqual([live.id, mine.id].sort());
      expect(existsSync(store.content.blobPath(l2!.digest))).toBe(true);
      expect(await names(join(store.root, 'content', 'ingest'))).toEqual([foreign.id]);
      expect(await store.snapshots.isCommitted(l0!.chainID)).toBe(true);
      await mine.release();

      // With the live pull gone, a collection finds only the foreign download and layer 2's blob.
      await live.release();
      const dry = await collectGarbage(store, { dryRun: true });
      expect(dry.blobs.map((b) => b.digest)).toEqual([l2!.digest]);
      expect(dry).toMatchObject({ snapshots: [], litter: 1, leftovers: [{ kind: 'ingest', path: `content/ingest/${foreign.id}` }] });
      // The dry run removed nothing.
      expect(await names(join(store.root, 'content', 'ingest'))).toEqual([foreign.id]);
    } finally {
      await served.close();
    }
  });

  it('keeps layer blobs when the pull keeps blobs or an image pulled with keepBlobs lists them', async () => {
    const image = await sampleImage(23, { layers: 2 });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'kept');
      await pull(served.refText, { root: store.root, plainHttp: true, keepBlobs: true });
      const mine = await acquireLease(store.root, { blobs: [], snapshots: [] });
      expect((await reclaimDeadPulls(store, served.layers, mine.id, true)).blobs).toEqual([]);
      // The image's record says keepBlobs: whatever the pull asks, those blobs stay.
      expect((await reclaimDeadPulls(store, served.layers, mine.id, false)).blobs).toEqual([]);
      expect(await store.content.info(served.layers[0]!.digest)).toBeDefined();
      // Pulled again without keepBlobs, the record (replaced) keeps them no more: the pull drops them.
      await pull(served.refText, { root: store.root, plainHttp: true });
      expect(await store.content.info(served.layers[0]!.digest)).toBeUndefined();
      await mine.release();
    } finally {
      await served.close();
    }
  });

  it('is what a successful pull does: after a killed pull, the next one leaves nothing for a collection', async () => {
    const image = await sampleImage(24, { layers: 2 });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'after-kill');
      await pull(served.refText, { root: store.root, plainHttp: true });
      await store.images.delete(served.refText);
      await deadPull(store, served, [0, 1], [0, 1]);
      await store.content.putBytes(served.layers[1]!, image.layers[1]!.blob);
      await pull(served.refText, { root: store.root, plainHttp: true });
      expect(await collectGarbage(store, { dryRun: true })).toEqual({ blobs: [], snapshots: [], litter: 0, leftovers: [], bytes: 0, images: [] });
      expect(await names(join(store.root, 'leases'))).toEqual([]);
      expect(await names(join(store.root, 'content', 'ingest'))).toEqual([]);
    } finally {
      await served.close();
    }
  });
});
