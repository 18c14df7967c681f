// Pulls of images with a hostile layer, from the real CNCF distribution registry (one forged whiteout,
// then every layer of the unpacker's hostile table): the pull fails with its code (HOSTILE_LAYER or
// INVALID_LAYER), nothing of that layer is committed (no snapshot, no blob, no image record), and
// nothing outside the store changes.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, isFastpullError, openStore, pull } from '@fastpull/core';
import { hostile } from '../packages/core/src/unpack/apply/hostile.testkit.js';
import { buildImage, type BuiltImage, findDistributionBinary, lacksRegistry, type LayerEntry, pushImage, startDistribution } from '@fastpull/core/testing';
import { fingerprint, ls, tempDir } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping hostile-layer pulls: docker-registry is not installed (scripts/bootstrap.sh installs it)');

const BASE: LayerEntry[] = [
  { type: 'file', path: 'etc/passwd', content: 'root:x:0:0::/root:/bin/sh\n' },
  { type: 'file', path: 'bin/sh', content: 'ELF', mode: 0o755 },
];

describe.skipIf(lacksRegistry())('pulling an image with a hostile layer from the CNCF distribution registry', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let base: BuiltImage;
  let forged: BuiltImage;
  const work = tempDir('hostile');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    base = await buildImage({ layers: [BASE] });
    // A character device 0:0 under an ordinary name: overlayfs would take it for a whiteout and hide
    // the base layer's /etc/passwd, a deletion the image does not express (that is `.wh.passwd`).
    forged = await buildImage({ layers: [BASE, [{ type: 'device', path: 'etc/passwd', device: 'char', major: 0, minor: 0 }]] });
    expect(forged.layers[0]!.digest).toBe(base.layers[0]!.digest);
    await pushImage(registry.url, 'hostile/base', '1', base);
    await pushImage(registry.url, 'hostile/forged-whiteout', '1', forged);
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it.each([
    ['rootful', false],
    ['rootless', true],
  ])('refuses a character device 0:0 at an ordinary name (%s layout) and commits nothing of it', async (_, rootless) => {
    const root = join(work.dir, `store-${rootless ? 'rootless' : 'rootful'}`);
    // The base is in the store first, so the failed pull has only the hostile layer to unpack.
    await pull(`${registry.host}/hostile/base:1`, { root, rootless, keepBlobs: true });
    const store = openStore(root);
    const before = (await store.snapshots.list()).map((s) => s.chainID);
    expect(before).toEqual([chainIDs(base.layers.map((l) => l.diffID))[0]]);

    const ref = `${registry.host}/hostile/forged-whiteout:1`;
    const err = await pull(ref, { root, rootless, keepBlobs: true }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'HOSTILE_LAYER',
      message: expect.stringMatching(/entry "etc\/passwd": a character device 0:0 is overlayfs's whiteout/),
    });
    expect((err as Error).message).toContain(forged.layers[1]!.digest);

    const hostileChainID = chainIDs(forged.layers.map((l) => l.diffID))[1]!;
    expect(await store.snapshots.isCommitted(hostileChainID)).toBe(false);
    expect((await store.snapshots.list()).map((s) => s.chainID)).toEqual(before);
    expect(await store.content.info(forged.layers[1]!.digest)).toBeUndefined();
    expect(await store.content.info(base.layers[0]!.digest)).toBeDefined();
    expect((await store.images.list()).map((i) => i.name)).toEqual([`${registry.host}/hostile/base:1`]);
    expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
  });
});

describe.skipIf(lacksRegistry())("the unpacker's table of hostile layers, pulled end to end from the CNCF distribution registry", () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  const work = tempDir('hostile-table');
  const outside = join(work.dir, 'outside');
  // Cases that need a limit lowered for the test are the unpacker's alone: a pull takes the defaults.
  const cases = hostile.filter(([, c]) => c.limits === undefined);

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    mkdirSync(join(outside, 'sub'), { recursive: true });
    writeFileSync(join(outside, 'victim'), 'original');
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('takes most of the table', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  it.each(cases)('refuses %s with its code, commits nothing of it and touches nothing outside', async (name, c) => {
    const before = fingerprint(outside);
    const image = await buildImage({ layers: [BASE, c.tar(outside)] });
    const repo = `hostile/table-${cases.findIndex(([n]) => n === name)}`;
    await pushImage(registry.url, repo, '1', image);
    const root = join(work.dir, repo.replace('/', '-'));
    const err = await pull(`${registry.host}/${repo}:1`, { root }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isFastpullError(err) ? err.code : String(err), name).toBe(c.expect);
    // Through a pull a compressed layer also has its inflation bound, which names itself when it is the tighter.
    if (c.message) expect((err as Error).message).toMatch(new RegExp(c.message.source.replace('maxTotalBytes', '(maxTotalBytes|maxInflateRatio)')));
    const store = openStore(root);
    const [, top] = chainIDs(image.layers.map((l) => l.diffID));
    expect(await store.snapshots.isCommitted(top!)).toBe(false);
    expect(await store.content.info(image.layers[1]!.digest)).toBeUndefined();
    expect(await store.images.list()).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(fingerprint(outside), `${name}: the directory outside`).toEqual(before);
  });
});
