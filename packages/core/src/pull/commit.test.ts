import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { acquireLease } from '../store/lease.js';
import type { Store } from '../store/root.js';
import { buildImage, type BuiltImage } from '../testing/builder.js';
import { UnpackPool } from '../unpack/index.js';
import { commitLayer, dropLayerBlob, type CommitContext } from './commit.js';
import { LayerDownload } from './download.js';
import { LayerProgress } from './progress.js';
import { downloadContext, freshStore, serve, workDir, type Served } from './pull.testkit.js';

const work = workDir('commit');
afterAll(() => work.cleanup());
const pool = new UnpackPool({ size: 1, threads: false });
afterAll(() => pool.close());
const ingests = async (root: string) => readdir(join(root, 'content', 'ingest')).catch(() => [] as string[]);

/** Layer `index` of `served` downloaded (or read from the store) and unpacked into an active snapshot of `store`. */
async function unpacked(served: Served, store: Store, index: number) {
  const layer = served.layers[index]!;
  const ctx = downloadContext(served, store);
  const download = await LayerDownload.start(ctx, layer, layer, new LayerProgress({ index, ...layer }, undefined));
  const active = await store.snapshots.prepare();
  const r = await pool.run({
    blobPath: download.blobPath,
    mediaType: layer.mediaType,
    dest: active.fs,
    follow: { watermark: download.watermark.buffer, size: layer.size },
  });
  await download.done;
  ctx.watch.stop();
  return { layer, download, active, r };
}

function commitContext(served: Served, store: Store, options: Partial<CommitContext> = {}): CommitContext {
  return {
    store,
    signal: new AbortController().signal,
    layers: served.layers,
    rootless: false,
    keepBlobs: false,
    leaseId: 'none',
    lowersSettled: async () => undefined,
    ...options,
  };
}

describe('committing a verified layer', () => {
  let image: BuiltImage;
  let served: Served;
  afterAll(() => served?.close());

  it('commits the snapshot under its chainID and drops the download, or keeps it as a blob with keepBlobs', async () => {
    image = await buildImage({
      layers: [
        [{ type: 'file', path: 'etc/conf', content: 'bottom' }],
        [
          { type: 'whiteout', path: 'etc/conf' },
          { type: 'file', path: 'top', content: 'top' },
        ],
      ],
    });
    served = await serve(image);
    const store = freshStore(work.dir, 'drop');
    const u = await unpacked(served, store, 0);
    expect(await commitLayer(commitContext(served, store), 0, u.active, u.r, u.download)).toBe(true);
    await u.download.close(false);
    expect(readFileSync(join(store.snapshots.fsPath(u.layer.chainID), 'etc', 'conf'), 'utf8')).toBe('bottom');
    expect(await store.snapshots.info(u.layer.chainID)).toMatchObject({ chainID: u.layer.chainID, diffID: u.layer.diffID, size: u.r.uncompressedSize });
    expect(await store.content.info(u.layer.digest)).toBeUndefined();
    expect(await ingests(store.root)).toEqual([]);

    const kept = freshStore(work.dir, 'kept');
    const k = await unpacked(served, kept, 0);
    await commitLayer(commitContext(served, kept, { keepBlobs: true }), 0, k.active, k.r, k.download);
    await k.download.close(false);
    expect(await kept.content.info(k.layer.digest)).toEqual({ digest: k.layer.digest, size: k.layer.size });
    expect(await kept.snapshots.isCommitted(k.layer.chainID)).toBe(true);
  });

  it('settles a layer with whiteouts against the layers below, and commits nothing while one of them is missing', async () => {
    const store = freshStore(work.dir, 'lowers');
    const top = await unpacked(served, store, 1);
    await expect(commitLayer(commitContext(served, store), 1, top.active, top.r, top.download)).rejects.toMatchObject({ code: 'ABORTED' });
    expect(await store.snapshots.isCommitted(top.layer.chainID)).toBe(false);
    await top.download.close(false);
    await store.snapshots.remove(top.active);

    const bottom = await unpacked(served, store, 0);
    await commitLayer(commitContext(served, store), 0, bottom.active, bottom.r, bottom.download);
    const again = await unpacked(served, store, 1);
    let waited = 0;
    await commitLayer(commitContext(served, store, { lowersSettled: async (i) => void (waited = i) }), 1, again.active, again.r, again.download);
    expect(waited).toBe(1);
    expect(await store.snapshots.info(again.layer.chainID)).toMatchObject({ parent: bottom.layer.chainID });
  });

  it('drops a stored blob after the commit unless a live pull holds it; nothing when stopped', async () => {
    const store = freshStore(work.dir, 'leased');
    const layer = served.layers[0]!;
    await store.content.putBytes(layer, image.layers[0]!.blob);
    const lease = await acquireLease(store.root, { blobs: [layer.digest], snapshots: [] });
    const u = await unpacked(served, store, 0);
    expect(u.download.fromStore).toBe(true);
    const stopped = new AbortController();
    stopped.abort();
    await expect(commitLayer(commitContext(served, store, { signal: stopped.signal }), 0, u.active, u.r, u.download)).rejects.toMatchObject({
      code: 'ABORTED',
    });
    expect(await store.snapshots.isCommitted(layer.chainID)).toBe(false);
    await commitLayer(commitContext(served, store, { leaseId: 'mine' }), 0, u.active, u.r, u.download);
    expect(existsSync(store.content.blobPath(layer.digest))).toBe(true); // the other pull's lease keeps it
    expect(await dropLayerBlob(store, layer.digest, 'mine')).toBe(false);
    // The pull's own lease does not keep it from itself.
    expect(await dropLayerBlob(store, layer.digest, lease.id)).toBe(true);
    await lease.release();
    expect(await store.content.info(layer.digest)).toBeUndefined();
  });
});
