// An image of many layers: its overlay mount options must fit the page mount(2) takes, so the
// snapshots are named by short links; the mount works, and collection respects and cleans the links.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage, LocalService, mountsFor, openStore, pull } from '@fastpull/core';
import { buildImage, type BuiltImage, lacks, lacksRegistry, pushImage, startDistribution } from '@fastpull/core/testing';
import { overlayUnavailable, tempDir } from './helpers.js';

const LAYERS = 70;

describe.skipIf(lacksRegistry())(`an image of ${LAYERS} layers`, () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('many-layers');
  // Store roots as short as a node's /var/lib/fastpull: the options hold the root once per layer.
  const short = mkdtempSync(join(tmpdir(), 'fp'));

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await buildImage({
      layers: Array.from({ length: LAYERS }, (_, i) => [{ type: 'file' as const, path: `layer-${String(i).padStart(3, '0')}`, content: `${i}\n` }]),
    });
    await pushImage(registry.url, 'many/app', '1', image);
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
    rmSync(short, { recursive: true, force: true });
  });

  it('refuses, with a clear error, a stack whose options would not fit even so', async () => {
    const deep = join(work.dir, 'a-store-root-with-a-rather-long-path-on-this-node');
    const { image: rec } = await pull(`${registry.host}/many/app:1`, { root: deep });
    await expect(mountsFor(openStore(deep), rec.name)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/70 layers needs \d+ bytes of mount options/),
    });
  });

  it('succeeds through the service all the same: the image is recorded, the pull gives no mounts, and mounts says why', async () => {
    const deep = join(work.dir, 'a-store-root-with-a-rather-long-path-on-this-node-too');
    const service = new LocalService({ root: deep, credentials: async () => undefined });
    const pulled = await service.pull(`${registry.host}/many/app:1`);
    expect(pulled.image.layers).toHaveLength(LAYERS);
    expect(pulled.snapshots).toHaveLength(LAYERS);
    expect(pulled.mounts).toEqual([]);
    expect((await service.listImages()).map((i) => i.name)).toEqual([pulled.image.name]);
    await expect(service.mounts({ image: pulled.image.name })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/70 layers needs \d+ bytes of mount options/),
    });
  });

  it('gives overlay options that fit a page, through short links to every snapshot, top first', async () => {
    const root = join(short, 'a');
    const { image: rec } = await pull(`${registry.host}/many/app:1`, { root });
    const store = openStore(root);
    const full = rec.layers.map((l) => store.snapshots.fsPath(l.chainID)).join(':');
    expect(full.length).toBeGreaterThan(4096); // the plain form would not fit
    const [m] = await mountsFor(store, rec.name);
    const option = m!.options.find((o) => o.startsWith('lowerdir='))!;
    expect(m!.options.join(',').length).toBeLessThan(3600);
    const lowers = option.slice('lowerdir='.length).split(':');
    expect(lowers).toHaveLength(LAYERS);
    // Top layer first, each link resolving to its snapshot's tree.
    expect(lowers.map((l) => execFileSync('readlink', ['-f', l], { encoding: 'utf8' }).trim())).toEqual(
      rec.layers.map((l) => store.snapshots.fsPath(l.chainID)).reverse(),
    );
    // Asking again reuses the links.
    expect(await mountsFor(store, rec.name)).toEqual([m]);
    expect(readdirSync(join(root, 'snapshots', 'l'))).toHaveLength(LAYERS);
  });

  it.skipIf(lacks('overlay', overlayUnavailable()))('mounts; collection keeps the mounted snapshots, then drops them and their links', async () => {
    const root = join(short, 'b');
    const { image: rec } = await pull(`${registry.host}/many/app:1`, { root });
    const store = openStore(root);
    const [m] = await mountsFor(store, rec.name);
    const target = join(work.dir, 'mnt');
    mkdirSync(target);
    execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', m!.options.join(','), target]);
    try {
      expect(readdirSync(target).sort()).toEqual(Array.from({ length: LAYERS }, (_, i) => `layer-${String(i).padStart(3, '0')}`));
      expect(readFileSync(join(target, 'layer-069'), 'utf8')).toBe('69\n');
      await store.images.delete(rec.name);
      // Mounted by short links only: collection must recognise them.
      const r = await collectGarbage(store);
      expect(r.snapshots).toEqual([]);
    } finally {
      execFileSync('umount', [target]);
    }
    const r = await collectGarbage(store);
    expect(r.snapshots).toHaveLength(LAYERS);
    expect(existsSync(join(root, 'snapshots', 'l')) ? readdirSync(join(root, 'snapshots', 'l')) : []).toEqual([]);
  });
});
