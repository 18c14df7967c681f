// Restarts under a running container, with real containerd's CRI plugin on fastpulld's fast path:
// fastpulld stopped and started again, then containerd stopped and started again, while a container
// runs on the image's snapshots. The container keeps running and reading its files; afterwards
// the snapshots are listed as before (containerd's view and fastpull's records), and a new
// container starts, and a PullImage is answered, without pulling anything again.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import { waitUntil } from './containerd-checks.js';
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
  type CriImages,
  type CriOptions,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { logsSettled, snapshotsClient, type SnapshotInfo } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const CRI: CriOptions = { snapshotter: 'fastpull', disableSnapshotAnnotations: false };
const work = tempDir('cri-restart');
const snapSocket = join(work.dir, 'snapshotter.sock');
const containerdDir = join(work.dir, 'containerd');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
// A release that is not installed or does not start fails the file: only a machine where no
// private containerd can run at all (not root, no overlayfs) skips.
if (reason === undefined) containerd = await startContainerd(containerdDir, snapSocket, CRI);
if (reason) console.warn(`skipping the CRI restart tests: ${reason}`);

describe.skipIf(lacks('containerd', reason))(`restarts of fastpulld and of containerd under a running container (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon | undefined;
  let cri: CriImages;
  let image: BuiltImage;
  let ref = '';
  const root = join(work.dir, 'fastpull-root');
  const id = `fastpull-restart-${process.pid}-${Date.now()}`;
  const daemonArgs = ['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug'];

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'restart/busybox', 'v1', image);
    ref = `${registry.host}/restart/busybox:v1`;
    daemon = await serveDaemon(daemonArgs);
    await waitForSnapshotter(containerd!);
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
    // The container outlives containerd and fastpulld by design: end it through containerd.
    if (containerd) {
      await containerd.ctr(['task', 'kill', '-s', 'KILL', id], { namespace: CRI_NAMESPACE });
      await waitUntil(
        async () =>
          !/ RUNNING/.test((await containerd!.ctr(['task', 'ls'], { namespace: CRI_NAMESPACE })).stdout.split('\n').find((l) => l.startsWith(`${id} `)) ?? ''),
        10_000,
      );
      await containerd.ctr(['task', 'rm', '-f', id], { namespace: CRI_NAMESPACE });
      await containerd.ctr(['containers', 'rm', id], { namespace: CRI_NAMESPACE });
      await containerd.stop();
    }
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd!.log().slice(-3000)}`);
    return r.stdout;
  };
  /** The container's task pid and status, from `ctr task ls`. */
  const task = async (): Promise<{ pid: number; status: string } | undefined> => {
    const line = (await ctr(['task', 'ls'])).split('\n').find((l) => l.startsWith(`${id} `));
    if (!line) return undefined;
    const [, pid, status] = line.trim().split(/\s+/);
    return { pid: Number(pid), status: status! };
  };
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  /** What the container reads now: a file of the top layer and one it wrote at start. */
  const exec = (n: number) => ctr(['task', 'exec', '--exec-id', `read-${n}`, id, '/bin/busybox', 'cat', '/etc/one', '/etc/two', '/up']);
  /** Both views of the snapshots: containerd's listing in k8s.io and fastpull's records (probe snapshots left out). */
  const snapshots = async (): Promise<{ ctr: string; records: SnapshotInfo[] }> => {
    const client = snapshotsClient(snapSocket);
    try {
      const records = (await client.list()).filter((r) => !isProbeRecord(r.name)).sort((a, b) => a.name.localeCompare(b.name));
      return { ctr: await ctr(['snapshots', '--snapshotter', 'fastpull', 'ls']), records };
    } finally {
      client.close();
    }
  };
  /** Nothing was pulled or recorded since log line `from`, and containerd holds no layer blob (it could not have unpacked one). */
  const nothingPulled = async (d: RunningDaemon, from = 0): Promise<void> => {
    const client = snapshotsClient(snapSocket);
    try {
      await logsSettled(d, client);
    } finally {
      client.close();
    }
    expect(d.logs.slice(from).filter((l) => l.event === 'pull' || l.msg === 'layer recorded for containerd')).toEqual([]);
    const content = await ctr(['content', 'ls', '-q']);
    for (const l of image.layers) expect(content).not.toContain(l.digest);
  };

  let before: Awaited<ReturnType<typeof snapshots>>;
  let pid = 0;

  it('a container keeps running while fastpulld restarts; then the snapshots are as before and a new container starts without a pull', async () => {
    await cri.pullImage(ref);
    const settle = snapshotsClient(snapSocket);
    try {
      await logsSettled(daemon!, settle);
    } finally {
      settle.close();
    }
    expect(daemon!.logs.filter((l) => l.msg === 'layer recorded for containerd')).toHaveLength(image.layers.length);
    await ctr(['run', '-d', '--snapshotter', 'fastpull', ref, id, '/bin/busybox', 'sh', '-c', 'echo up > /up; exec sleep 3600']);
    expect(await waitUntil(async () => (await task())?.status === 'RUNNING')).toBe(true);
    pid = (await task())!.pid;
    expect(
      await waitUntil(
        async () =>
          (await containerd!.ctr(['task', 'exec', '--exec-id', 'ready', id, '/bin/busybox', 'test', '-e', '/up'], { namespace: CRI_NAMESPACE })).status === 0,
      ),
    ).toBe(true);
    expect(await exec(0)).toBe('one v3\ntwo\nup\n');
    before = await snapshots();
    expect(before.records.filter((r) => r.kind === 'COMMITTED')).toHaveLength(image.layers.length);
    expect(before.records.filter((r) => r.kind === 'ACTIVE').map((r) => r.name)).toEqual([expect.stringMatching(new RegExp(`/${id}$`))]);

    await stopDaemon(daemon);
    // Stopping closed the socket and left every directory: the container reads its files on.
    expect(alive(pid)).toBe(true);
    expect(await task()).toEqual({ pid, status: 'RUNNING' });
    expect(await exec(1)).toBe('one v3\ntwo\nup\n');

    daemon = await serveDaemon(daemonArgs);
    await waitForSnapshotter(containerd!);
    expect(await snapshots()).toEqual(before);
    expect(await task()).toEqual({ pid, status: 'RUNNING' });
    expect(await exec(2)).toBe('one v3\ntwo\nup\n');
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `${id}-new`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    await nothingPulled(daemon);
  });

  it('a container keeps running while containerd restarts; then the snapshots are as before and a new container starts without a pull', async () => {
    expect(pid).toBeGreaterThan(0);
    // The container the first test ran and removed leaves fastpull at containerd's next collection
    // (containerd forgets it at once): wait for that, so both views hold only what stays.
    const same = async () => JSON.stringify(await snapshots()) === JSON.stringify(before);
    expect(await waitUntil(same)).toBe(true);
    const logsBefore = daemon!.logs.length;
    await containerd!.stop();
    expect(alive(pid)).toBe(true);
    cri.close();

    containerd = await startContainerd(containerdDir, snapSocket, CRI);
    cri = criImages(containerd.address);
    expect(await task()).toEqual({ pid, status: 'RUNNING' });
    expect(await exec(3)).toBe('one v3\ntwo\nup\n');
    expect(await snapshots()).toEqual(before);
    expect((await cri.imageStatus(ref))?.id).toBe(image.configDigest);
    expect(await ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `${id}-after`, ...BUSYBOX_PROBE])).toBe(BUSYBOX_PROBE_OUTPUT);
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    await nothingPulled(daemon!, logsBefore);
  });
});
