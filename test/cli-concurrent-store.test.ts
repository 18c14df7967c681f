// Several fastpull processes on one store at once (pulls of images sharing layers, rm, gc, images):
// every command succeeds, and the store ends consistent: each recorded image has all its snapshots,
// nothing half-written is left, no blob is corrupt.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '@fastpull/core';
import { buildImage, type BuiltImage, lacksRegistry, type LayerEntry, pushImage, startDistribution } from '@fastpull/core/testing';
import { corruptBlobs, ls, runCliAsync as cli, tempDir } from './helpers.js';

describe.skipIf(lacksRegistry())('concurrent fastpull processes on one store', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  const images: BuiltImage[] = [];
  const work = tempDir('cli-concurrent');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    const base: LayerEntry[] = [{ type: 'file', path: 'etc/base', content: 'base\n'.repeat(20_000) }];
    for (let i = 0; i < 4; i++) {
      const image = await buildImage({
        layers: [base, [{ type: 'file', path: `app${i}/bin`, content: `${i}\n`.repeat(50_000) }], [{ type: 'file', path: `top${i}`, content: 'top' }]],
      });
      images.push(image);
      await pushImage(registry.url, 'conc/app', String(i), image);
    }
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('keeps the store consistent through rounds of pulls, rm, gc and images at the same time', async () => {
    const root = join(work.dir, 'root');
    const ref = (i: number) => `${registry.host}/conc/app:${i}`;
    expect((await cli(['pull', '--root', root, '-q', ref(0)])).status).toBe(0);
    for (let round = 0; round < 3; round++) {
      const runs = await Promise.all([
        cli(['pull', '--root', root, '-q', ref(1)]),
        cli(['pull', '--root', root, '-q', ref(2)]),
        cli(['pull', '--root', root, '-q', ref(2)]),
        cli(['pull', '--root', root, '-q', ref(3)]),
        cli(['rm', '--root', root, ref(0)]),
        cli(['gc', '--root', root]),
        cli(['images', '--root', root, '--json']),
      ]);
      for (const r of runs) expect(r.status, `round ${round}: ${r.stderr}`).toBe(0);
      const store = openStore(root);
      const recorded = await store.images.list();
      expect(recorded.map((i) => i.name).sort(), `round ${round}`).toEqual([ref(1), ref(2), ref(3)]);
      for (const img of recorded) {
        for (const l of img.layers) expect(await store.snapshots.isCommitted(l.chainID), `${img.name} ${l.chainID}`).toBe(true);
        expect((await cli(['mounts', '--root', root, img.name])).status).toBe(0);
      }
      expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
      expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
      expect(ls(join(root, 'leases'))).toEqual([]);
      expect(corruptBlobs(root)).toEqual([]);
      // Back to the start for the next round: image 0 pulled again, the others removed and collected.
      for (const i of [1, 2, 3]) expect((await cli(['rm', '--root', root, ref(i)])).status).toBe(0);
      expect((await cli(['pull', '--root', root, '-q', ref(0)])).status).toBe(0);
      expect((await cli(['gc', '--root', root])).status).toBe(0);
      const [only, ...more] = await store.images.list();
      expect(more).toEqual([]);
      expect(only?.name).toBe(ref(0));
      expect((await store.snapshots.list()).map((s) => s.chainID).sort()).toEqual(only!.layers.map((l) => l.chainID).sort());
    }
  });
});
