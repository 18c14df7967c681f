// Real containerd (a private instance) with fastpulld as its proxy snapshotter `fastpull`, on the
// normal path: `ctr images pull --snapshotter fastpull` makes containerd unpack every layer into
// the mounts fastpulld answers; `ctr run` runs a busybox container on them; the merged tree equals,
// entry by entry, what containerd's own overlayfs snapshotter makes of the same image; removing the
// image lets containerd's garbage collection remove that image's records and directories, and no
// snapshot another image shares; fastpull's own gc takes nothing of containerd's.
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs } from '@fastpull/core';
import {
  type BuiltImage,
  diffTrees,
  type DistributionRegistry,
  findDistributionBinary,
  lacks,
  pushImage,
  readTree,
  startDistribution,
} from '@fastpull/core/testing';
import {
  ctrLocalPull,
  release,
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  startContainerd,
  waitForSnapshotter,
  type PrivateContainerd,
} from './containerd.js';
import { FastpullClient } from '@fastpull/daemon';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { fingerprints, waitUntil } from './containerd-checks.js';
import { logsSettled, mountAll, snapshotsClient, unmount, type SnapshotMount, type SnapshotsClient } from './snapshotter-client.js';

const work = tempDir('containerd');
const snapSocket = join(work.dir, 'snapshotter.sock');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
// The proxy snapshotter is dialled lazily: containerd starts before fastpulld listens.
// A release that is not installed or does not start fails the file: only a machine where no
// private containerd can run at all (not root, no overlayfs) skips.
if (reason === undefined) containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket);
if (reason) console.warn(`skipping the containerd tests: ${reason}`);

describe.skipIf(lacks('containerd', reason))(`containerd with fastpulld as its snapshotter (normal path) (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let client: SnapshotsClient;
  let api: FastpullClient;
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
    api = new FastpullClient(join(work.dir, 'fastpulld.sock'));
    // containerd dialled the socket before fastpulld listened: it reconnects with a back-off.
    await waitForSnapshotter(containerd!);
  });
  afterAll(async () => {
    client?.close();
    await api?.close();
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
    const printed = JSON.parse(await ctr(['snapshots', '--snapshotter', snapshotter, 'view', '--mounts', key, top])) as Array<{
      Type: string;
      Source: string;
      Options?: string[];
    }>;
    const mounts: SnapshotMount[] = printed.map((m) => ({ type: m.Type, source: m.Source, target: '', options: m.Options ?? [] }));
    const dir = join(work.dir, `mnt-${mountSeq++}`);
    mkdirSync(dir);
    mountAll(mounts, dir);
    // The view goes whatever the reading did; a failure to read is the one reported.
    const read = await readTree(dir).then(
      (tree) => ({ tree }),
      (error: unknown) => ({ error }),
    );
    unmount(dir);
    // ctr made the view under a lease of its own that ended with it: a collection may have taken it already.
    const rm = await containerd!.ctr(['snapshots', '--snapshotter', snapshotter, 'rm', key]);
    if ('error' in read) throw read.error;
    if (rm.status !== 0 && !rm.stderr.includes('not found')) throw new Error(`removing view ${key}: ${rm.stderr}`);
    return read.tree;
  }

  it('ctr pulls into fastpull, runs a container on it, and the tree equals the overlayfs snapshotter', async () => {
    await ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'fastpull', ref]);
    const committed = (await client.list(['kind==committed'])).map((i) => i.name);
    for (const chain of chainIDs(image.layers.map((l) => l.diffID))) expect(committed.some((n) => n.endsWith(`/${chain}`))).toBe(true);

    const id = `fastpull-${process.pid}-${Date.now()}`;
    const out = await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, id, ...BUSYBOX_PROBE]);
    expect(out).toBe(BUSYBOX_PROBE_OUTPUT);

    await ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'overlayfs', ref]);
    const viaFastpull = await mergedTree('fastpull');
    const viaOverlayfs = await mergedTree('overlayfs');
    expect(diffTrees(viaOverlayfs, viaFastpull)).toEqual([]);
    expect(diffTrees(image.expectedTree(), viaFastpull)).toEqual([]);
    expect(viaFastpull.has('del/gone')).toBe(false);
    expect(viaFastpull.has('opq/a')).toBe(false);
  });

  it("removing one of two images that share layers: containerd's collection takes that image's records and directories only; fastpull's gc removes none", async () => {
    // A second image over the same two lower layers, its own top: containerd applies only the top.
    const other = await busyboxImage({ variant: 'b\n' });
    const chains = chainIDs(image.layers.map((l) => l.diffID));
    const otherChains = chainIDs(other.layers.map((l) => l.diffID));
    expect(otherChains.slice(0, 2)).toEqual(chains.slice(0, 2));
    await pushImage(registry.url, 'ctr/busybox-b', 'v1', other);
    const otherRef = `${registry.host}/ctr/busybox-b:v1`;
    await ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'fastpull', otherRef]);
    const committed = async () => new Map((await client.list(['kind==committed'])).map((i) => [i.name.split('/').at(-1)!, i.name]));
    // The image's layers and the other's top (and perhaps the removed container's snapshot, which
    // containerd forgot at once but removes from the backend only at its next collection).
    const both = await committed();
    expect([...both.keys()].sort()).toEqual([...new Set([...chains, ...otherChains])].sort());
    const recordsDir = join(root, 'snapshots', 'containerd');

    await ctr(['images', 'rm', '--sync', ref]);
    // Collection runs the backend removals (child first) and Cleanup before --sync returns; allow it a moment.
    expect(await waitUntil(async () => !(await committed()).has(chains[2]!) && (await client.list()).length === otherChains.length)).toBe(true);
    const left = await committed();
    expect([...left.keys()].sort()).toEqual([...otherChains].sort());
    for (const c of otherChains) expect(left.get(c)).toBe(both.get(c));
    // One directory per record left: the removed top's directory went with its record.
    expect(readdirSync(recordsDir).filter((n) => n !== '.lock')).toHaveLength(otherChains.length);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', otherRef, `fastpull-b-${process.pid}-${Date.now()}`, ...BUSYBOX_PROBE])).toBe(
      BUSYBOX_PROBE_OUTPUT,
    );

    // fastpull's own collection: containerd's records hold directories of their own, none of its to
    // take. (First the container's snapshot leaves, at containerd's next collection.)
    expect(await waitUntil(async () => (await client.list()).length === otherChains.length)).toBe(true);
    const held = await fingerprints(recordsDir);
    const gc = await api.collectGarbage();
    expect(gc.snapshots).toEqual([]);
    expect(await fingerprints(recordsDir)).toEqual(held);
    expect([...(await committed()).keys()].sort()).toEqual([...otherChains].sort());

    await ctr(['images', 'rm', '--sync', otherRef]);
    expect(await waitUntil(async () => (await client.list()).length === 0)).toBe(true);
    expect(readdirSync(recordsDir)).toEqual(['.lock']);
    await logsSettled(daemon, client);
    expect(daemon.logs.some((l) => l.method === 'Snapshots.Remove' && Number(l.level) >= 40)).toBe(false);
  });
});
