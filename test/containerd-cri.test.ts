// Real containerd's CRI plugin pulling through fastpulld's fast path, as kubelet makes it pull: a
// private containerd with `snapshotter = "fastpull"` and `disable_snapshot_annotations = false`
// gets `runtime.v1.ImageService/PullImage`; every layer's Prepare is answered from fastpull's own
// pull (ALREADY_EXISTS plus a committed record), so containerd downloads no layer blob and CRI lists
// the image; a container runs on fastpull's layer directories and writes only to its own upper
// directory; the merged tree equals, entry by entry, the normal path's and containerd's overlayfs
// snapshotter's; removing one of two images that share layers lets containerd's collection remove
// that image's records only, and fastpull's gc then frees that image's layers and nothing a
// containerd record still borrows.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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
import { FastpullClient } from '@fastpull/daemon';
import { fingerprints, mergedTree, rootOverlay, waitUntil } from './containerd-checks.js';
import {
  criPull,
  ctrLocalPull,
  release,
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  isProbeRecord,
  startContainerd,
  waitForSnapshotter,
  type CriImages,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient, type SnapshotsClient } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const work = tempDir('cri');
const snapSocket = join(work.dir, 'snapshotter.sock');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
// A release that is not installed or does not start fails the file: only a machine where no
// private containerd can run at all (not root, no overlayfs) skips.
if (reason === undefined)
  containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
if (reason) console.warn(`skipping the CRI fast-path tests: ${reason}`);

/** Record name -> its directory under `<root>/snapshots/containerd` (from each record.json). */
function recordDirs(root: string): Map<string, string> {
  const dir = join(root, 'snapshots', 'containerd');
  const out = new Map<string, string>();
  for (const id of readdirSync(dir)) {
    if (id.startsWith('.')) continue;
    out.set((JSON.parse(readFileSync(join(dir, id, 'record.json'), 'utf8')) as { name: string }).name, id);
  }
  return out;
}

describe.skipIf(lacks('containerd', reason))(`CRI PullImage through the fast path (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let client: SnapshotsClient;
  let api: FastpullClient;
  let cri: CriImages;
  let image: BuiltImage;
  let ref = '';
  let chains: string[] = [];
  const root = join(work.dir, 'fastpull-root');
  const committedDir = (chain: string) => join(root, 'snapshots', 'committed', chain.slice('sha256:'.length));

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    chains = chainIDs(image.layers.map((l) => l.diffID));
    await pushImage(registry.url, 'cri/busybox', 'v1', image);
    ref = `${registry.host}/cri/busybox:v1`;
    daemon = startDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    client = snapshotsClient(snapSocket);
    api = new FastpullClient(join(work.dir, 'fastpulld.sock'));
    await waitForSnapshotter(containerd!);
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
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

  const ctr = async (args: string[], namespace = CRI_NAMESPACE): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };

  it('answers every layer from a fastpull pull: containerd downloads no layer blob, and CRI lists the image', async () => {
    const imageRef = await cri.pullImage(ref);
    expect(imageRef).toBe(image.configDigest);
    // 2.1+: the pull took the path this run is for (containerd logs it, at debug level, before answering).
    const viaTransfer = containerd!.log().includes('using transfer service');
    expect(viaTransfer).toBe(release.transfer && criPull === 'transfer');
    // fastpulld's log lines come through a pipe and may land after containerd's answer: wait for the
    // last ones this pull makes (its top layer's record, the pull's own line) before reading them.
    await daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.target === chains.at(-1));
    await daemon.waitLog((l) => l.event === 'pull' && l.image === `${registry.host}/cri/busybox@${image.manifestDigest}`);

    const status = await cri.imageStatus(ref);
    expect(status).toMatchObject({ id: image.configDigest, repoTags: [ref], repoDigests: [`${registry.host}/cri/busybox@${image.manifestDigest}`] });
    expect(status!.size).toBe(image.manifest.byteLength + image.config.byteLength + image.layers.reduce((a, l) => a + l.size, 0));

    // Each layer's Prepare was answered ALREADY_EXISTS from a record of fastpull's pull.
    const recorded = daemon.logs.filter((l) => l.msg === 'layer recorded for containerd');
    expect(recorded.map((l) => l.target)).toEqual(chains);
    expect(recorded[0]!.how).toBe('pulled');
    await expect
      .poll(() => daemon.logs.filter((l) => l.method === 'Snapshots.Prepare' && l.code === 'ALREADY_EXISTS').length, { timeout: 120_000 })
      .toBe(image.layers.length);
    expect(daemon.logs.filter((l) => l.msg === 'fast path failed; containerd unpacks the layer itself')).toEqual([]);
    const pulls = daemon.logs.filter((l) => l.event === 'pull');
    expect(pulls).toHaveLength(1);
    expect(pulls[0]).toMatchObject({ result: 'ok', image: `${registry.host}/cri/busybox@${image.manifestDigest}` });
    const records = await client.list(['kind==committed']);
    expect(records).toHaveLength(image.layers.length);
    for (const r of records) expect(r.name.startsWith('fastpull/')).toBe(true);
    // No snapshot containerd wrote a layer into: no active record is left, none was committed by it
    // (the start-up probe's record may be, see isProbeRecord).
    expect((await client.list(['kind==active'])).filter((r) => !isProbeRecord(r.name))).toEqual([]);

    // containerd fetched the manifest and config itself, never a layer.
    const content = await ctr(['content', 'ls', '-q']);
    expect(content).toContain(image.manifestDigest);
    expect(content).toContain(image.configDigest);
    for (const l of image.layers) expect(content).not.toContain(l.digest);
  });

  it("runs a container on fastpull's layer directories: every layer's files, whiteouts, opaque dirs; writes reach only its upper dir", async () => {
    const before = await fingerprints(join(root, 'snapshots', 'committed'));
    expect(Object.keys(before).sort()).toEqual(chains.map((c) => c.slice('sha256:'.length)).sort());

    const id = `fastpull-cri-write-${process.pid}-${Date.now()}`;
    const script = [
      'cat /etc/one /etc/two /etc/three /etc/three-link; ls /del; ls /opq',
      'test -e /del/gone && echo gone-present || echo gone-absent',
      'echo changed > /etc/one; rm /etc/two /del/kept; echo new > /opq/new; mkdir /made; echo made > /made/f',
      'echo ---; cat /etc/one; ls /del /opq; echo ---; cat /proc/self/mountinfo',
    ].join('; ');
    const out = await ctr(['run', '--snapshotter', 'fastpull', ref, id, '/bin/busybox', 'sh', '-c', script]);
    const [probe, after, mountinfo] = out.split('---\n');
    expect(probe).toBe(BUSYBOX_PROBE_OUTPUT);
    expect(after).toBe('changed\n/del:\n\n/opq:\nb\nnew\n');

    // The container's root is an overlay over fastpull's own layer directories, top layer first.
    const overlay = rootOverlay(mountinfo!);
    expect(overlay.lowerdirs).toEqual([...chains].reverse().map((c) => join(committedDir(c), 'fs')));
    expect(overlay.upperdir?.startsWith(join(root, 'snapshots', 'containerd') + '/')).toBe(true);

    // What it wrote is in its upper directory (whiteouts for the deletions), and only there.
    const upper = await readTree(overlay.upperdir!);
    expect(upper.get('etc/one')).toMatchObject({ type: 'file', content: Buffer.from('changed\n') });
    expect(upper.get('etc/two')).toMatchObject({ type: 'special', kind: 'char-device', rdev: 0 });
    expect(upper.get('del/kept')).toMatchObject({ type: 'special', kind: 'char-device', rdev: 0 });
    expect(upper.get('opq/new')).toMatchObject({ type: 'file', content: Buffer.from('new\n') });
    expect(upper.get('made/f')).toMatchObject({ type: 'file', content: Buffer.from('made\n') });
    expect(await fingerprints(join(root, 'snapshots', 'committed'))).toEqual(before);

    // Removing the container removes its snapshot (from fastpull at containerd's next collection);
    // the next container sees the image as it was.
    await ctr(['containers', 'rm', id]);
    expect(await waitUntil(() => !existsSync(overlay.upperdir!))).toBe(true);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `${id}-again`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
    expect(await fingerprints(join(root, 'snapshots', 'committed'))).toEqual(before);
  });

  it("gives the same merged tree as the normal path and as containerd's overlayfs snapshotter, entry by entry", async () => {
    // ctr pulls carry no CRI labels: in another namespace containerd downloads and applies every
    // layer itself, into fastpull (the normal path) and into its own overlayfs snapshotter.
    const ns = 'parity';
    const applied = async () => (await client.list(['kind==committed'])).filter((r) => r.name.startsWith(`${ns}/`));
    await ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'fastpull', ref], ns);
    expect((await applied()).map((r) => r.labels['containerd.io/snapshot.ref'] ?? r.name.split('/').at(-1))).toEqual(chains);
    await ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'overlayfs', ref], ns);
    const top = chains.at(-1)!;
    const fast = await mergedTree(containerd!, CRI_NAMESPACE, 'fastpull', top, work.dir);
    const normal = await mergedTree(containerd!, ns, 'fastpull', top, work.dir);
    const overlayfs = await mergedTree(containerd!, ns, 'overlayfs', top, work.dir);
    expect(diffTrees(overlayfs, fast)).toEqual([]);
    expect(diffTrees(normal, fast)).toEqual([]);
    expect(diffTrees(image.expectedTree(), fast)).toEqual([]);
    expect(fast.has('del/gone')).toBe(false);
    expect(fast.has('opq/a')).toBe(false);

    await ctr(['images', 'rm', '--sync', ref], ns);
    expect(await waitUntil(async () => (await client.list()).every((r) => !r.name.startsWith(`${ns}/`)))).toBe(true);
  });

  // 2.x: `ctr image pull` goes through the transfer service, which labels each Prepare for a
  // snapshotter exporting enable_remote_snapshot_annotations (the shipped 2.1 file's proxy does):
  // the fast path answers it as it answers CRI.
  if (release.major === 2)
    it('2.x: ctr image pull --snapshotter fastpull (transfer service) takes the fast path: no layer blob in containerd', async () => {
      const ns = 'transfer';
      const recordsBefore = (await client.list(['kind==committed'])).length;
      const logsBefore = daemon.logs.length;
      await ctr(['images', 'pull', '--plain-http', '--snapshotter', 'fastpull', ref], ns);
      const since = () => daemon.logs.slice(logsBefore);
      // Each layer's Prepare is answered ALREADY_EXISTS: from the records CRI's pull made (the same
      // target under the same parent), so no new record.
      await expect
        .poll(() => since().filter((l) => l.method === 'Snapshots.Prepare' && l.code === 'ALREADY_EXISTS').length, { timeout: 120_000 })
        .toBe(image.layers.length);
      expect((await client.list(['kind==committed'])).length).toBe(recordsBefore);
      expect(since().filter((l) => l.msg === 'fast path failed; containerd unpacks the layer itself')).toEqual([]);
      const content = await ctr(['content', 'ls', '-q'], ns);
      expect(content).toContain(image.manifestDigest);
      for (const l of image.layers) expect(content).not.toContain(l.digest);
      expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-transfer-${process.pid}`, ...BUSYBOX_PROBE], ns)).toBe(BUSYBOX_PROBE_OUTPUT);
      await ctr(['images', 'rm', '--sync', ref], ns);
      expect(await waitUntil(async () => (await client.list(['kind==committed'])).length === recordsBefore)).toBe(true);
    });

  it("removing one of two images that share layers: containerd's collection takes its records only; fastpull's gc frees its layers and nothing a record borrows", async () => {
    // A second image over the same two lower layers, its own top.
    const other = await busyboxImage({ variant: 'b\n' });
    const otherChains = chainIDs(other.layers.map((l) => l.diffID));
    expect(otherChains.slice(0, 2)).toEqual(chains.slice(0, 2));
    await pushImage(registry.url, 'cri/busybox-b', 'v1', other);
    const otherRef = `${registry.host}/cri/busybox-b:v1`;
    await cri.pullImage(otherRef);
    const byTarget = async () => new Map((await client.list(['kind==committed'])).map((r) => [r.labels['containerd.io/snapshot.ref']!, r.name]));
    const targets = await byTarget();
    expect([...targets.keys()].sort()).toEqual([...new Set([...chains, ...otherChains])].sort());
    const dirsBefore = recordDirs(root);

    await cri.removeImage(ref);
    expect(await cri.imageStatus(ref)).toBeUndefined();
    // CRI deletes the last reference synchronously, which runs containerd's collection: the backend
    // removals (child first) and Cleanup. Allow them a moment.
    expect(await waitUntil(async () => !(await byTarget()).has(chains[2]!))).toBe(true);
    const left = await byTarget();
    expect([...left.keys()].sort()).toEqual([...otherChains].sort());
    for (const c of otherChains) expect(left.get(c)).toBe(targets.get(c));
    const dirsAfter = recordDirs(root);
    expect([...dirsAfter.keys()].sort()).toEqual(otherChains.map((c) => targets.get(c)!).sort());
    expect(existsSync(join(root, 'snapshots', 'containerd', dirsBefore.get(targets.get(chains[2]!)!)!))).toBe(false);
    // fastpull's image record of the removed image still holds its layers.
    for (const c of chains) expect(existsSync(committedDir(c))).toBe(true);

    // fastpull forgets the removed image and collects: its own top layer goes, the shared ones stay.
    const gcA = await api.removeImage(`${registry.host}/cri/busybox@${image.manifestDigest}`, { gc: true });
    expect(gcA.gc!.snapshots.map((s) => s.chainID)).toEqual([chains[2]]);
    expect(existsSync(committedDir(chains[2]!))).toBe(false);
    // With the other image's fastpull record gone too, only containerd's records hold its layers: gc keeps them all.
    const borrowed = await fingerprints(join(root, 'snapshots', 'committed'));
    const gcB = await api.removeImage(`${registry.host}/cri/busybox-b@${other.manifestDigest}`, { gc: true });
    expect(gcB.gc!.snapshots).toEqual([]);
    expect(await fingerprints(join(root, 'snapshots', 'committed'))).toEqual(borrowed);
    expect([...(await byTarget()).keys()].sort()).toEqual([...otherChains].sort());
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', otherRef, `fastpull-cri-b-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);

    // Once containerd lets go of the other image too, nothing is left for anyone.
    await cri.removeImage(otherRef);
    expect(await waitUntil(async () => (await client.list()).length === 0)).toBe(true);
    expect(readdirSync(join(root, 'snapshots', 'containerd'))).toEqual(['.lock']);
    const gcLast = await api.collectGarbage();
    expect(gcLast.snapshots.map((s) => s.chainID).sort()).toEqual([...otherChains].sort());
    expect(readdirSync(join(root, 'snapshots', 'committed')).filter((n) => !n.startsWith('.'))).toEqual([]);
  });
});
