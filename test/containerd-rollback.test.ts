// docs/containerd.md, "Going back to overlayfs", run as written: two images pulled
// through fastpulld's fast path by CRI (an application and one standing for the pause image), then
// containerd's CRI snapshotter set back to overlayfs and containerd restarted. Both images are
// broken as the guide says (containerd never had their layer blobs, and cannot unpack them into
// overlayfs), while CRI still lists them, so kubelet would not pull them again. The guide's commands
// (with crictl as scripts/peers.sh builds it) pull them again: every blob is then in containerd's
// content store, both run, CRI lists the same image ids. Then fastpull taken out for good:
// containerd without the proxy plugin (and, 2.1 and later, without its unpack_config entry),
// fastpulld stopped, and both still run. On each containerd release the suites run on.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import { parse, stringify, type TomlTable } from 'smol-toml';
import {
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  criImages,
  launchContainerd,
  peersPrefix,
  release,
  startContainerd,
  waitForSnapshotter,
  type CriImages,
  type PrivateContainerd,
} from './containerd.js';
import { guideLine, guideQuote, lastLine, shell, withoutNotices } from './guide.js';
import { overlayUnavailable, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const CRI_NAMESPACE = 'k8s.io';
const work = tempDir('cri-rollback');
const snapSocket = join(work.dir, 'snapshotter.sock');
const containerdDir = join(work.dir, 'containerd');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the rollback to overlayfs: ${reason}`);

/** crictl as scripts/peers.sh builds it (Kubernetes' node packages bring it on a node). */
const crictlDir = join(peersPrefix, 'crictl', 'bin');

/** crictl's configuration, as /etc/crictl.yaml holds it on a node: both endpoints containerd's socket. */
function crictlConfig(dir: string, containerd: PrivateContainerd): string {
  const file = join(dir, 'crictl.yaml');
  writeFileSync(file, `runtime-endpoint: unix://${containerd.address}\nimage-endpoint: unix://${containerd.address}\ntimeout: 60\n`);
  return file;
}

describe.skipIf(lacks('containerd', reason))(`going back from fastpull to overlayfs, as the guide says (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon | undefined;
  let containerd: PrivateContainerd | undefined;
  let app: BuiltImage;
  let pause: BuiltImage;
  const refs = { app: '', pause: '' };
  const root = join(work.dir, 'fastpull-root');

  beforeAll(async () => {
    if (!existsSync(join(crictlDir, 'crictl'))) throw new Error(`crictl not found in ${crictlDir} (bash scripts/peers.sh crictl)`);
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    app = await busyboxImage();
    pause = await busyboxImage({ variant: 'pause\n' });
    await pushImage(registry.url, 'rollback/app', 'v1', app);
    await pushImage(registry.url, 'rollback/pause', '3.6', pause);
    refs.app = `${registry.host}/rollback/app:v1`;
    refs.pause = `${registry.host}/rollback/pause:3.6`;
    daemon = await serveDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root]);
  });
  afterAll(async () => {
    await containerd?.stop();
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  /** Runs `ctr` in CRI's namespace; throws with its stderr when it fails. */
  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd!.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  };
  /** `ctr run` of an image with overlayfs (containerd's default snapshotter), as a new container of CRI's would. */
  const runProbe = (ref: string, n: string) =>
    containerd!.ctr(['run', '--rm', ref, `rollback-${process.pid}-${n}`, ...BUSYBOX_PROBE], { namespace: CRI_NAMESPACE });
  /** CRI's image id for each image. */
  const ids = async (cri: CriImages): Promise<Array<string | undefined>> => [(await cri.imageStatus(refs.app))?.id, (await cri.imageStatus(refs.pause))?.id];

  it('breaks every fast-path image when only the snapshotter is switched, and the guide’s re-pull makes each run again', async () => {
    containerd = await startContainerd(containerdDir, snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
    let cri = criImages(containerd.address);
    try {
      await waitForSnapshotter(containerd);
      expect(await cri.pullImage(refs.app)).toBe(app.configDigest);
      expect(await cri.pullImage(refs.pause)).toBe(pause.configDigest);
      // The images share all but their top layers, which containerd unpacks once: fastpull pulled
      // every layer, containerd none.
      expect(daemon!.logs.filter((l) => l.msg === 'layer recorded for containerd')).toHaveLength(app.layers.length + 1);
      const content = await ctr(['content', 'ls', '-q']);
      for (const l of [...app.layers, ...pause.layers]) expect(content).not.toContain(l.digest);
    } finally {
      cri.close();
      await containerd.stop();
    }

    // Step 1 alone: the CRI snapshotter back to overlayfs, containerd restarted.
    containerd = await startContainerd(containerdDir, snapSocket, { snapshotter: 'overlayfs', disableSnapshotAnnotations: false });
    cri = criImages(containerd.address);
    try {
      // 2.x says which image before the guide's words.
      const broken =
        /^ctr: (?:apply layer error for "[^"]+": )?failed to extract layer (sha256:[0-9a-f]{64}): failed to get reader from content store: content digest (sha256:[0-9a-f]{64}): not found$/;
      expect(`ctr: ${guideQuote('failed to extract layer ').replaceAll('sha256:...', `sha256:${'0'.repeat(64)}`)}`).toMatch(broken);
      for (const [ref, image] of [
        [refs.app, app],
        [refs.pause, pause],
      ] as const) {
        const r = await runProbe(ref, 'broken');
        expect(r.status).not.toBe(0);
        const m = broken.exec(lastLine(r.stderr));
        expect(m, r.stderr).not.toBeNull();
        expect(image.layers.map((l) => l.digest)).toContain(m![2]);
      }
      // CRI still lists both: kubelet would not pull them again.
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);

      // Step 2: the guide's commands, crictl configured for containerd's socket.
      const env = {
        PATH: `${crictlDir}:${release.binDir ? `${release.binDir}:` : ''}${process.env.PATH}`,
        CRI_CONFIG_FILE: crictlConfig(work.dir, containerd),
      };
      const repull = await shell(guideLine(`grep '@sha256:' | xargs -r -n1 crictl pull`), containerd, env);
      expect(withoutNotices(repull.stderr)).toBe('');
      expect(repull.status).toBe(0);
      expect(repull.stdout.trim().split('\n').sort()).toEqual(
        [`Image is up to date for ${app.configDigest}`, `Image is up to date for ${pause.configDigest}`].sort(),
      );
      const check = await shell(guideLine('ctr -n k8s.io images check'), containerd);
      expect(check.status).toBe(0);
      const rows = check.stdout.trim().split('\n').slice(1);
      expect(rows).toHaveLength(6); // tag, repository digest and id of each image
      for (const row of rows) expect(row).toMatch(/\scomplete \((\d+)\/\1\)\s.*\strue\s*$/);
      const content = await ctr(['content', 'ls', '-q']);
      for (const l of [...app.layers, ...pause.layers]) expect(content).toContain(l.digest);

      for (const ref of [refs.app, refs.pause]) {
        const r = await runProbe(ref, 'fixed');
        expect(withoutNotices(r.stderr)).toBe('');
        expect(r.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
      }
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);
    } finally {
      cri.close();
      await containerd.stop();
    }
  });

  it('step 3: containerd without the proxy plugin and fastpulld stopped, both images still run', async () => {
    // The same configuration less [proxy_plugins.fastpull] (and its requirement), and on 2.1 and
    // later less the transfer service's unpack_config entry that names it.
    const t = parse(readFileSync(join(containerdDir, 'config.toml'), 'utf8'));
    delete (t.proxy_plugins as TomlTable).fastpull;
    delete t.required_plugins;
    const transfer = (t.plugins as TomlTable)['io.containerd.transfer.v1.local'] as TomlTable | undefined;
    if (transfer?.unpack_config) transfer.unpack_config = (transfer.unpack_config as TomlTable[]).filter((u) => u.snapshotter !== 'fastpull');
    const config = stringify(t);
    expect(config).not.toMatch(/proxy_plugins\.fastpull|required_plugins|"fastpull"/);
    await stopDaemon(daemon);
    containerd = await launchContainerd(containerdDir, join(containerdDir, 'containerd.sock'), config, release);
    const cri = criImages(containerd.address);
    try {
      for (const ref of [refs.app, refs.pause]) {
        const r = await runProbe(ref, 'without');
        expect(withoutNotices(r.stderr)).toBe('');
        expect(r.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
      }
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);
      const gone = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'ls'], { namespace: CRI_NAMESPACE });
      expect(lastLine(gone.stderr)).toMatch(new RegExp(`^ctr: ${guideQuote('snapshotter not loaded')}: fastpull`));
    } finally {
      cri.close();
    }
  });
});
