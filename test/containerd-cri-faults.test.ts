// Faults on kubelet's path: CRI PullImage on a private containerd whose snapshotter is fastpulld,
// against the project's loopback registry (request logs, stalls, auth). fastpulld killed with
// SIGKILL while containerd's Prepare of a layer waits for its pull (the layer stalled at the
// registry); PullImage while fastpulld is down; a registry that wants credentials, which kubelet
// sends to containerd and fastpulld reads from its own Docker config; a multi-platform index; an
// image of 128 layers, whose container root is an overlay of 128 lower directories. Each release
// answers the faults as asserted here: PullImage fails UNAVAILABLE and leaves no image, and the
// next one, with fastpulld back, takes the fast path.
import { existsSync, mkdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, hostPlatform, openStore, type Digest, type Platform } from '@fastpull/core';
import {
  buildImage,
  buildIndex,
  type BuiltImage,
  lacks,
  type LayerEntry,
  type LoopbackRegistry,
  type RequestLog,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { rootOverlay, waitUntil } from './containerd-checks.js';
import {
  release,
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  isProbeRecord,
  startContainerd,
  waitForSnapshotter,
  type CriAuth,
  type CriImages,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient, type SnapshotInfo } from './snapshotter-client.js';
import { layerTree, verifyStore } from './store-verify.js';

const CRI_NAMESPACE = 'k8s.io';
const FALLBACK = 'fast path failed; containerd unpacks the layer itself';
const RECORDED = 'layer recorded for containerd';
const WAITING = 'waiting for the pull to bring the layer';
const work = tempDir('cri-faults');
const snapSocket = join(work.dir, 'snapshotter.sock');
const root = join(work.dir, 'fastpull-root');

const reason = containerdUnavailable() ?? overlayUnavailable();
let containerd: PrivateContainerd | undefined;
// A release that is not installed or does not start fails the file: only a machine where no
// private containerd can run at all (not root, no overlayfs) skips.
if (reason === undefined)
  containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
if (reason) console.warn(`skipping the CRI fault tests: ${reason}`);

const isFastpull = (q: RequestLog): boolean => q.userAgent?.startsWith('fastpull/') === true;
const layerGets = (registry: LoopbackRegistry, image: BuiltImage): RequestLog[] =>
  registry.stats.requests.filter((q) => q.method === 'GET' && image.layers.some((l) => q.path.endsWith(`/blobs/${l.digest}`)));
const chainsOf = (image: BuiltImage): Digest[] => chainIDs(image.layers.map((l) => l.diffID));
/** The tree each plain layer's snapshot holds (its own entries: no whiteout or opaque directory to lay out). */
const plainLayerTrees = (image: BuiltImage) =>
  new Map(
    chainsOf(image)
      .map((c, i) => [c, image.layers[i]!] as const)
      .filter(([, l]) => !l.tarEntries.some((e) => e.type === 'whiteout' || e.type === 'opaque'))
      .map(([c, l]) => [c, layerTree(l)] as const),
  );

describe.skipIf(lacks('containerd', reason))(`faults on kubelet's pull path (containerd ${release.name})`, () => {
  let registry: LoopbackRegistry;
  let daemon: RunningDaemon | undefined;
  let cri: CriImages;
  // fastpulld's Docker config: none, unless a test gives it credentials.
  const noCredentials = join(work.dir, 'docker-none');
  const daemonArgs = ['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug'];
  const up = (): boolean => daemon !== undefined && daemon.proc.exitCode === null && daemon.proc.signalCode === null;
  /** Starts fastpulld (stopping a running one) with `dockerConfig` as its DOCKER_CONFIG; waits until containerd reaches it. */
  const startFastpulld = async (dockerConfig = noCredentials): Promise<RunningDaemon> => {
    await stopDaemon(daemon);
    daemon = await serveDaemon(daemonArgs, { env: { DOCKER_CONFIG: dockerConfig } });
    await waitForSnapshotter(containerd!);
    return daemon;
  };

  beforeAll(async () => {
    mkdirSync(noCredentials, { recursive: true });
    registry = await startLoopbackRegistry();
    await startFastpulld();
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
    await containerd?.stop();
    await stopDaemon(daemon);
    await registry?.close();
    work.cleanup();
  });

  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };
  /** fastpulld's snapshot records (probe snapshots left out). */
  const records = async (): Promise<SnapshotInfo[]> => {
    const client = snapshotsClient(snapSocket);
    try {
      return (await client.list()).filter((r) => !isProbeRecord(r.name));
    } finally {
      client.close();
    }
  };
  /** What PullImage fails with (the gRPC status kubelet gets); fails the test when it succeeds. */
  const pullFailure = async (ref: string, auth?: CriAuth): Promise<{ code: grpc.status; details: string }> => {
    try {
      await cri.pullImage(ref, auth);
    } catch (e) {
      const err = e as grpc.ServiceError;
      return { code: err.code, details: err.details };
    }
    throw new Error(`PullImage ${ref} succeeded`);
  };
  /** containerd's content store holds none of `image`'s layer blobs: it downloaded none. */
  const noLayerBlobs = async (image: BuiltImage): Promise<void> => {
    const content = await ctr(['content', 'ls', '-q']);
    for (const l of image.layers) expect(content, `containerd's content store holds layer ${l.digest}`).not.toContain(l.digest);
  };
  /** The fast path answered every layer of `image` since log line `from`: recorded in order, none fell back. */
  const fastPathTaken = async (image: BuiltImage, from: number): Promise<void> => {
    const chains = chainsOf(image);
    // fastpulld's log lines come through a pipe and may land after containerd's answer.
    await daemon!.waitLog((l) => l.msg === RECORDED && l.target === chains.at(-1));
    const since = daemon!.logs.slice(from);
    expect(since.filter((l) => l.msg === FALLBACK)).toEqual([]);
    expect(since.filter((l) => l.msg === RECORDED).map((l) => l.target)).toEqual(chains);
    await noLayerBlobs(image);
  };

  it("SIGKILL of fastpulld while containerd's Prepare waits for its pull: PullImage fails UNAVAILABLE, nothing half-made stays, and after a restart the next PullImage takes the fast path", async () => {
    const image = await busyboxImage({ padding: 256 * 1024, seed: 11 });
    const chains = chainsOf(image);
    registry.addImage('faults/killed', 'v1', image);
    const ref = `${registry.host}/faults/killed:v1`;
    const top = image.layers.at(-1)!;
    // Every GET of the top layer stalls after its first bytes (re-issued ranges too): the pull
    // cannot finish, so containerd's Prepare of the top layer waits on it.
    registry.faults.stallAfter = { path: new RegExp(`/blobs/${top.digest}$`), bytes: 4096, times: Number.MAX_SAFE_INTEGER };
    const killed = daemon!;
    const from = killed.logs.length;
    const pulling = pullFailure(ref);
    try {
      await killed.waitLog((l) => l.msg === WAITING && l.target === chains[2]);
      expect(await waitUntil(() => registry.stats.blobBytesServed(top.digest) > 0)).toBe(true);
      // Both lower layers were answered from the pull before: containerd holds them as committed snapshots of its pull.
      expect(
        killed.logs
          .slice(from)
          .filter((l) => l.msg === RECORDED)
          .map((l) => l.target),
      ).toEqual(chains.slice(0, 2));
      killed.proc.kill('SIGKILL');
      await killed.exited;
    } finally {
      registry.faults.stallAfter = undefined;
    }
    const err = await pulling;

    // Every release: the Prepare's connection broke, containerd's unpack fails and PullImage with
    // it; kubelet gets UNAVAILABLE naming the layer (and retries the pull with back-off).
    expect(err.code, err.details).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toContain(`failed to pull and unpack image "${ref}"`);
    expect(err.details).toMatch(new RegExp(`failed to prepare extraction snapshot "extract-[^"]* ${chains[2]}": `));
    // gRPC's words for the broken connection (1.6's older gRPC says it its way), and 1.x's errdefs suffix.
    expect(err.details).toMatch(
      release.name === '1.6' ? /: transport is closing: unavailable$/ : /: error reading from server: (EOF|.*connection reset by peer)(: unavailable)?$/,
    );
    expect(err.details.endsWith(': unavailable')).toBe(release.major === 1);
    expect(await cri.imageStatus(ref)).toBeUndefined();
    expect(await ctr(['images', 'ls', '-q'])).not.toContain(ref);

    // While it is dead (its socket file left behind, nobody answering) kubelet's retry fails the same way.
    const again = await pullFailure(ref);
    expect(again.code, again.details).toBe(grpc.status.UNAVAILABLE);
    expect(again.details).toMatch(/failed to (stat snapshot|prepare extraction snapshot)/);
    expect(await cri.imageStatus(ref)).toBeUndefined();

    // fastpull's store as the kill left it: what is committed is whole and as the layers say (the
    // top layer never committed); what the dead pull left (its download, active snapshot and lease)
    // is out of sight.
    const report = await verifyStore(root, { snapshotTrees: plainLayerTrees(image) });
    expect(report.problems).toEqual([]);
    expect(report.treesCompared).toContain(chains[0]);
    const store = openStore(root);
    expect(await store.snapshots.isCommitted(chains[2]!)).toBe(false);

    await startFastpulld();
    // No active record of the killed pull; the committed ones borrow the two verified layers only.
    const left = await records();
    expect(left.filter((r) => r.kind !== 'COMMITTED')).toEqual([]);
    for (const r of left) expect(chains.slice(0, 2)).toContain(r.labels['containerd.io/snapshot.ref']);

    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    // The top layer from a new pull; the lower ones from the records or the store (as containerd's
    // collection left them); none by containerd itself.
    await daemon!.waitLog((l) => l.msg === RECORDED && l.target === chains[2] && l.how === 'pulled');
    await daemon!.waitLog((l) => l.event === 'pull' && l.image === `${registry.host}/faults/killed@${image.manifestDigest}` && l.result === 'ok');
    expect(daemon!.logs.filter((l) => l.msg === FALLBACK)).toEqual([]);
    for (const l of daemon!.logs.filter((l) => l.msg === RECORDED)) expect(chains).toContain(l.target);
    await noLayerBlobs(image);
    expect((await cri.imageStatus(ref))?.id).toBe(image.configDigest);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-faults-kill-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);

    // Once containerd's collection has removed the container's snapshot, fastpull holds exactly
    // the image's three layers, as containerd lists them.
    expect(await waitUntil(async () => (await records()).every((r) => r.kind === 'COMMITTED'))).toBe(true);
    const final = await records();
    expect(final.map((r) => r.labels['containerd.io/snapshot.ref']).sort()).toEqual([...chains].sort());
    const listed = await ctr(['snapshots', '--snapshotter', 'fastpull', 'ls']);
    for (const c of chains) expect(listed).toMatch(new RegExp(`^${c}\\s.*Committed`, 'm'));
    expect((await verifyStore(root, { snapshotTrees: plainLayerTrees(image) })).problems).toEqual([]);
  });

  it('PullImage while fastpulld is down fails UNAVAILABLE and leaves nothing; with fastpulld started, it takes the fast path', async () => {
    const image = await busyboxImage({ padding: 3000, seed: 12 });
    registry.addImage('faults/down', 'v1', image);
    const ref = `${registry.host}/faults/down:v1`;
    if (!up()) await startFastpulld();
    await stopDaemon(daemon);
    // A stopped fastpulld removes its socket: containerd's dial finds nothing there.
    expect(existsSync(snapSocket)).toBe(false);
    registry.stats.reset();

    const err = await pullFailure(ref);
    // Every release fails the unpack at the first layer's Prepare, and kubelet gets UNAVAILABLE
    // (the text after the snapshot key is gRPC's: see docs/containerd.md).
    expect(err.code, err.details).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toContain(`failed to pull and unpack image "${ref}"`);
    expect(err.details).toMatch(new RegExp(`failed to prepare extraction snapshot "extract-[^"]* ${chainsOf(image)[0]}": `));
    // 1.7 and 2.x name the socket they could not dial; 1.6 may say only `connection closed`.
    if (release.name !== '1.6') expect(err.details).toContain(`dial unix://${snapSocket}: timeout`);
    expect(err.details.endsWith(': unavailable')).toBe(release.major === 1);
    expect(await cri.imageStatus(ref)).toBeUndefined();
    expect(await ctr(['images', 'ls', '-q'])).not.toContain(ref);
    // containerd fetches a layer only to apply it, after its Prepare: none was fetched.
    expect(layerGets(registry, image)).toEqual([]);
    await noLayerBlobs(image);

    const d = await startFastpulld();
    expect((await records()).filter((r) => r.kind !== 'COMMITTED')).toEqual([]);
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    await fastPathTaken(image, 0);
    expect(d.logs.filter((l) => l.msg === RECORDED)[0]).toMatchObject({ how: 'pulled' });
    expect(layerGets(registry, image).every(isFastpull)).toBe(true);
    expect((await cri.imageStatus(ref))?.id).toBe(image.configDigest);
  });

  it("a registry that wants credentials: kubelet's go to containerd, fastpulld uses its own Docker config; without them it falls back cleanly and the pull succeeds", async () => {
    const secret: CriAuth = { username: 'kube', password: 'pull-secret' };
    const authRegistry = await startLoopbackRegistry({ auth: { type: 'bearer', ...secret } });
    try {
      const plain = await busyboxImage({ padding: 3000, seed: 13 });
      authRegistry.addImage('faults/private', 'v1', plain);
      const plainRef = `${authRegistry.host}/faults/private:v1`;
      const chains = chainsOf(plain);

      // fastpulld without credentials: its pull is refused, every layer falls back, and containerd
      // downloads each one with the credentials kubelet sent.
      await startFastpulld(noCredentials);
      let from = daemon!.logs.length;
      expect(await cri.pullImage(plainRef, secret)).toBe(plain.configDigest);
      await daemon!.waitLog((l) => l.msg === FALLBACK && l.target === chains[2]);
      let since = daemon!.logs.slice(from);
      expect(since.filter((l) => l.msg === RECORDED)).toEqual([]);
      expect(since.filter((l) => l.msg === FALLBACK).map((l) => [l.target, l.code])).toEqual(chains.map((c) => [c, 'UNAUTHORIZED']));
      const gets = layerGets(authRegistry, plain);
      expect(gets.filter(isFastpull)).toEqual([]);
      const whole = gets.filter((q) => q.status === 200);
      expect(whole.map((q) => [q.path.split('/').at(-1), q.authorization, q.range]).sort()).toEqual(
        plain.layers.map((l) => [l.digest, true, undefined]).sort(),
      );
      // Each layer is containerd's own snapshot in fastpull's records; fastpull's store took none.
      const store = openStore(root);
      for (const c of chains) expect(await store.snapshots.isCommitted(c)).toBe(false);
      const own = (await records()).filter((r) => chains.includes(r.labels['containerd.io/snapshot.ref'] as Digest));
      expect(own.map((r) => r.name.startsWith(`${CRI_NAMESPACE}/`))).toEqual([true, true, true]);
      expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', plainRef, `fastpull-faults-auth-${process.pid}`, ...BUSYBOX_PROBE])).toBe(
        BUSYBOX_PROBE_OUTPUT,
      );

      // fastpulld with credentials for the registry in its Docker config.
      const withCredentials = join(work.dir, 'docker-creds');
      mkdirSync(withCredentials, { recursive: true });
      writeFileSync(
        join(withCredentials, 'config.json'),
        JSON.stringify({ auths: { [authRegistry.host]: { auth: Buffer.from(`${secret.username}:${secret.password}`).toString('base64') } } }),
      );
      await startFastpulld(withCredentials);
      const image = await busyboxImage({ padding: 3000, seed: 14 });
      authRegistry.addImage('faults/private2', 'v1', image);
      const ref = `${authRegistry.host}/faults/private2:v1`;

      // Without kubelet's credentials containerd cannot resolve the image: fastpulld's are never asked.
      from = daemon!.logs.length;
      const refused = await pullFailure(ref);
      expect(refused.code, refused.details).toBe(grpc.status.UNKNOWN);
      expect(refused.details).toMatch(/failed to authorize: failed to fetch anonymous token: unexpected status.*401 Unauthorized/);
      expect(daemon!.logs.slice(from).filter((l) => l.event === 'snapshot' || l.event === 'pull')).toEqual([]);

      authRegistry.stats.reset();
      from = daemon!.logs.length;
      expect(await cri.pullImage(ref, secret)).toBe(image.configDigest);
      await fastPathTaken(image, from);
      await daemon!.waitLog((l) => l.event === 'pull' && l.image === `${authRegistry.host}/faults/private2@${image.manifestDigest}`);
      since = daemon!.logs.slice(from);
      expect(since.filter((l) => l.event === 'pull')).toMatchObject([{ result: 'ok', image: `${authRegistry.host}/faults/private2@${image.manifestDigest}` }]);
      // fastpull fetched every layer with its credentials; containerd fetched none, and its
      // manifest and config requests carried kubelet's.
      const layers = layerGets(authRegistry, image);
      expect(layers.length).toBeGreaterThan(0);
      expect(layers.every((q) => isFastpull(q) && q.authorization && q.status < 300)).toBe(true);
      const theirs = authRegistry.stats.requests.filter((q) => !isFastpull(q) && q.path.startsWith('/v2/faults/private2/') && q.status < 300);
      expect(theirs.map((q) => q.path.split('/').at(-1)).sort()).toEqual(expect.arrayContaining([image.configDigest]));
      expect(theirs.every((q) => q.authorization)).toBe(true);
      expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-faults-auth2-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
    } finally {
      await authRegistry.close();
    }
  });

  it("a multi-platform index: the fast path pulls this host's manifest, CRI lists the index digest, and the container runs", async () => {
    if (!up()) await startFastpulld();
    const here = hostPlatform();
    const other: Platform = here.architecture === 'arm64' ? { os: 'linux', architecture: 'amd64' } : { os: 'linux', architecture: 'arm64', variant: 'v8' };
    const mine = await busyboxImage({ padding: 3000, seed: 15, platform: here });
    const theirs = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: `${other.architecture}\n` }]], platform: other });
    // The other platform first: taking the first manifest would be wrong.
    const index = buildIndex([theirs, mine]);
    registry.addIndex('faults/multi', 'v1', index);
    const ref = `${registry.host}/faults/multi:v1`;
    registry.stats.reset();
    const from = daemon!.logs.length;

    expect(await cri.pullImage(ref)).toBe(mine.configDigest);
    await fastPathTaken(mine, from);
    await daemon!.waitLog((l) => l.event === 'pull' && l.result === 'ok' && l.image === `${registry.host}/faults/multi@${mine.manifestDigest}`);
    expect(await cri.imageStatus(ref)).toMatchObject({
      id: mine.configDigest,
      repoTags: [ref],
      repoDigests: [`${registry.host}/faults/multi@${index.digest}`],
    });
    // Nobody asked for the other platform's manifest or blobs.
    const asked = registry.stats.requests.map((q) => q.path);
    for (const d of [theirs.manifestDigest, ...theirs.blobs.keys()]) expect(asked.filter((p) => p.endsWith(d))).toEqual([]);
    const content = await ctr(['content', 'ls', '-q']);
    for (const d of [index.digest, mine.manifestDigest, mine.configDigest]) expect(content).toContain(d);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-faults-index-${process.pid}`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
  });

  it('128 layers: every one recorded from one pull, CRI lists the image, and a container runs on the overlay of 128 lower directories', async () => {
    if (!up()) await startFastpulld();
    const count = 128;
    const layers: LayerEntry[][] = [[{ type: 'file', path: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 }]];
    for (let i = 1; i < count; i++) layers.push([{ type: 'file', path: `layers/${String(i).padStart(3, '0')}`, content: `${i}\n` }]);
    const image = await buildImage({ layers });
    const chains = chainsOf(image);
    registry.addImage('faults/many', 'v1', image);
    const ref = `${registry.host}/faults/many:v1`;
    const from = daemon!.logs.length;

    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    await fastPathTaken(image, from);
    await daemon!.waitLog((l) => l.event === 'pull' && l.image === `${registry.host}/faults/many@${image.manifestDigest}`);
    expect(daemon!.logs.slice(from).filter((l) => l.event === 'pull')).toMatchObject([{ result: 'ok', layers: count }]);
    expect(await cri.imageStatus(ref)).toMatchObject({ id: image.configDigest, repoTags: [ref] });
    const recorded = (await records()).filter((r) => r.kind === 'COMMITTED' && chains.includes(r.labels['containerd.io/snapshot.ref'] as Digest));
    expect(recorded).toHaveLength(count);

    // The container's root: 128 lower directories. Named by their full paths the options would
    // be several pages long; fastpull names them by its short links, and containerd's mount code
    // shortens those to their names in the links' directory.
    const script = `ls /layers | wc -l; cat /layers/001 /layers/${count - 1}; echo ---; cat /proc/self/mountinfo`;
    const out = await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-faults-many-${process.pid}`, '/bin/busybox', 'sh', '-c', script]);
    const [files, mountinfo] = out.split('---\n');
    expect(files).toBe(`${count - 1}\n1\n${count - 1}\n`);
    const { lowerdirs } = rootOverlay(mountinfo!);
    expect(lowerdirs).toHaveLength(count);
    const links = join(root, 'snapshots', 'l');
    expect(lowerdirs.map((d) => readlinkSync(join(links, basename(d))))).toEqual([...chains].reverse().map((c) => openStore(root).snapshots.fsPath(c)));
  });
});
