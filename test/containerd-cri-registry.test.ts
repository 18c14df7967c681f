// CRI PullImage through fastpulld's fast path, counted at the registry: the project's loopback
// registry logs every request (User-Agent, Range) and injects faults, so these tests see who fetched
// what. fastpulld runs with 64 KiB ranges and every layer is larger than that, so a layer fastpull
// fetched shows as ranged GETs, and one containerd fetched as a whole GET (containerd never splits).
// Checked: every layer served to fastpull in ranges and none to containerd; a second PullImage
// fetches no layer; a layer whose ranged GETs are corrupt falls back to containerd's own fetch and
// the pull succeeds; concurrent pulls of one image (two CRI, one fastpull, one ctr in another
// namespace) have fastpull fetch each layer once.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, type Digest } from '@fastpull/core';
import { type BuiltImage, diffTrees, lacks, type LoopbackRegistry, type RequestLog, startLoopbackRegistry } from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { mergedTree } from './containerd-checks.js';
import {
  ctrLocalPull,
  release,
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  startContainerd,
  waitForSnapshotter,
  type CriImages,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { logsSettled, snapshotsClient } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const CHUNK = 64 * 1024;
/** Incompressible bytes added to each layer: every layer blob spans several ranges. */
const PADDING = 3 * CHUNK + 1000;
const work = tempDir('cri-registry');
const snapSocket = join(work.dir, 'snapshotter.sock');
const snapshots = snapshotsClient(snapSocket);

const reason = containerdUnavailable() ?? overlayUnavailable();
let containerd: PrivateContainerd | undefined;
// A release that is not installed or does not start fails the file: only a machine where no
// private containerd can run at all (not root, no overlayfs) skips.
if (reason === undefined)
  containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
if (reason) console.warn(`skipping the CRI fast-path registry tests: ${reason}`);

const isFastpull = (q: RequestLog): boolean => q.userAgent?.startsWith('fastpull/') === true;
const blobGets = (registry: LoopbackRegistry, digest: Digest): RequestLog[] =>
  registry.stats.requests.filter((q) => q.method === 'GET' && q.path.endsWith(`/blobs/${digest}`));

/** The byte ranges of `gets`, sorted; throws on a GET without a Range header. */
function ranges(gets: readonly RequestLog[]): Array<[number, number]> {
  return gets
    .map((q): [number, number] => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(q.range ?? '');
      if (!m) throw new Error(`GET ${q.path} without a byte range (Range: ${q.range})`);
      return [Number(m[1]), Number(m[2])];
    })
    .sort((a, b) => a[0] - b[0]);
}

describe.skipIf(lacks('containerd', reason))(`CRI PullImage through the fast path, counted at the registry (containerd ${release.name})`, () => {
  let registry: LoopbackRegistry;
  let daemon: RunningDaemon;
  let api: FastpullClient;
  let cri: CriImages;

  beforeAll(async () => {
    registry = await startLoopbackRegistry();
    daemon = startDaemon([
      '--socket',
      join(work.dir, 'fastpulld.sock'),
      '--snapshotter-socket',
      snapSocket,
      '--root',
      join(work.dir, 'fastpull-root'),
      '--chunk-size',
      '64KiB',
      '--log-level',
      'debug',
    ]);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    api = new FastpullClient(join(work.dir, 'fastpulld.sock'));
    await waitForSnapshotter(containerd!);
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
    snapshots.close();
    await api?.close();
    await containerd?.stop();
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGTERM');
      await daemon.exited;
    }
    await registry?.close();
    work.cleanup();
  });

  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };

  /** Builds a padded busybox image and serves it as `cri/<name>:v1`. */
  const serve = async (name: string, seed: number): Promise<{ image: BuiltImage; ref: string; chains: Digest[] }> => {
    const image = await busyboxImage({ padding: PADDING, seed });
    for (const l of image.layers) expect(l.size).toBeGreaterThan(3 * CHUNK);
    registry.addImage(`cri/${name}`, 'v1', image);
    return { image, ref: `${registry.host}/cri/${name}:v1`, chains: chainIDs(image.layers.map((l) => l.diffID)) };
  };

  /** Adjacent ranges of CHUNK bytes that cover a blob of `size` bytes once. */
  const chunks = (size: number): Array<[number, number]> => {
    const out: Array<[number, number]> = [];
    for (let start = 0; start < size; start += CHUNK) out.push([start, Math.min(size, start + CHUNK) - 1]);
    return out;
  };

  it('serves every layer to fastpull in ranges and none to containerd; a second PullImage fetches no layer', async () => {
    const { image, ref, chains } = await serve('ranged', 1);
    registry.stats.reset();
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    expect(await cri.imageStatus(ref)).toMatchObject({ id: image.configDigest, repoTags: [ref] });
    await logsSettled(daemon, snapshots);
    expect(daemon.logs.filter((l) => l.msg === 'layer recorded for containerd').map((l) => l.target)).toEqual(chains);

    for (const layer of image.layers) {
      const gets = blobGets(registry, layer.digest);
      expect(
        gets.filter((q) => !isFastpull(q)),
        `containerd's GETs of ${layer.digest}`,
      ).toEqual([]);
      expect(gets.every((q) => q.status === 206)).toBe(true);
      expect(ranges(gets)).toEqual(chunks(layer.size));
      expect(registry.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    }
    // containerd itself fetched the manifest and the config, nothing else.
    const theirs = registry.stats.requests.filter((q) => !isFastpull(q) && q.method === 'GET' && q.path.includes('/blobs/'));
    expect(theirs.map((q) => q.path)).toEqual([`/v2/cri/ranged/blobs/${image.configDigest}`]);

    // The first pull's log line comes through a pipe after containerd's answer: wait for it, so
    // that only what the second PullImage did counts below.
    await daemon.waitLog((l) => l.event === 'pull' && l.image === `${registry.host}/cri/ranged@${image.manifestDigest}`);
    registry.stats.reset();
    const logsBefore = daemon.logs.length;
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    const again = registry.stats.requests.filter((q) => q.path.includes('/blobs/'));
    expect(again.filter((q) => image.layers.some((l) => q.path.endsWith(l.digest)))).toEqual([]);
    await logsSettled(daemon, snapshots);
    expect(daemon.logs.slice(logsBefore).filter((l) => l.event === 'pull' || l.msg === 'layer recorded for containerd')).toEqual([]);
  });

  it("falls back to containerd's own fetch for a layer whose ranged GETs come corrupt: the pull succeeds, the corrupt bytes are never committed", async () => {
    const { image, ref, chains } = await serve('faulty', 2);
    const bad = image.layers[1]!;
    registry.stats.reset();
    registry.faults.corruptRangedBlob = new Set([bad.digest]);
    try {
      expect(await cri.pullImage(ref)).toBe(image.configDigest);
    } finally {
      registry.faults.corruptRangedBlob = undefined;
    }
    await logsSettled(daemon, snapshots);
    const failed = daemon.logs.filter((l) => l.msg === 'fast path failed; containerd unpacks the layer itself');
    expect(failed.map((l) => l.target)).toContain(chains[1]);
    // fastpull asked for the layer in ranges (and got a corrupt copy); containerd then fetched it whole, intact.
    const gets = blobGets(registry, bad.digest);
    expect(gets.filter(isFastpull).length).toBeGreaterThan(0);
    expect(gets.filter(isFastpull).every((q) => q.range !== undefined)).toBe(true);
    const theirs = gets.filter((q) => !isFastpull(q));
    expect(theirs.map((q) => [q.range, q.status, q.bytesSent])).toEqual([[undefined, 200, bad.size]]);
    // fastpull committed no snapshot of the layer it could not verify (layers it verified may be
    // committed: each is a directory of its own, and the top one may then be answered over
    // containerd's own copy of the failed layer).
    expect((await api.listSnapshots()).map((s) => s.chainID)).not.toContain(chains[1]);

    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-cri-fallback-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
    expect(diffTrees(image.expectedTree(), await mergedTree(containerd!, CRI_NAMESPACE, 'fastpull', chains[2]!, work.dir))).toEqual([]);
  });

  it('fetches each layer once for two PullImage calls of one image at once (by tag and by digest), with a fastpull pull and a ctr pull in another namespace beside them', async () => {
    const { image, ref, chains } = await serve('together', 3);
    const byDigest = `${registry.host}/cri/together@${image.manifestDigest}`;
    registry.stats.reset();
    const logsBefore = daemon.logs.length;
    // CRI pulls into k8s.io only; `ctr` pulls into another namespace through the normal path
    // (containerd downloads every layer itself there), at the same time.
    const [a, b, c, d] = await Promise.all([
      cri.pullImage(ref),
      cri.pullImage(byDigest),
      api.pull(ref),
      containerd!.ctr(['images', 'pull', ...ctrLocalPull(), '--plain-http', '--snapshotter', 'fastpull', ref], { namespace: 'other' }),
    ]);
    expect([a, b]).toEqual([image.configDigest, image.configDigest]);
    expect(c.image.manifest.digest).toBe(image.manifestDigest);
    expect(d.status, d.stderr).toBe(0);
    // Both CRI pulls were answered by the fast path (containerd serializes their Prepares: the
    // second finds the first's snapshots), not from the blobs ctr's pull brought.
    await logsSettled(daemon, snapshots);
    const since = daemon.logs.slice(logsBefore);
    expect(since.filter((l) => l.msg === 'fast path failed; containerd unpacks the layer itself')).toEqual([]);
    expect(since.filter((l) => l.msg === 'layer recorded for containerd').map((l) => l.target)).toEqual(chains);
    for (const layer of image.layers) {
      const gets = blobGets(registry, layer.digest);
      // fastpull's ranges cover the layer once, for all its callers; containerd fetched it once, whole, for ctr's namespace.
      expect(ranges(gets.filter(isFastpull)), `fastpull's ranges of ${layer.digest}`).toEqual(chunks(layer.size));
      expect(gets.filter((q) => !isFastpull(q)).map((q) => [q.range, q.status, q.bytesSent])).toEqual([[undefined, 200, layer.size]]);
      expect(registry.stats.blobBytesServed(layer.digest)).toBe(2 * layer.size);
    }
    expect((await cri.imageStatus(ref))?.id).toBe(image.configDigest);
    expect((await cri.imageStatus(byDigest))?.id).toBe(image.configDigest);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-cri-together-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
  });
});
