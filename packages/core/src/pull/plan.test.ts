import { afterAll, describe, expect, it } from 'vitest';
import { chainIDs } from '../oci/chainid.js';
import { sampleImage } from '../testing/sample.js';
import { pullMemoryHolders, setPullMemoryHooks } from '../util/allocator.js';
import { pull } from './pull.js';
import { hasBlob, imageLayers, isUnpacked } from './plan.js';
import { freshStore, serve, workDir } from './pull.testkit.js';

const work = workDir('plan');
afterAll(() => work.cleanup());

describe('planning a pull', () => {
  it('lists the layers bottom first with their chainIDs, and refuses images that are not container images', async () => {
    const image = await sampleImage(8, { layers: 3 });
    const served = await serve(image);
    try {
      const resolved = await served.client.resolve(served.ref, { platform: image.platform });
      const layers = imageLayers(served.refText, resolved);
      expect(layers.map((l) => l.digest)).toEqual(image.layers.map((l) => l.digest));
      expect(layers.map((l) => l.chainID)).toEqual(chainIDs(image.layers.map((l) => l.diffID)));
      expect(layers.map((l) => l.mediaType)).toEqual(image.layers.map((l) => l.mediaType));

      const helm = {
        ...resolved,
        manifest: {
          ...resolved.manifest,
          layers: resolved.manifest.layers.map((l) => ({ ...l, mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip' })),
        },
      };
      expect(() => imageLayers(served.refText, helm)).toThrow(
        expect.objectContaining({ code: 'UNSUPPORTED_MEDIA_TYPE', details: { mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip' } }),
      );
      const empty = { ...resolved, manifest: { ...resolved.manifest, layers: [] } };
      expect(() => imageLayers(served.refText, empty)).toThrow(expect.objectContaining({ code: 'INVALID_MANIFEST' }));
      // overlayfs stacks 500 lower layers at most: one more is refused before anything else is looked at.
      const stacked = (n: number): typeof resolved => ({
        ...resolved,
        manifest: { ...resolved.manifest, layers: Array.from({ length: n }, () => resolved.manifest.layers[0]!) },
        config: { ...resolved.config, rootfs: { type: 'layers', diff_ids: Array.from({ length: n }, () => resolved.config.rootfs.diff_ids[0]!) } },
      });
      expect(imageLayers(served.refText, stacked(500))).toHaveLength(500);
      expect(() => imageLayers(served.refText, stacked(501))).toThrow(
        expect.objectContaining({ code: 'TOO_MANY_LAYERS', details: { layers: 501, limit: 500 } }),
      );
    } finally {
      await served.close();
    }
  });

  it('skips layers unpacked for this kind of mount, refuses those unpacked for the other, and finds stored blobs', async () => {
    const image = await sampleImage(9, { layers: 2 });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'skip');
      const [bottom, top] = served.layers;
      expect(await isUnpacked(store, bottom!, false)).toBe(false);
      expect(await hasBlob(store, top!)).toBe(false);
      // The pull holds the memory keeper while it runs, and lets go when done.
      const restore = setPullMemoryHooks({ trim: () => undefined });
      try {
        const running = pull(served.refText, { root: store.root, plainHttp: true, rootless: false, keepBlobs: true });
        expect(pullMemoryHolders()).toBe(1);
        await running;
        expect(pullMemoryHolders()).toBe(0);
        await expect(pull(`${served.refText}-missing`, { root: store.root, plainHttp: true })).rejects.toMatchObject({ code: 'NOT_FOUND' });
        expect(pullMemoryHolders()).toBe(0);
      } finally {
        restore();
      }
      expect(await isUnpacked(store, bottom!, false)).toBe(true);
      await expect(isUnpacked(store, bottom!, true)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: { chainID: bottom!.chainID, storeRootless: false, rootless: true },
      });
      expect(await hasBlob(store, top!)).toBe(true);
      // A blob of another size than the manifest's is no use: it is fetched.
      expect(await hasBlob(store, { ...top!, size: top!.size + 1 })).toBe(false);
    } finally {
      await served.close();
    }
  });
});
