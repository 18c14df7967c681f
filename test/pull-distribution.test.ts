// Pulls built images from a real CNCF distribution registry on loopback with the library.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, openStore, pull, pullEvents, sha256Digest, type PullEvent } from '@fastpull/core';
import { findInflater } from '@fastpull/core/unpack';
import { hashFile } from '@fastpull/core/content';
import { FileSnapshotter } from '@fastpull/core/snapshots';
import {
  blobDataPath,
  buildImage,
  buildIndex,
  type BuiltImage,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  Prng,
  pushImage,
  pushIndex,
  sampleImage,
  startDistribution,
} from '@fastpull/core/testing';
import { corruptBlobs, failure, ls, rewriteImage, tempDir } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping distribution tests: docker-registry is not installed (scripts/bootstrap.sh installs it)');

/** Whether the in-process ISA-L inflater is built here; says why its pull is left out when it is not. */
function isalBuilt(): boolean {
  try {
    findInflater('isal');
    return true;
  } catch (e) {
    console.warn(`leaving --inflater isal out of the inflater comparison: ${(e as Error).message}`);
    return false;
  }
}
const isal = isalBuilt();

describe.skipIf(lacksRegistry())('pull from the CNCF distribution registry', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('dist');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(7);
    await pushImage(registry.url, 'sample/app', '1.0', image);
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('pulls every layer, verified, into chainID snapshots and records the image', async () => {
    const root = join(work.dir, 'store1');
    const events: PullEvent[] = [];
    /** When each event came, on the clock the pull's timings use. */
    const times: number[] = [];
    const started = performance.now();
    const { image: rec, timings } = await pull(`${registry.host}/sample/app:1.0`, {
      root,
      onProgress: (e) => {
        events.push(e);
        times.push(performance.now());
      },
      keepBlobs: true,
    });
    const ended = performance.now();

    const diffIDs = image.layers.map((l) => l.diffID);
    expect(rec.name).toBe(`${registry.host}/sample/app:1.0`);
    expect(rec.manifest.digest).toBe(image.manifestDigest);
    expect(rec.layers.map((l) => l.digest)).toEqual(image.layers.map((l) => l.digest));
    expect(rec.layers.map((l) => l.chainID)).toEqual(chainIDs(diffIDs));
    expect(rec.chainID).toBe(chainIDs(diffIDs).at(-1));

    const store = openStore(root);
    for (const l of rec.layers) {
      expect(await store.snapshots.isCommitted(l.chainID)).toBe(true);
      expect(await hashFile(store.content.blobPath(l.digest), l.digest)).toBe(l.digest);
    }
    expect(await store.content.info(image.configDigest)).toBeDefined();
    expect(corruptBlobs(root)).toEqual([]);
    expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);

    expect(events[0]?.type).toBe('resolved');
    expect(events.at(-1)?.type).toBe('done');
    const committed = events.filter((e) => e.type === 'layer' && e.state === 'committed').map((e) => (e as { index: number }).index);
    expect(new Set(committed).size).toBe(new Set(rec.layers.map((l) => l.chainID)).size);
    expect(timings.layers).toHaveLength(rec.layers.length);
    // The timings agree with the clock outside the pull: the whole pull lasted at most what the test
    // saw and at least from before 'resolved' to the last layer's commit, and resolving ended before
    // the 'resolved' event came.
    expect(timings.totalMs).toBeLessThanOrEqual(ended - started);
    const lastCommit = Math.max(...events.flatMap((e, i) => (e.type === 'layer' && e.state === 'committed' ? [times[i]!] : [])));
    expect(timings.totalMs).toBeGreaterThanOrEqual(lastCommit - times[0]!);
    expect(timings.resolveMs).toBeLessThanOrEqual(times[0]! - started);
    // Each unpack pass is split by what it did, each part measured where it runs: together they fit
    // in the pass (decompression, the remainder, is never clamped to 0 to hide an excess), and the
    // pass and the download each fit between the layer's first event and its commit.
    for (const [i, l] of timings.layers.entries()) {
      if (l.state !== 'committed') continue;
      expect(l.verifyMs, l.digest).toBeGreaterThan(0);
      expect(l.extractMs, l.digest).toBeGreaterThan(0);
      expect(l.waitMs + l.verifyMs + l.extractMs, l.digest).toBeLessThanOrEqual(l.unpackMs);
      // Decompression is the remainder of the pass, and a gzip layer's takes time.
      expect(l.decompressMs, l.digest).toBeGreaterThan(0);
      expect(l.decompressMs, l.digest).toBeCloseTo(l.unpackMs - l.waitMs - l.verifyMs - l.extractMs, 6);
      const mine = events.flatMap((e, k) => (e.type === 'layer' && e.index === i ? [times[k]!] : []));
      expect(l.unpackMs, l.digest).toBeLessThanOrEqual(Math.max(...mine) - Math.min(...mine));
      expect(l.fetchMs, l.digest).toBeLessThanOrEqual(Math.max(...mine) - Math.min(...mine));
    }
    const sum = (k: 'fetchMs' | 'verifyMs' | 'decompressMs' | 'extractMs' | 'commitMs'): number => timings.layers.reduce((n, l) => n + l[k], 0);
    // Only per-layer phases are summed: resolving is once per pull, in timings.resolveMs alone.
    expect(timings.phases).toEqual({
      fetchMs: sum('fetchMs'),
      verifyMs: sum('verifyMs'),
      decompressMs: sum('decompressMs'),
      extractMs: sum('extractMs'),
      commitMs: sum('commitMs'),
    });
  });

  it('fetches nothing again for committed layers, and finds the same image by digest', async () => {
    const root = join(work.dir, 'store2');
    await pull(`${registry.host}/sample/app:1.0`, { root });
    // Remove the blobs: if a second pull tried to re-fetch or re-read them, they would come back.
    const store = openStore(root);
    for (const l of image.layers) await store.content.delete(l.digest);
    const events: PullEvent[] = [];
    const { image: rec } = await pull(`${registry.host}/sample/app@${image.manifestDigest}`, { root, onProgress: (e) => events.push(e) });
    const states = events.filter((e) => e.type === 'layer').map((e) => (e as { state: string }).state);
    expect(states.every((s) => s === 'exists')).toBe(true);
    expect(states).toHaveLength(image.layers.length);
    for (const l of image.layers) expect(await store.content.info(l.digest)).toBeUndefined();
    expect(rec.name).toBe(`${registry.host}/sample/app@${image.manifestDigest}`);
  });

  it('gives the same progress as an async iterator, and an abandoned loop aborts the pull', async () => {
    const root = join(work.dir, 'store-iter');
    const ref = `${registry.host}/sample/app:1.0`;
    // Leaving the loop at the first layer event stops the pull: no image is recorded.
    for await (const e of pullEvents(ref, { root })) if (e.type === 'layer') break;
    expect(await openStore(root).images.list()).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);

    const it = pullEvents(ref, { root });
    const seen: PullEvent[] = [];
    let next = await it.next();
    while (next.done !== true) {
      seen.push(next.value);
      next = await it.next();
    }
    expect(seen[0]?.type).toBe('resolved');
    const done = seen.at(-1);
    expect(done?.type).toBe('done');
    expect(next.value.image).toEqual(done?.type === 'done' ? done.image : undefined);
    const finals = seen.filter((e) => e.type === 'layer' && (e.state === 'committed' || e.state === 'exists'));
    expect(finals).toHaveLength(image.layers.length);
    expect(await openStore(root).images.get(ref)).toEqual(next.value.image);

    // A failure is thrown from the loop.
    await expect(
      (async () => {
        for await (const e of pullEvents(`${registry.host}/sample/absent:1`, { root })) void e;
      })(),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('follows an index to the requested platform', async () => {
    const amd = await sampleImage(11, { layers: 2 });
    const arm = await buildImage({
      layers: [[{ type: 'file', path: 'arch', content: 'arm64\n' }]],
      platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
    });
    const index = buildIndex([amd, arm]);
    await pushIndex(registry.url, 'multi/app', 'latest', index);
    const root = join(work.dir, 'store3');
    const { image: rec } = await pull(`${registry.host}/multi/app`, { root, platform: 'linux/arm64' });
    expect(rec.manifest.digest).toBe(arm.manifestDigest);
    expect(rec.target.digest).toBe(index.digest);
    expect(rec.platform).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    const snap = new FileSnapshotter(root);
    expect(readFileSync(join(snap.fsPath(rec.chainID), 'arch'), 'utf8')).toBe('arm64\n');

    const amdRec = (await pull(`${registry.host}/multi/app:latest`, { root, platform: 'linux/amd64' })).image;
    expect(amdRec.manifest.digest).toBe(amd.manifestDigest);
    await expect(pull(`${registry.host}/multi/app`, { root, platform: 'linux/s390x' })).rejects.toMatchObject({ code: 'PLATFORM_NOT_FOUND' });
  });

  it('pulls Docker v2 manifests and uncompressed layers alike', async () => {
    const docker = await sampleImage(31, { layers: 3, format: 'docker' });
    const plain = await sampleImage(32, { layers: 2, compression: 'none' });
    await pushImage(registry.url, 'formats/docker', '1', docker);
    await pushImage(registry.url, 'formats/plain', '1', plain);
    const root = join(work.dir, 'store-formats');
    const d = await pull(`${registry.host}/formats/docker:1`, { root });
    expect(d.image.manifest).toMatchObject({ digest: docker.manifestDigest, mediaType: 'application/vnd.docker.distribution.manifest.v2+json' });
    expect(d.image.layers.every((l) => l.mediaType === 'application/vnd.docker.image.rootfs.diff.tar.gzip')).toBe(true);
    const p = await pull(`${registry.host}/formats/plain:1`, { root });
    expect(p.image.layers.map((l) => l.diffID)).toEqual(plain.layers.map((l) => l.digest));
    expect(corruptBlobs(root)).toEqual([]);
  });

  it('hashes an uncompressed layer once, and refuses a config naming another diffID for it, committing nothing', async () => {
    const weights = new Prng(34).bytes(4 * 1024 * 1024 + 321);
    const plain = await buildImage({
      layers: [[{ type: 'file', path: 'model/weights.bin', content: weights }], [{ type: 'file', path: 'model/config.json', content: '{}' }]],
      compression: 'none',
    });
    expect(plain.layers.map((l) => l.mediaType)).toEqual(['application/vnd.oci.image.layer.v1.tar', 'application/vnd.oci.image.layer.v1.tar']);
    await pushImage(registry.url, 'model/plain', '1', plain);
    const root = join(work.dir, 'store-model');
    const { image: rec, timings } = await pull(`${registry.host}/model/plain:1`, { root });
    expect(rec.layers.map((l) => l.diffID)).toEqual(plain.layers.map((l) => l.digest));
    for (const l of timings.layers) {
      // The blob's hash ran; the tar's, over the same bytes, did not.
      expect(l.blobHashCpuMs, l.digest).toBeGreaterThan(0);
      expect(l.tarHashCpuMs, l.digest).toBe(0);
    }
    const store = openStore(root);
    expect(readFileSync(join(store.snapshots.fsPath(rec.layers[0]!.chainID), 'model/weights.bin')).equals(weights)).toBe(true);

    // The same blobs under a config whose first diffID is not the first blob's digest.
    const wrong = sha256Digest(Buffer.from('not this layer'));
    const lying = rewriteImage(plain, {
      config: (c) => Buffer.from(JSON.stringify({ ...c, rootfs: { type: 'layers', diff_ids: [wrong, plain.layers[1]!.diffID] } })),
    });
    await pushImage(registry.url, 'model/lying', '1', lying);
    const badRoot = join(work.dir, 'store-model-lying');
    const err = await failure(pull(`${registry.host}/model/lying:1`, { root: badRoot, keepBlobs: true }));
    expect(err).toMatchObject({ code: 'DIGEST_MISMATCH', details: { want: wrong, got: plain.layers[0]!.digest } });
    expect(err.message).toContain('diffID mismatch');
    const bad = openStore(badRoot);
    expect(await bad.images.list()).toEqual([]);
    // Not even kept as a blob: nothing of the refused layer is committed.
    expect(await bad.content.info(plain.layers[0]!.digest)).toBeUndefined();
    const [chain] = chainIDs([wrong]);
    expect((await bad.snapshots.list()).map((s) => s.chainID)).not.toContain(chain);
    expect(ls(join(badRoot, 'content', 'ingest')).filter((id) => id.startsWith(plain.layers[0]!.digest.slice(7, 23)))).toEqual([]);
    expect(ls(join(badRoot, 'snapshots', 'active'))).toEqual([]);
    expect(corruptBlobs(badRoot)).toEqual([]);
  });

  it.skipIf(lacks('zstd', existsSync('/usr/bin/zstd') ? undefined : 'zstd is not installed'))(
    'pulls zstd layers, with the zstd program and with the built-in decoder',
    async () => {
      const zstd = await sampleImage(33, { layers: 3, compression: 'zstd' });
      expect(zstd.layers.some((l) => l.mediaType === 'application/vnd.oci.image.layer.v1.tar+zstd')).toBe(true);
      await pushImage(registry.url, 'formats/zstd', '1', zstd);
      for (const inflater of ['auto', 'zlib'] as const) {
        const root = join(work.dir, `store-zstd-${inflater}`);
        const { image: rec } = await pull(`${registry.host}/formats/zstd:1`, { root, inflater });
        expect(rec.layers.map((l) => l.diffID)).toEqual(zstd.layers.map((l) => l.diffID));
        expect(corruptBlobs(root)).toEqual([]);
      }
    },
  );

  it(`pulls with the parallel gunzip${isal ? ' and in-process ISA-L' : ''} into the same snapshots as node:zlib`, async () => {
    const trees: string[][] = [];
    for (const inflater of ['zlib', 'parallel', ...(isal ? (['isal'] as const) : [])] as const) {
      const root = join(work.dir, `store-gunzip-${inflater}`);
      const { image: rec } = await pull(`${registry.host}/sample/app:1.0`, { root, inflater });
      expect(rec.layers.map((l) => l.chainID)).toEqual(chainIDs(image.layers.map((l) => l.diffID)));
      const snaps = new FileSnapshotter(root);
      const listing: string[] = [];
      for (const l of rec.layers) {
        const dir = snaps.fsPath(l.chainID);
        const walk = (d: string, rel: string) => {
          for (const name of readdirSync(d).sort()) {
            const p = join(d, name);
            const st = lstatSync(p);
            listing.push(`${l.chainID} ${rel}${name} ${st.mode} ${st.uid} ${st.isFile() ? createHash('sha256').update(readFileSync(p)).digest('hex') : ''}`);
            if (st.isDirectory()) walk(p, `${rel}${name}/`);
          }
        };
        walk(dir, '');
      }
      trees.push(listing);
    }
    expect(trees[0]!.length).toBeGreaterThan(image.layers.length);
    for (const tree of trees.slice(1)) expect(tree).toEqual(trees[0]);
  });

  it('fails with NOT_FOUND for an unknown tag or repository', async () => {
    const root = join(work.dir, 'store4');
    await expect(pull(`${registry.host}/sample/app:nope`, { root })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(pull(`${registry.host}/no/such:1`, { root })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('refuses a blob whose bytes the registry serves corrupted, and commits nothing', async () => {
    const victim = await sampleImage(23, { layers: 3 });
    await pushImage(registry.url, 'corrupt/app', '1', victim);
    const layer = victim.layers[1]!;
    const path = blobDataPath(registry.storageDir, layer.digest);
    expect(existsSync(path)).toBe(true);
    const bytes = readFileSync(path);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(path, bytes);

    const root = join(work.dir, 'store5');
    const err = await pull(`${registry.host}/corrupt/app:1`, { root }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect(String((err as Error).message)).toContain(layer.digest);

    const store = openStore(root);
    expect(await store.images.list()).toEqual([]);
    expect(await store.content.info(layer.digest)).toBeUndefined();
    const committedChains = (await store.snapshots.list()).map((s) => s.chainID);
    const chains = chainIDs(victim.layers.map((l) => l.diffID));
    // Other layers verify on their own and may be committed; the corrupt one never is.
    expect(committedChains).not.toContain(chains[1]);
    // Layers stopped because another failed keep their downloads for a resume; the corrupt one does not.
    const ingests = ls(join(root, 'content', 'ingest'));
    expect(ingests.some((id) => layer.digest.slice(7, 23) === id.slice(0, 16))).toBe(false);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(corruptBlobs(root)).toEqual([]);
  });
});
