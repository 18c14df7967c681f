// Real containerd's CRI plugin pulling through fastpulld's fast path, as kubelet makes it pull: a
// private containerd with `snapshotter = "fastpull"` and `disable_snapshot_annotations = false`
// gets `runtime.v1.ImageService/PullImage`; every layer's Prepare is answered from fastpull's own
// pull (ALREADY_EXISTS plus a committed record), so containerd downloads no layer blob; a container
// runs on the result; removing the image removes fastpull's records.
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs } from '@fastpull/core';
import { diffTrees, findDistributionBinary, pushImage, readTree, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { BUSYBOX_PROBE, BUSYBOX_PROBE_OUTPUT, busyboxImage, containerdUnavailable, criImages, startContainerd, waitForSnapshotter, type CriImages, type PrivateContainerd } from './containerd.js';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { mountAll, snapshotsClient, unmount, type SnapshotMount, type SnapshotsClient } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const work = tempDir('cri');
const snapSocket = join(work.dir, 'snapshotter.sock');

let reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
if (reason === undefined) {
  try {
    containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
  } catch (e) {
    reason = `a private containerd with its CRI plugin does not start here: ${(e as Error).message.split('\n')[0]}`;
  }
}
if (reason) console.warn(`skipping the CRI fast-path tests: ${reason}`);

describe.skipIf(reason !== undefined)('CRI PullImage through the fast path', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let client: SnapshotsClient;
  let cri: CriImages;
  let image: BuiltImage;
  let ref = '';
  const root = join(work.dir, 'fastpull-root');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'cri/busybox', 'v1', image);
    ref = `${registry.host}/cri/busybox:v1`;
    daemon = startDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    client = snapshotsClient(snapSocket);
    await waitForSnapshotter(containerd!);
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
    client?.close();
    await containerd?.stop();
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGTERM');
      await daemon.exited;
    }
    await registry?.stop();
    work.cleanup();
  });

  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };

  it('answers every layer from a fastpull pull: containerd downloads no layer blob, and a container runs on it', async () => {
    const imageRef = await cri.pullImage(ref);
    expect(imageRef).toMatch(/^sha256:[0-9a-f]{64}$/);

    const recorded = daemon.logs.filter((l) => l.msg === 'layer recorded for containerd');
    const chains = chainIDs(image.layers.map((l) => l.diffID));
    expect(recorded.map((l) => l.target)).toEqual(chains);
    expect(recorded[0]!.how).toBe('pulled');
    const pulls = daemon.logs.filter((l) => l.event === 'pull');
    expect(pulls).toHaveLength(1);
    expect(pulls[0]).toMatchObject({ result: 'ok', image: `${registry.host}/cri/busybox@${image.manifestDigest}` });
    const records = await client.list(['kind==committed']);
    expect(records).toHaveLength(image.layers.length);
    for (const r of records) expect(r.name.startsWith('fastpull/')).toBe(true);

    // containerd fetched the manifest and config itself, never a layer.
    const content = await ctr(['content', 'ls', '-q']);
    expect(content).toContain(image.manifestDigest);
    for (const l of image.layers) expect(content).not.toContain(l.digest);

    const id = `fastpull-cri-${process.pid}-${Date.now()}`;
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, id, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);

    // The merged tree containerd's view of the image gives is the image's, entry by entry.
    const printed = JSON.parse(await ctr(['snapshots', '--snapshotter', 'fastpull', 'view', '--mounts', 'cri-view', chains.at(-1)!])) as Array<{ Type: string; Source: string; Options?: string[] }>;
    const mounts: SnapshotMount[] = printed.map((m) => ({ type: m.Type, source: m.Source, target: '', options: m.Options ?? [] }));
    const dir = join(work.dir, 'view');
    mkdirSync(dir);
    mountAll(mounts, dir);
    try {
      expect(diffTrees(image.expectedTree(), await readTree(dir))).toEqual([]);
    } finally {
      unmount(dir);
    }
  });

  it("removing the image through CRI lets containerd's collection remove fastpull's records, never fastpull's layers", async () => {
    await cri.removeImage(ref);
    // CRI deletes the last reference synchronously, which runs containerd's collection: the backend
    // removals (child first) and Cleanup. Allow them a moment.
    const deadline = Date.now() + 20_000;
    while ((await client.list()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await client.list()).toEqual([]);
    expect(readdirSync(join(root, 'snapshots', 'containerd'))).toEqual(['.lock']);
    // fastpull's own snapshots of the layers stay: its image record (the fast path's pull) holds them.
    const committed = readdirSync(join(root, 'snapshots', 'committed'));
    for (const c of chainIDs(image.layers.map((l) => l.diffID))) expect(committed).toContain(c.slice('sha256:'.length));
  });
});
