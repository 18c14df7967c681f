// containerd started before fastpulld (the DaemonSet's order at every boot), with real containerd's
// CRI plugin on fastpulld's fast path. At its start the CRI plugin asks the snapshotter whether each
// image is unpacked; fastpulld is not serving, the question fails, and CRI leaves the image out of
// its list (ImageStatus answers nothing), also once fastpulld serves: nothing makes CRI ask again.
// fastpulld, given containerd's socket, has containerd announce each image of CRI's namespace once
// it serves (an image update that changes nothing), and CRI lists the image again; a reload
// (SIGHUP) announces again, and so does the guide's command by hand. A fastpulld that containerd has
// no snapshots in leaves containerd alone.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import { waitUntil } from './containerd-checks.js';
import {
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  release,
  startContainerd,
  waitForSnapshotter,
  type CriImage,
  type CriImages,
  type CriOptions,
  type PrivateContainerd,
} from './containerd.js';
import { guideLine, shell, withoutNotices } from './guide.js';
import { overlayUnavailable, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const CRI_NAMESPACE = 'k8s.io';
const CRI: CriOptions = { snapshotter: 'fastpull', disableSnapshotAnnotations: false };
const work = tempDir('started-first');
const snapSocket = join(work.dir, 'snapshotter.sock');
const containerdDir = join(work.dir, 'containerd');
const containerdSocket = join(containerdDir, 'containerd.sock');

let reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
let containerd: PrivateContainerd | undefined;
if (reason === undefined) {
  try {
    containerd = await startContainerd(containerdDir, snapSocket, CRI);
  } catch (e) {
    reason = `a private containerd with its CRI plugin does not start here: ${(e as Error).message.split('\n')[0]}`;
  }
}
if (reason) console.warn(`skipping the CRI boot-order tests: ${reason}`);

describe.skipIf(lacks('containerd', reason))(`containerd started before fastpulld (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon | undefined;
  let cri: CriImages;
  let image: BuiltImage;
  let ref = '';
  const root = join(work.dir, 'fastpull-root');
  const daemonArgs = (containerdSocketFlag: string): string[] => [
    '--socket',
    join(work.dir, 'fastpulld.sock'),
    '--snapshotter-socket',
    snapSocket,
    '--root',
    root,
    '--containerd-socket',
    containerdSocketFlag,
    '--log-level',
    'debug',
  ];

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'boot/busybox', 'v1', image);
    ref = `${registry.host}/boot/busybox:v1`;
    cri = criImages(containerd!.address);
  });
  afterAll(async () => {
    cri?.close();
    await containerd?.stop();
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  /** CRI's answer for the image, once its plugin answers at all (it refuses calls while it starts). */
  const status = async (): Promise<CriImage | undefined> => {
    let answer: CriImage | undefined;
    const answered = await waitUntil(async () => {
      try {
        answer = await cri.imageStatus(ref);
        return true;
      } catch {
        return false;
      }
    });
    if (!answered) throw new Error(`CRI does not answer ImageStatus:\n${containerd!.log().slice(-3000)}`);
    return answer;
  };
  const announced = (l: Record<string, unknown>): boolean => l.msg === "containerd's images announced again";

  it('leaves containerd alone while it has no snapshots here, then pulls through the fast path', async () => {
    daemon = await serveDaemon(daemonArgs(containerdSocket));
    await daemon.waitLog((l) => l.msg === 'containerd has no snapshots here: no images to announce');
    await waitForSnapshotter(containerd!);
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    expect(daemon.logs.filter((l) => l.msg === 'layer recorded for containerd')).toHaveLength(image.layers.length);
    expect((await status())?.id).toBe(image.configDigest);
    expect(daemon.logs.filter(announced)).toEqual([]);
  });

  it('CRI leaves the image out when containerd starts without fastpulld, and lists it again once fastpulld has containerd announce it', async () => {
    // CRI's three names of the image: tag, repository digest and image id.
    const names = (await containerd!.ctr(['images', 'ls', '-q'], { namespace: CRI_NAMESPACE })).stdout.trim().split('\n').sort();
    expect(names).toEqual([ref, `${registry.host}/boot/busybox@${image.manifestDigest}`, image.configDigest].sort());

    await containerd!.stop();
    await stopDaemon(daemon);
    const logFrom = containerd!.log().length;
    containerd = await startContainerd(containerdDir, snapSocket, CRI);
    const failedCheck = (name: string): boolean => containerd!.log().slice(logFrom).includes(`Failed to check whether image is unpacked for image ${name}`);
    expect(await waitUntil(() => names.every(failedCheck)), containerd.log().slice(logFrom, logFrom + 6000)).toBe(true);
    expect(await status()).toBeUndefined();

    // fastpulld back, told nothing of containerd: containerd reaches it, and CRI still has no image.
    daemon = await serveDaemon(daemonArgs(''));
    await waitForSnapshotter(containerd);
    expect(await status()).toBeUndefined();
    await stopDaemon(daemon);

    // Told containerd's socket, fastpulld has containerd announce each of the three names.
    daemon = await serveDaemon(daemonArgs(containerdSocket));
    expect(await daemon.waitLog(announced)).toMatchObject({ containerd: containerdSocket, namespace: CRI_NAMESPACE, images: names.length, gone: 0 });
    expect(await waitUntil(async () => (await status()) !== undefined)).toBe(true);
    expect(await status()).toMatchObject({ id: image.configDigest, repoTags: [ref], repoDigests: [`${registry.host}/boot/busybox@${image.manifestDigest}`] });
    // CRI took an update event for each name (logged as it handles one).
    const handled = containerd
      .log()
      .slice(logFrom)
      .split('\n')
      .filter((l) => l.includes('ImageUpdate event'));
    for (const name of names)
      expect(
        handled.some((l) => l.includes(name)),
        name,
      ).toBe(true);

    // The announcement changed no image: the same names, targets and labels as before.
    const listing = async (): Promise<string> => (await containerd!.ctr(['images', 'ls'], { namespace: CRI_NAMESPACE })).stdout;
    const before = await listing();
    expect(before).not.toContain('io.fastpull.announce');

    // The image runs, and a PullImage is answered without a pull.
    await waitForSnapshotter(containerd);
    const run = await containerd.ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `boot-${process.pid}`, ...BUSYBOX_PROBE], { namespace: CRI_NAMESPACE });
    expect(withoutNotices(run.stderr)).toBe('');
    expect(run.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
    const from = daemon.logs.length;
    expect(await cri.pullImage(ref)).toBe(image.configDigest);
    expect(daemon.logs.slice(from).filter((l) => l.event === 'pull')).toEqual([]);

    // A reload announces again, and still changes nothing.
    const count = daemon.logs.filter(announced).length;
    daemon.proc.kill('SIGHUP');
    await daemon.waitLog((l) => announced(l) && daemon!.logs.filter(announced).length > count);
    expect(daemon.logs.filter(announced).at(-1)).toMatchObject({ images: names.length });
    expect(await listing()).toBe(before);
    expect(await status()).toMatchObject({ id: image.configDigest });
  });

  it('the guide’s command by hand lists the images again as well', async () => {
    await containerd!.stop();
    await stopDaemon(daemon);
    const logFrom = containerd!.log().length;
    containerd = await startContainerd(containerdDir, snapSocket, CRI);
    expect(await waitUntil(() => containerd!.log().slice(logFrom).includes(`Failed to check whether image is unpacked for image ${ref}`))).toBe(true);
    expect(await status()).toBeUndefined();
    daemon = await serveDaemon(daemonArgs(''));
    await waitForSnapshotter(containerd);
    expect(await status()).toBeUndefined();

    const byHand = await shell(guideLine('images label {} io.fastpull.announce='), containerd);
    expect(withoutNotices(byHand.stderr)).toBe('');
    expect(byHand.status).toBe(0);
    expect(await waitUntil(async () => (await status()) !== undefined)).toBe(true);
    expect(await status()).toMatchObject({ id: image.configDigest, repoTags: [ref] });
    expect(daemon.logs.filter(announced)).toEqual([]);
  });
});
