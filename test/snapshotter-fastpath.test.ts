// The remote-snapshotter fast path over fastpulld's snapshotter socket, driven as containerd's CRI
// unpack drives it: each layer's Prepare carries the target chainID and the CRI labels; fastpulld
// pulls the image from the real registry with its own engine, records each layer as a committed
// snapshot carrying the target label over the requested parent, and answers ALREADY_EXISTS; the
// record is what containerd's metadata layer then finds with its filter. Layers already in the store
// are answered without a pull; any failure (no such manifest, a parent that is not the layers below)
// falls back to normal mounts.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, HELD_FOR_CONTAINERD_GRACE_MS, openStore, type Digest } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  diffTrees,
  type DistributionRegistry,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  pushImage,
  readTree,
  sampleImage,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { logsSettled, mountAll, snapshotsClient, statusOf, unmount, type SnapshotsClient } from './snapshotter-client.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping the fast-path tests: docker-registry is not installed');
const noMounts = overlayUnavailable();

describe.skipIf(lacksRegistry())('the fast path: CRI-labelled Prepares answered from fastpull pulls', () => {
  const work = tempDir('fastpath');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  const snapSocket = join(work.dir, 'snapshotter.sock');
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let client: SnapshotsClient;
  let api: FastpullClient;
  let image: BuiltImage;
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(7, { layers: 4 });
    await pushImage(registry.url, 'fast/app', 'v1', image);
    ref = `${registry.host}/fast/app:v1`;
    daemon = startDaemon(['--socket', socket, '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    client = snapshotsClient(snapSocket);
    api = new FastpullClient(socket);
  });
  afterAll(async () => {
    client?.close();
    await api?.close();
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGTERM');
      await daemon.exited;
    }
    await registry?.stop();
    work.cleanup();
  });

  const labelsFor = (img: BuiltImage, imageRef: string, i: number): Record<string, string> => ({
    'containerd.io/snapshot.ref': chainIDs(img.layers.map((l) => l.diffID))[i]!,
    'containerd.io/snapshot/cri.image-ref': imageRef,
    'containerd.io/snapshot/cri.manifest-digest': img.manifestDigest,
    'containerd.io/snapshot/cri.layer-digest': img.layers[i]!.digest,
    'containerd.io/snapshot/cri.image-layers': img.layers
      .slice(i)
      .map((l) => l.digest)
      .join(','),
  });

  /**
   * containerd's unpack of `img` as 1.6 does it for CRI: for each layer, Prepare with the labels;
   * on ALREADY_EXISTS, find the committed snapshot by the same filter containerd's metadata layer
   * uses and take its name as the next parent. Returns the backend names, bottom first.
   */
  async function unpackAsContainerd(img: BuiltImage, imageRef: string, ns: string): Promise<string[]> {
    const names: string[] = [];
    let parent = '';
    for (let i = 0; i < img.layers.length; i++) {
      const labels = labelsFor(img, imageRef, i);
      const target = labels['containerd.io/snapshot.ref']!;
      const status = await statusOf(client.prepare(`${ns}/${i + 10}/extract-${i} ${target}`, parent, labels));
      expect(status, `layer ${i}`).toBe('ALREADY_EXISTS');
      const found = (await client.list([`labels."containerd.io/snapshot.ref"==${target},parent==${JSON.stringify(parent)}`])).filter(
        (s) => s.kind === 'COMMITTED',
      );
      expect(found, `layer ${i}`).toHaveLength(1);
      expect(found[0]!.name).not.toBe(target); // never the bare chainID
      expect(found[0]!.labels['containerd.io/snapshot.ref']).toBe(target);
      parent = found[0]!.name;
      names.push(parent);
    }
    return names;
  }

  it('answers every layer ALREADY_EXISTS after pulling with fastpull; the records mount as the image', async () => {
    const names = await unpackAsContainerd(image, ref, 'k8s.io');
    const byDigest = `${registry.host}/fast/app@${image.manifestDigest}`;
    // The log lines come through a pipe: they may land just after the answers.
    await daemon.waitLog((l) => l.event === 'pull' && l.image === byDigest);
    await daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.layer === image.layers.at(-1)!.digest);
    await logsSettled(daemon, client);
    const pulls = daemon.logs.filter((l) => l.event === 'pull' && l.image === byDigest);
    expect(pulls).toHaveLength(1); // one pull for all four layers
    expect(pulls[0]!.result).toBe('ok');
    const recorded = daemon.logs.filter((l) => l.msg === 'layer recorded for containerd');
    // The first layer waited for the pull; later ones found their layer committed already, or waited too.
    expect(recorded).toHaveLength(4);
    expect(recorded[0]!.how).toBe('pulled');

    // A container over the top record sees the image's tree.
    const mounts = await client.prepare('k8s.io/20/container', names.at(-1));
    const lower = mounts[0]!.options
      .find((o) => o.startsWith('lowerdir='))!
      .slice('lowerdir='.length)
      .split(':');
    const chains = chainIDs(image.layers.map((l) => l.diffID));
    expect(lower).toEqual([...chains].reverse().map((c) => join(root, 'snapshots', 'committed', c.slice('sha256:'.length), 'fs')));
    if (!lacks('overlay', noMounts)) {
      const view = await client.view('k8s.io/21/view', names.at(-1));
      const dir = join(work.dir, 'view');
      mkdirSync(dir);
      mountAll(view, dir);
      try {
        expect(diffTrees(image.expectedTree(), await readTree(dir))).toEqual([]);
      } finally {
        unmount(dir);
      }
      await client.remove('k8s.io/21/view');
    }
    await client.remove('k8s.io/20/container');
  });

  it("keeps borrowed layers through fastpull's own gc; answers held layers without a pull, recorded ones from their records", async () => {
    // fastpull forgets its image record and collects: the records still hold the layers.
    const byDigest = `${registry.host}/fast/app@${image.manifestDigest}`;
    await api.removeImage(byDigest, { gc: true });
    const chains = chainIDs(image.layers.map((l) => l.diffID));
    const left = (await api.listSnapshots()).map((s) => s.chainID);
    for (const c of chains) expect(left).toContain(c);

    // An image fastpull.v1 pulled first: containerd's unpack of it is answered from the store.
    const held = await sampleImage(8, { layers: 3 });
    await pushImage(registry.url, 'fast/held', 'v1', held);
    const heldRef = `${registry.host}/fast/held:v1`;
    await api.pull(heldRef);
    // Its log line comes through a pipe: only what follows it counts below.
    await daemon.waitLog((l) => l.event === 'pull' && l.image === heldRef);
    let before = daemon.logs.length;
    await unpackAsContainerd(held, heldRef, 'other');
    // The log lines come through a pipe: they may land just after the answers.
    await daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.layer === held.layers.at(-1)!.digest);
    await logsSettled(daemon, client);
    let after = daemon.logs.slice(before);
    expect(after.filter((l) => l.event === 'pull')).toEqual([]);
    expect(after.filter((l) => l.msg === 'layer recorded for containerd').map((l) => l.how)).toEqual(['held', 'held', 'held']);

    // An image over the same lower layers as the first, with a new top: the lower layers are the
    // records made before (same target, same parent); only the top is pulled.
    const extra = await sampleImage(10, { layers: 1 });
    const stacked = await buildImage({ layers: [...image.layers.map((l) => l.entries), ...extra.layers.map((l) => l.entries)] });
    await pushImage(registry.url, 'fast/stacked', 'v1', stacked);
    const stackedRef = `${registry.host}/fast/stacked:v1`;
    const recordsBefore = (await client.list()).length;
    before = daemon.logs.length;
    const names = await unpackAsContainerd(stacked, stackedRef, 'third');
    await daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.image === stackedRef);
    await logsSettled(daemon, client);
    after = daemon.logs.slice(before);
    expect((await client.list()).length).toBe(recordsBefore + 1);
    expect(after.filter((l) => l.msg === 'layer recorded for containerd').map((l) => l.how)).toEqual(['pulled']);
    expect((await client.stat(names.at(-1)!)).labels['containerd.io/snapshot/cri.image-ref']).toBe(stackedRef);
  });

  it('falls back to normal mounts when the pull fails or the parent is not the layers below', async () => {
    const labels = {
      ...labelsFor(image, ref, 0),
      'containerd.io/snapshot/cri.manifest-digest': `sha256:${'0'.repeat(64)}`,
      'containerd.io/snapshot.ref': `sha256:${'1'.repeat(64)}`,
    };
    const mounts = await client.prepare('k8s.io/30/extract-bogus', '', labels);
    expect(mounts[0]).toMatchObject({ type: 'bind', options: ['rw', 'rbind'] });
    await daemon.waitLog((l) => l.msg === 'fast path failed; containerd unpacks the layer itself' && l.target === labels['containerd.io/snapshot.ref']);

    // Layer 2 of the image over a parent that holds layer 0 only: not the layers below it.
    const layer0 = (await client.list([`labels."containerd.io/snapshot.ref"==${labelsFor(image, ref, 0)['containerd.io/snapshot.ref']},parent==""`]))[0]!;
    const wrong = await client.prepare('k8s.io/31/extract-2', layer0.name, labelsFor(image, ref, 2));
    expect(wrong[0]!.type).toBe('overlay');
    expect(wrong[0]!.options.some((o) => o.startsWith('upperdir='))).toBe(true);
    await client.remove('k8s.io/31/extract-2');
    await client.remove('k8s.io/30/extract-bogus');
  });

  it('shares one pull between concurrent Prepares of the same layer in two namespaces', async () => {
    const img = await sampleImage(9, { layers: 2 });
    await pushImage(registry.url, 'fast/concurrent', 'v1', img);
    const cref = `${registry.host}/fast/concurrent:v1`;
    const target = labelsFor(img, cref, 0)['containerd.io/snapshot.ref'] as Digest;
    const [a, b] = await Promise.all([
      statusOf(client.prepare('ns-a/40/extract-0', '', labelsFor(img, cref, 0))),
      statusOf(client.prepare('ns-b/40/extract-0', '', labelsFor(img, cref, 0))),
    ]);
    expect([a, b]).toEqual(['ALREADY_EXISTS', 'ALREADY_EXISTS']);
    expect(await client.list([`labels."containerd.io/snapshot.ref"==${target}`])).toHaveLength(1);
    // The pull's log line may land just after the Prepares were answered: wait for it.
    const isPull = (l: Record<string, unknown>) => l.event === 'pull' && l.image === `${registry.host}/fast/concurrent@${img.manifestDigest}`;
    await daemon.waitLog(isPull);
    await logsSettled(daemon, client);
    expect(daemon.logs.filter(isPull)).toHaveLength(1);
  });

  it("lets go of a fast-path image record once containerd's records of it are gone, and only then", async () => {
    const img = await sampleImage(11, { layers: 2 });
    await pushImage(registry.url, 'fast/released', 'v1', img);
    const rref = `${registry.host}/fast/released:v1`;
    const byDigest = `${registry.host}/fast/released@${img.manifestDigest}`;
    const names = await unpackAsContainerd(img, rref, 'rel');
    const record = (await api.listImages()).find((i) => i.name === byDigest);
    expect(record?.heldFor).toBe('containerd');
    const chains = chainIDs(img.layers.map((l) => l.diffID));
    const released = (r: { images: readonly { name: string }[] }) => r.images.map((i) => i.name).filter((n) => n.includes('/fast/released@'));

    // Young: kept even with no containerd record. Old but borrowed: kept.
    const store = openStore(root);
    expect(released(await api.collectGarbage())).toEqual([]);
    await store.images.put({ ...record!, created: new Date(Date.now() - HELD_FOR_CONTAINERD_GRACE_MS - 60_000).toISOString() });
    expect(released(await api.collectGarbage())).toEqual([]);
    expect((await api.listImages()).some((i) => i.name === byDigest)).toBe(true);

    // containerd forgets the image (its GC removes the records, top first): the record goes, then its layers.
    for (const name of [...names].reverse()) await client.remove(name);
    const dry = await api.collectGarbage({ dryRun: true });
    expect(released(dry)).toEqual([byDigest]);
    expect((await api.listImages()).some((i) => i.name === byDigest)).toBe(true);
    const gc = await api.collectGarbage();
    expect(released(gc)).toEqual([byDigest]);
    expect((await api.listImages()).some((i) => i.name === byDigest)).toBe(false);
    for (const c of chains) expect(gc.snapshots.map((s) => s.chainID)).toContain(c);

    // A user's pull of the same name is the user's: never marked, never let go.
    await api.pull(byDigest);
    const mine = (await api.listImages()).find((i) => i.name === byDigest)!;
    expect(mine.heldFor).toBeUndefined();
    await store.images.put({ ...mine, created: new Date(Date.now() - HELD_FOR_CONTAINERD_GRACE_MS - 60_000).toISOString() });
    // containerd's unpack of it now is answered from the store, and leaves the record the user's.
    const again = await unpackAsContainerd(img, rref, 'rel2');
    expect((await api.listImages()).find((i) => i.name === byDigest)!.heldFor).toBeUndefined();
    for (const name of [...again].reverse()) await client.remove(name);
    expect(released(await api.collectGarbage())).toEqual([]);
    expect((await api.listImages()).some((i) => i.name === byDigest)).toBe(true);
  });

  it("makes the image a user's when the user's pull joined the one the fast path started", async () => {
    const loop = await startLoopbackRegistry();
    let release: () => void = () => undefined;
    try {
      const img = await sampleImage(13, { layers: 2 });
      loop.addImage('held/joined', 'v1', img);
      const jref = `${loop.host}/held/joined:v1`;
      const byDigest = `${loop.host}/held/joined@${img.manifestDigest}`;
      // The layer blobs wait, so the fast path's pull is still running when the user's pull comes.
      loop.faults.hold = { path: new RegExp(`/blobs/(${img.layers.map((l) => l.digest).join('|')})$`), until: new Promise<void>((r) => (release = r)) };
      const prepared = statusOf(client.prepare('join/50/extract-0', '', labelsFor(img, jref, 0)));
      await daemon.waitLog((l) => l.msg === 'pull started' && l.image === byDigest);
      const mine = api.pull(byDigest);
      await daemon.waitLog((l) => l.msg === 'joined a running pull' && l.image === byDigest);
      release();
      const [pulled, status] = await Promise.all([mine, prepared]);
      expect(status).toBe('ALREADY_EXISTS');
      // One pull served both, and the record it left is the user's: never let go by gc.
      expect(daemon.logs.filter((l) => l.msg === 'pull started' && l.image === byDigest)).toHaveLength(1);
      expect(pulled.image.heldFor).toBeUndefined();
      expect((await api.listImages()).find((i) => i.name === byDigest)?.heldFor).toBeUndefined();
    } finally {
      release();
      await loop.close();
    }
  });
});
