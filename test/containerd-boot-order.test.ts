// Boot order on a node: fastpulld and containerd started together, as systemd starts them with
// deploy/systemd/fastpulld.service (Type=notify) and containerd's drop-in (After= and Wants= on
// fastpulld): containerd is started the moment fastpulld sends READY=1 to $NOTIFY_SOCKET, as
// systemd would. An image pulled earlier through CRI's fast path is listed by CRI ImageStatus as
// soon as containerd answers (its CRI plugin checks each image's snapshots at start; a snapshotter
// that did not answer then left the image out of CRI's list), and a container runs on it.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import { datagramListenerUnavailable, listenDatagrams } from '../packages/core/src/util/unix-datagram.testkit.js';
import {
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  release,
  startContainerd,
  waitForSnapshotter,
  type CriOptions,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, repoRoot, serveDaemon, startDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const CRI: CriOptions = { snapshotter: 'fastpull', disableSnapshotAnnotations: false };
const launcher = join(repoRoot, 'packages', 'daemon', 'dist', 'launch.cjs');
const work = tempDir('boot-order');
const reason =
  containerdUnavailable() ??
  overlayUnavailable() ??
  datagramListenerUnavailable() ??
  (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the boot-order tests: ${reason}`);

describe.skipIf(lacks('containerd', reason))(`fastpulld and containerd started together, in the units' order (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let image: BuiltImage;
  let ref = '';
  const containerdDir = join(work.dir, 'containerd');
  const snapSocket = join(work.dir, 'run', 'snapshotter.sock');
  const apiSocket = join(work.dir, 'run', 'fastpulld.sock');
  const daemonArgs = ['--socket', apiSocket, '--snapshotter-socket', snapSocket, '--root', join(work.dir, 'fastpull-root')];
  let daemon: RunningDaemon | undefined;
  let containerd: PrivateContainerd | undefined;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'boot/busybox', 'v1', image);
    ref = `${registry.host}/boot/busybox:v1`;
    // The node before the reboot: the image pulled through the fast path, then both daemons stopped.
    daemon = await serveDaemon(daemonArgs);
    containerd = await startContainerd(containerdDir, snapSocket, CRI);
    await waitForSnapshotter(containerd);
    const cri = criImages(containerd.address);
    try {
      expect(await cri.pullImage(ref)).toBe(image.configDigest);
    } finally {
      cri.close();
    }
    await containerd.stop();
    await stopDaemon(daemon);
  });
  afterAll(async () => {
    await containerd?.stop();
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  it('containerd started on READY=1 lists the fast-path image at once, and runs it', async () => {
    const listener = await listenDatagrams(join(work.dir, 'notify.sock'), [apiSocket, snapSocket]);
    try {
      daemon = startDaemon(daemonArgs, { bin: launcher, env: { NOTIFY_SOCKET: listener.address } });
      let ready;
      for (;;) {
        const d = await Promise.race([
          listener.next(),
          daemon.exited.then(({ code }) => {
            throw new Error(`fastpulld exited with ${code} before READY=1: ${daemon!.stderr()}`);
          }),
        ]);
        if (d.fields.READY === '1') {
          ready = d;
          break;
        }
      }
      expect(ready.answered).toEqual({ [apiSocket]: true, [snapSocket]: true });
      // What systemd does next under After=fastpulld.service: start containerd.
      containerd = await startContainerd(containerdDir, snapSocket, CRI);
      const cri = criImages(containerd.address);
      try {
        const status = await cri.imageStatus(ref);
        expect(
          status?.id,
          `CRI lists the image; containerd log:\n${containerd
            .log()
            .split('\n')
            .filter((l) => /unpacked|snapshotter/i.test(l))
            .slice(-10)
            .join('\n')}`,
        ).toBe(image.configDigest);
      } finally {
        cri.close();
      }
      expect(containerd.log()).not.toMatch(/Failed to check whether image is unpacked/);
      const run = await containerd.ctr(['run', '--rm', '--snapshotter', 'fastpull', ref, `fastpull-boot-${process.pid}-${Date.now()}`, ...BUSYBOX_PROBE], {
        namespace: 'k8s.io',
      });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
    } finally {
      await listener.close();
    }
  });
});
