// docs/containerd.md, "Going back to overlayfs", run on Debian's containerd 1.6.20: two images pulled
// through fastpulld's fast path by CRI (an application and one standing for the pause image), then
// containerd's CRI snapshotter set back to overlayfs and containerd restarted. Both images are
// broken as the guide says (containerd never had their layer blobs, and cannot unpack them into
// overlayfs), while CRI still lists them, so kubelet would not pull them again. The guide's commands
// (crictl played by a CRI PullImage client on containerd's socket) pull them again: every blob is
// then in containerd's content store, both run, CRI lists the same image ids. Then fastpull taken
// out for good: containerd without the proxy plugin, fastpulld stopped, and both still run.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findDistributionBinary, pushImage, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { BUSYBOX_PROBE, BUSYBOX_PROBE_OUTPUT, busyboxImage, containerdUnavailable, criImages, launchContainerd, startContainerd, waitForSnapshotter, type CriImages, type PrivateContainerd } from './containerd.js';
import { guideLine, guideQuote, shell } from './guide.js';
import { overlayUnavailable, repoRoot, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const CRI_NAMESPACE = 'k8s.io';
const work = tempDir('cri-rollback');
const snapSocket = join(work.dir, 'snapshotter.sock');
const containerdDir = join(work.dir, 'containerd');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the rollback to overlayfs: ${reason}`);

/**
 * A directory holding a `crictl` for `crictl pull NAME` only: a CRI PullImage on
 * $CONTAINER_RUNTIME_ENDPOINT (where crictl reads it from), printing what crictl prints. crictl
 * comes with Kubernetes' node packages, which are not installed where these tests run.
 */
function crictlStandIn(dir: string): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const script = join(dir, 'crictl-pull.cjs');
  writeFileSync(
    script,
    `const { createRequire } = require('node:module');
const req = createRequire(${JSON.stringify(join(repoRoot, 'test', 'package.json'))});
const grpc = req('@grpc/grpc-js');
const loader = req('@grpc/proto-loader');
const [verb, name, ...rest] = process.argv.slice(2);
if (verb !== 'pull' || !name || rest.length > 0) {
  console.error('crictl stand-in: only "crictl pull NAME"');
  process.exit(2);
}
const def = loader.loadSync(['runtime/v1/api.proto'], { includeDirs: [${JSON.stringify(join(repoRoot, 'test', 'proto'))}] });
const Client = grpc.makeGenericClientConstructor(def['runtime.v1.ImageService'], 'ImageService');
const client = new Client(process.env.CONTAINER_RUNTIME_ENDPOINT.replace('unix://', 'unix:'), grpc.credentials.createInsecure());
client.PullImage({ image: { image: name } }, (e, res) => {
  if (e) {
    console.error('E pulling image: ' + e.message);
    process.exitCode = 1;
  } else console.log('Image is up to date for ' + res.imageRef);
  client.close();
});
`,
  );
  writeFileSync(join(bin, 'crictl'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(script)} "$@"\n`);
  chmodSync(join(bin, 'crictl'), 0o755);
  return bin;
}

describe.skipIf(reason !== undefined)('going back from fastpull to overlayfs, as the guide says', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon | undefined;
  let containerd: PrivateContainerd | undefined;
  let app: BuiltImage;
  let pause: BuiltImage;
  const refs = { app: '', pause: '' };
  const root = join(work.dir, 'fastpull-root');

  beforeAll(async () => {
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
  const runProbe = (ref: string, n: string) => containerd!.ctr(['run', '--rm', ref, `rollback-${process.pid}-${n}`, ...BUSYBOX_PROBE], { namespace: CRI_NAMESPACE });
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
      const broken = /^ctr: failed to extract layer (sha256:[0-9a-f]{64}): failed to get reader from content store: content digest (sha256:[0-9a-f]{64}): not found$/;
      expect(guideQuote('failed to extract layer ').replaceAll('sha256:...', 'sha256:' + '0'.repeat(64))).toMatch(new RegExp(broken.source.replace('^ctr: ', '^')));
      for (const [ref, image] of [[refs.app, app], [refs.pause, pause]] as const) {
        const r = await runProbe(ref, 'broken');
        expect(r.status).not.toBe(0);
        const m = broken.exec(r.stderr.trim().split('\n').at(-1)!);
        expect(m, r.stderr).not.toBeNull();
        expect(image.layers.map((l) => l.digest)).toContain(m![2]);
      }
      // CRI still lists both: kubelet would not pull them again.
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);

      // Step 2: the guide's commands, with crictl's endpoint containerd's socket.
      const env = { PATH: `${crictlStandIn(work.dir)}:${process.env.PATH}`, CONTAINER_RUNTIME_ENDPOINT: `unix://${containerd.address}` };
      const repull = await shell(guideLine(`grep '@sha256:' | xargs -r -n1 crictl pull`), containerd, env);
      expect(repull.stderr).toBe('');
      expect(repull.status).toBe(0);
      expect(repull.stdout.trim().split('\n').sort()).toEqual([`Image is up to date for ${app.configDigest}`, `Image is up to date for ${pause.configDigest}`].sort());
      const check = await shell(guideLine('ctr -n k8s.io images check'), containerd);
      expect(check.status).toBe(0);
      const rows = check.stdout.trim().split('\n').slice(1);
      expect(rows).toHaveLength(6); // tag, repository digest and id of each image
      for (const row of rows) expect(row).toMatch(/\scomplete \((\d+)\/\1\)\s.*\strue\s*$/);
      const content = await ctr(['content', 'ls', '-q']);
      for (const l of [...app.layers, ...pause.layers]) expect(content).toContain(l.digest);

      for (const ref of [refs.app, refs.pause]) {
        const r = await runProbe(ref, 'fixed');
        expect(r.stderr).toBe('');
        expect(r.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
      }
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);
    } finally {
      cri.close();
      await containerd.stop();
    }
  });

  it('step 3: containerd without the proxy plugin and fastpulld stopped, both images still run', async () => {
    // The same configuration less [proxy_plugins.fastpull] (and its requirement).
    const config = readFileSync(join(containerdDir, 'config.toml'), 'utf8')
      .replace(/^required_plugins = .*\n/m, '')
      .replace(/\n\[proxy_plugins\.fastpull\]\n(?: {2}.*\n)+/, '\n');
    expect(config).not.toMatch(/proxy_plugins|required_plugins/);
    await stopDaemon(daemon);
    containerd = await launchContainerd(containerdDir, join(containerdDir, 'containerd.sock'), config);
    const cri = criImages(containerd.address);
    try {
      for (const ref of [refs.app, refs.pause]) {
        const r = await runProbe(ref, 'without');
        expect(r.stderr).toBe('');
        expect(r.stdout).toBe(BUSYBOX_PROBE_OUTPUT);
      }
      expect(await ids(cri)).toEqual([app.configDigest, pause.configDigest]);
      const gone = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'ls'], { namespace: CRI_NAMESPACE });
      expect(gone.stderr.trim()).toBe(`ctr: ${guideQuote('snapshotter not loaded')}: fastpull: invalid argument`);
    } finally {
      cri.close();
    }
  });
});
