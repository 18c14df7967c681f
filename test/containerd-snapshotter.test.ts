// Real containerd (a private instance) with fastpulld as its proxy snapshotter `fastpull`, on the
// normal path: `ctr images pull --snapshotter fastpull` makes containerd unpack every layer into
// the mounts fastpulld answers; `ctr run` runs a busybox container on them; the merged tree equals,
// entry by entry, what containerd's own overlayfs snapshotter makes of the same image; removing the
// image lets containerd's garbage collection remove fastpull's records and directories.
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs } from '@fastpull/core';
import { diffTrees, findDistributionBinary, pushImage, readTree, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { BUSYBOX_PROBE, BUSYBOX_PROBE_OUTPUT, busyboxImage, containerdUnavailable, startContainerd, waitForSnapshotter, type PrivateContainerd } from './containerd.js';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { mountAll, snapshotsClient, unmount, type SnapshotMount, type SnapshotsClient } from './snapshotter-client.js';

const work = tempDir('containerd');
const snapSocket = join(work.dir, 'snapshotter.sock');

let reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
if (reason === undefined) {
  try {
    // The proxy snapshotter is dialled lazily: containerd starts before fastpulld listens.
    containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket);
  } catch (e) {
    reason = `a private containerd does not start here: ${(e as Error).message.split('\n')[0]}`;
  }
}
if (reason) console.warn(`skipping the containerd tests: ${reason}`);

describe.skipIf(reason !== undefined)('containerd with fastpulld as its snapshotter (normal path)', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let client: SnapshotsClient;
  let image: BuiltImage;
  let ref = '';
  const root = join(work.dir, 'fastpull-root');
  let mountSeq = 0;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'ctr/busybox', 'v1', image);
    ref = `${registry.host}/ctr/busybox:v1`;
    daemon = startDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    client = snapshotsClient(snapSocket);
    // containerd dialled the socket before fastpulld listened: it reconnects with a back-off.
    await waitForSnapshotter(containerd!);
  });
  afterAll(async () => {
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
    const r = await containerd!.ctr(args);
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };

  /** The merged tree a snapshotter gives the image's top layer, read through a view containerd makes. */
  async function mergedTree(snapshotter: string): Promise<Awaited<ReturnType<typeof readTree>>> {
    const top = chainIDs(image.layers.map((l) => l.diffID)).at(-1)!;
    const key = `view-${snapshotter}-${mountSeq}`;
    // ctr prints Go's field names.
    const printed = JSON.parse(await ctr(['snapshots', '--snapshotter', snapshotter, 'view', '--mounts', key, top])) as Array<{ Type: string; Source: string; Options?: string[] }>;
    const mounts: SnapshotMount[] = printed.map((m) => ({ type: m.Type, source: m.Source, target: '', options: m.Options ?? [] }));
    const dir = join(work.dir, `mnt-${mountSeq++}`);
    mkdirSync(dir);
    mountAll(mounts, dir);
    try {
      return await readTree(dir);
    } finally {
      unmount(dir);
      // ctr made the view under a lease of its own that ended with it: a collection may have taken it already.
      const rm = await containerd!.ctr(['snapshots', '--snapshotter', snapshotter, 'rm', key]);
      if (rm.status !== 0 && !rm.stderr.includes('not found')) throw new Error(`removing view ${key}: ${rm.stderr}`);
    }
  }

  it('ctr pulls into fastpull, runs a container on it, and the tree equals the overlayfs snapshotter', async () => {
    await ctr(['images', 'pull', '--plain-http', '--snapshotter', 'fastpull', ref]);
    const committed = (await client.list(['kind==committed'])).map((i) => i.name);
    for (const chain of chainIDs(image.layers.map((l) => l.diffID))) expect(committed.some((n) => n.endsWith(`/${chain}`))).toBe(true);

    const id = `fastpull-${process.pid}-${Date.now()}`;
    const out = await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, id, ...BUSYBOX_PROBE]);
    expect(out).toBe(BUSYBOX_PROBE_OUTPUT);

    await ctr(['images', 'pull', '--plain-http', '--snapshotter', 'overlayfs', ref]);
    const viaFastpull = await mergedTree('fastpull');
    const viaOverlayfs = await mergedTree('overlayfs');
    expect(diffTrees(viaOverlayfs, viaFastpull)).toEqual([]);
    expect(diffTrees(image.expectedTree(), viaFastpull)).toEqual([]);
    expect(viaFastpull.has('del/gone')).toBe(false);
    expect(viaFastpull.has('opq/a')).toBe(false);
  });

  it("removing the image lets containerd's garbage collection remove fastpull's records and directories", async () => {
    // The image's layers (and perhaps the removed container's snapshot, which containerd forgot at
    // once but removes from the backend only at its next collection).
    const before = await client.list();
    expect(before.filter((i) => i.kind === 'COMMITTED')).toHaveLength(image.layers.length);
    await ctr(['images', 'rm', '--sync', ref]);
    // Collection runs the backend removals (child first) and Cleanup before --sync returns; allow it a moment.
    const deadline = Date.now() + 20_000;
    while ((await client.list()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await client.list()).toEqual([]);
    expect(readdirSync(join(root, 'snapshots', 'containerd'))).toEqual(['.lock']);
    expect(daemon.logs.some((l) => l.method === 'Snapshots.Remove' && Number(l.level) >= 40)).toBe(false);
  });
});
