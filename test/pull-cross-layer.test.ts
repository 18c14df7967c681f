// Escapes across layers, pulled end to end from the CNCF distribution registry: a lower layer makes
// `d` a symlink to a directory outside the store, and an upper layer writes under `d` (a file, a
// whiteout, an opaque marker, a nested directory). Each layer is unpacked into its own snapshot, and
// the upper one is settled against the lower ones; whatever the outcome (the pull refuses the image
// with HOSTILE_LAYER, or it unpacks `d` as a directory of the upper layer, as overlayfs would show
// it), nothing outside the store may be created, changed or removed.
import { lstatSync, mkdirSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, isFastpullError, openStore, pull } from '@fastpull/core';
import { buildImage, lacksRegistry, type LayerEntry, pushImage, readTree, startDistribution } from '@fastpull/core/testing';
import { fingerprint, ls, tempDir } from './helpers.js';

describe.skipIf(lacksRegistry())('escapes across layers: a lower symlink `d` to a directory outside, written through from above', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  const work = tempDir('cross-layer');
  const outside = join(work.dir, 'outside');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    mkdirSync(join(outside, 'sub'), { recursive: true });
    writeFileSync(join(outside, 'x'), 'outside x\n');
    writeFileSync(join(outside, 'sub', 'y'), 'outside y\n');
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  const uppers: Array<[string, LayerEntry[]]> = [
    ['a file d/x', [{ type: 'file', path: 'd/x', content: 'from the image\n' }]],
    ['a new file d/new', [{ type: 'file', path: 'd/new', content: 'from the image\n' }]],
    ['a whiteout d/.wh.x', [{ type: 'whiteout', path: 'd/x' }]],
    [
      'an opaque marker d/.wh..wh..opq',
      [
        { type: 'opaque', path: 'd' },
        { type: 'file', path: 'd/kept', content: 'k\n' },
      ],
    ],
    ['a nested directory d/sub/z', [{ type: 'file', path: 'd/sub/z', content: 'z\n' }]],
    ['a whiteout of the nested d/sub/.wh.y', [{ type: 'whiteout', path: 'd/sub/y' }]],
    [
      'a hard link d/h to a file of its own',
      [
        { type: 'file', path: 'f', content: 'f\n' },
        { type: 'hardlink', path: 'd/h', target: 'f' },
      ],
    ],
  ];

  it.each(uppers)('%s: refused or unpacked as a directory of its own; nothing outside changes', async (name, upper) => {
    const before = fingerprint(outside);
    const image = await buildImage({
      layers: [
        [
          { type: 'symlink', path: 'd', target: outside },
          { type: 'file', path: 'keep', content: 'k\n' },
        ],
        upper,
      ],
    });
    const repo = `cross/${name.replace(/[^a-z]+/g, '-').replace(/^-|-$/g, '')}`;
    await pushImage(registry.url, repo, '1', image);
    const root = join(work.dir, `root-${repo.replace('/', '-')}`);
    const outcome = await pull(`${registry.host}/${repo}:1`, { root }).then(
      () => 'ok',
      (e: unknown) => (isFastpullError(e) ? e.code : String(e)),
    );
    expect(['ok', 'HOSTILE_LAYER'], name).toContain(outcome);
    expect(fingerprint(outside), `${name}: the directory outside`).toEqual(before);
    const store = openStore(root);
    const [lower, top] = chainIDs(image.layers.map((l) => l.diffID));
    if (outcome === 'ok') {
      // The lower snapshot keeps its symlink as a symlink; the upper one holds `d` as a directory of
      // its own (overlayfs shows it over the symlink), with what the layer put there.
      const lowerFs = join(root, 'snapshots', 'committed', lower!.slice('sha256:'.length), 'fs');
      const topFs = join(root, 'snapshots', 'committed', top!.slice('sha256:'.length), 'fs');
      expect(readlinkSync(join(lowerFs, 'd'))).toBe(outside);
      expect(lstatSync(join(topFs, 'd')).isDirectory(), `${name}: d in the upper snapshot`).toBe(true);
      const tree = await readTree(topFs);
      expect(
        [...tree.keys()].every((p) => !p.startsWith('/') && !p.includes('..')),
        `${name}: ${[...tree.keys()].join(', ')}`,
      ).toBe(true);
    } else {
      expect(await store.snapshots.isCommitted(top!)).toBe(false);
      expect(await store.images.list()).toEqual([]);
    }
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(statSync(outside).isDirectory()).toBe(true);
  });
});
