// Manifests, indexes and configs that no pull should take, served by the real CNCF distribution
// registry (or, where that registry refuses the document itself, by the project's loopback registry):
// JSON nested past the depth bound, and more layers than overlayfs stacks. Each is refused with its
// code before a layer byte is fetched or anything recorded; a too-deep document that an older release
// stored answers its own reads with a clean error while every other image still lists and mounts. A
// manifest that lists one layer twice is an ordinary image of two layers.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, LocalService, MAX_JSON_DEPTH, MAX_OVERLAY_LAYERS, mountsFor, openStore, pull, sha256Digest, type ImageRecord } from '@fastpull/core';
import {
  buildImage,
  buildIndex,
  type BuiltImage,
  diffTrees,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  pushImage,
  pushIndex,
  readTree,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { failure, ls, overlayUnavailable, rewriteImage, runCliAsync, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

if (!findDistributionBinary()) console.warn('skipping the manifest limit pulls: docker-registry is not installed (scripts/bootstrap.sh installs it)');

/** `doc` as JSON with `"deep"` set to `depth` nested arrays, spliced in as text (no recursion builds it). */
function withDeepField(doc: Record<string, unknown>, depth: number): Buffer {
  return Buffer.from(JSON.stringify({ ...doc, deep: 0 }).replace('"deep":0', `"deep":${'['.repeat(depth)}${']'.repeat(depth)}`));
}

describe.skipIf(lacksRegistry())('documents nested past the depth bound', () => {
  const work = tempDir('manifest-depth');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const deep = MAX_JSON_DEPTH + 1;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await buildImage({ layers: [[{ type: 'file', path: 'etc/hostname', content: 'deep\n' }]] });
    await pushImage(registry.url, 'deep/ok', '1', image);
    await pushImage(registry.url, 'deep/manifest', '1', rewriteImage(image, { manifest: (m) => withDeepField(m, deep) }));
    await pushImage(registry.url, 'deep/config', '1', rewriteImage(image, { config: (c) => withDeepField(c, deep) }));
    const index = buildIndex([image]);
    const deepIndex = withDeepField(JSON.parse(index.index.toString('utf8')) as Record<string, unknown>, deep);
    await pushIndex(registry.url, 'deep/index', '1', { ...index, index: deepIndex, digest: sha256Digest(deepIndex) });
    // At the bound exactly, a document is an ordinary one.
    await pushImage(registry.url, 'deep/at-bound', '1', rewriteImage(image, { manifest: (m) => withDeepField(m, MAX_JSON_DEPTH - 1) }));
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it.each([
    ['manifest', 'deep/manifest'],
    ['config', 'deep/config'],
    ['index', 'deep/index'],
  ])('refuses a %s nested one level too deep as INVALID_MANIFEST and records nothing', async (what, repo) => {
    const root = join(work.dir, `store-${what}`);
    const err = await failure(pull(`${registry.host}/${repo}:1`, { root }));
    expect(err.code).toBe('INVALID_MANIFEST');
    expect(err.message).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    const store = openStore(root);
    expect(await store.images.list()).toEqual([]);
    expect(await store.snapshots.list()).toEqual([]);
    expect(ls(join(root, 'content', 'blobs', 'sha256'))).toEqual([]);
  });

  it('pulls a document nested exactly to the bound', async () => {
    const root = join(work.dir, 'store-at-bound');
    const pulled = await pull(`${registry.host}/deep/at-bound:1`, { root });
    expect(pulled.image.layers.map((l) => l.diffID)).toEqual([image.layers[0]!.diffID]);
  });

  it('refuses a manifest 1.5 million levels deep (which the CNCF registry will not store) without running out of stack', async () => {
    const loopback = await startLoopbackRegistry();
    try {
      const huge = rewriteImage(image, { manifest: (m) => withDeepField(m, 1_500_000) });
      loopback.addImage('deep/huge', '1', huge);
      const root = join(work.dir, 'store-huge');
      const err = await failure(pull(`${loopback.host}/deep/huge:1`, { root }));
      expect(err.code).toBe('INVALID_MANIFEST');
      expect(err.message).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);
      expect(await openStore(root).images.list()).toEqual([]);
    } finally {
      await loopback.close();
    }
  });
});

describe.skipIf(lacksRegistry())('a too-deep manifest an older release stored', () => {
  const work = tempDir('manifest-depth-stored');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let daemon: RunningDaemon | undefined;
  let good: ImageRecord;
  let bad = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    const image = await buildImage({ layers: [[{ type: 'file', path: 'etc/hostname', content: 'good\n' }]] });
    await pushImage(registry.url, 'stored/good', '1', image);
    good = (await pull(`${registry.host}/stored/good:1`, { root })).image;
    // What an older release left: the record of an image whose stored manifest is 1.5 million levels deep.
    const store = openStore(root);
    const deep = withDeepField(JSON.parse(image.manifest.toString('utf8')) as Record<string, unknown>, 1_500_000);
    const digest = sha256Digest(deep);
    await store.content.putBytes({ digest, size: deep.length }, deep);
    bad = `${registry.host}/stored/deep:1`;
    const manifest = { ...good.manifest, digest, size: deep.length };
    await store.images.put({ ...good, name: bad, target: manifest, manifest });
    daemon = await serveDaemon(['--socket', socket, '--root', root]);
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  it('answers inspect of that image with INVALID_MANIFEST, locally, through fastpulld and the CLI, and serves every other image', async () => {
    const local = new LocalService({ root });
    const remote = new FastpullClient(socket);
    try {
      for (const s of [local, remote]) {
        const err = await failure(s.inspectImage(bad));
        expect(err.code).toBe('INVALID_MANIFEST');
        expect(err.message).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);
        expect((await s.listImages()).map((i) => i.name).sort()).toEqual([bad, good.name].sort());
        expect((await s.inspectImage(good.name)).image.chainID).toBe(good.chainID);
        expect(await s.mounts({ image: good.name })).toHaveLength(1);
      }
      for (const where of [
        ['--root', root],
        ['--address', socket],
      ]) {
        const r = await runCliAsync(['inspect', ...where, bad]);
        expect(r.status).toBe(1);
        expect(r.stderr).toContain('INVALID_MANIFEST');
        expect(r.stderr).not.toContain('call stack');
      }
      // The record can go, as any other.
      await remote.removeImage(bad);
      expect((await local.listImages()).map((i) => i.name)).toEqual([good.name]);
    } finally {
      await remote.close();
      await local.close();
    }
  });
});

/** `image` (of one layer) with that layer listed `times` times in its manifest and config. */
function repeatLayer(image: BuiltImage, times: number): BuiltImage {
  return rewriteImage(image, {
    config: (c) =>
      Buffer.from(JSON.stringify({ ...c, rootfs: { type: 'layers', diff_ids: Array.from({ length: times }, () => image.layers[0]!.diffID) }, history: [] })),
    manifest: (m) => Buffer.from(JSON.stringify({ ...m, layers: Array.from({ length: times }, () => (m.layers as unknown[])[0]) })),
  });
}

describe.skipIf(lacksRegistry())('layer counts', () => {
  const work = tempDir('manifest-layers');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await buildImage({
      layers: [
        [
          { type: 'dir', path: 'etc', mode: 0o750 },
          { type: 'file', path: 'etc/motd', content: 'twice\n' },
        ],
      ],
    });
    await pushImage(registry.url, 'layers/thousands', '1', repeatLayer(image, 3000));
    await pushImage(registry.url, 'layers/twice', '1', repeatLayer(image, 2));
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it(`refuses 3000 layers as TOO_MANY_LAYERS before a layer byte is fetched, and records nothing (library and CLI)`, async () => {
    const root = join(work.dir, 'store-thousands');
    const ref = `${registry.host}/layers/thousands:1`;
    const err = await failure(pull(ref, { root }));
    expect(err.code).toBe('TOO_MANY_LAYERS');
    expect(err.details).toEqual({ layers: 3000, limit: MAX_OVERLAY_LAYERS });
    expect(err.message).toBe(
      `${ref} has 3000 layers; overlayfs stacks at most 500 in one mount (for containerd and runc as for fastpull), so no runtime could mount it: rebuild it with fewer layers (squash some)`,
    );
    const store = openStore(root);
    expect(await store.images.list()).toEqual([]);
    expect(await store.snapshots.list()).toEqual([]);
    expect(ls(join(root, 'content', 'blobs', 'sha256'))).toEqual([]);
    expect(ls(join(root, 'content', 'ingest'))).toEqual([]);

    const cli = await runCliAsync(['pull', '--root', root, ref]);
    expect(cli.status).toBe(1);
    expect(cli.stderr.trim().split('\n').at(-1)).toMatch(/has 3000 layers; overlayfs stacks at most 500 .* \(TOO_MANY_LAYERS\)$/);
    expect(await store.images.list()).toEqual([]);
  });

  it('pulls a manifest that lists one layer twice as two snapshots of the same blob, and mounts the tree it defines', async () => {
    const root = join(work.dir, 'store-twice');
    const ref = `${registry.host}/layers/twice:1`;
    for (const keepBlobs of [true, false]) {
      const { image: rec } = await pull(ref, { root: `${root}-${keepBlobs}`, keepBlobs });
      const diffID = image.layers[0]!.diffID;
      expect(rec.layers.map((l) => l.digest)).toEqual([image.layers[0]!.digest, image.layers[0]!.digest]);
      expect(rec.layers.map((l) => l.chainID)).toEqual(chainIDs([diffID, diffID]));
      const store = openStore(`${root}-${keepBlobs}`);
      expect((await store.snapshots.list()).map((s) => s.chainID).sort()).toEqual(chainIDs([diffID, diffID]).sort());
      for (const l of rec.layers) expect(diffTrees(image.expectedTree(), await readTree(store.snapshots.fsPath(l.chainID)))).toEqual([]);
      expect((await store.content.info(image.layers[0]!.digest)) !== undefined).toBe(keepBlobs);
      expect(ls(join(`${root}-${keepBlobs}`, 'content', 'ingest'))).toEqual([]);
      // Pulled again: nothing to do, the same record.
      expect((await pull(ref, { root: `${root}-${keepBlobs}`, keepBlobs })).image.layers).toEqual(rec.layers);
    }
  });

  it.skipIf(lacks('overlay', overlayUnavailable()))('mounts that image with overlayfs into the tree one copy of the layer defines', async () => {
    const root = join(work.dir, 'store-twice-mount');
    await pull(`${registry.host}/layers/twice:1`, { root });
    const [m] = await mountsFor(openStore(root), `${registry.host}/layers/twice:1`);
    expect(m!.options.find((o) => o.startsWith('lowerdir='))!.split(':')).toHaveLength(2);
    const target = join(work.dir, 'merged');
    mkdirSync(target);
    execFileSync('mount', ['-t', m!.type, m!.source, '-o', m!.options.join(','), target]);
    try {
      expect(diffTrees(image.expectedTree(), await readTree(target))).toEqual([]);
    } finally {
      execFileSync('umount', [target]);
    }
  });
});
