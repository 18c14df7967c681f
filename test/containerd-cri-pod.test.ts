// A pod and its containers through containerd's CRI runtime service, driven by the pinned crictl as
// kubelet drives it, on images pulled by the fast path: RunPodSandbox in the node's network
// namespace (no CNI), its sandbox image (ours: the default pause image is out of reach) pulled by
// containerd itself through the fast path; a container of the busybox test image printing a file of
// every layer, read back from the log CRI writes, its root an overlay of fastpull's committed layer
// directories; then the container, the pod and the images removed, and containerd's collection
// removing their records from fastpulld.
//
// containerd 2.1 and later also: image volumes (kubelet's ImageVolume feature, CRI `Mount.image`).
// Model-weights images, one uncompressed layer and one zstd layer of fp16-like bytes, pulled through
// CRI by the fast path, mounted read-only into a container from snapshots over fastpull's committed
// layers; the container reads the weights and their digests match.
//
// runc: containerd's defaults work (the cgroupfs driver, `SystemdCgroup = false`, every release's
// default, needs no systemd; they ran under cgroup v1 with another init). What a machine may refuse:
// CRI gives each sandbox container oom_score_adj -998, and lowering it takes CAP_SYS_RESOURCE. Where
// the bounding set lacks it (some VMs and containers), every RunPodSandbox fails in runc ("failed to
// update /proc/self/oom_score_adj: Permission denied", which containerd reports as "can't get final
// child's PID from pipe: EOF"); there the test turns on `restrict_oom_score_adj`, as such a node must.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { chainIDs } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  type DistributionRegistry,
  findDistributionBinary,
  lacks,
  Prng,
  pushImage,
  startDistribution,
} from '@fastpull/core/testing';
import { waitUntil } from './containerd-checks.js';
import {
  BUSYBOX_PROBE,
  BUSYBOX_PROBE_OUTPUT,
  busyboxImage,
  containerdUnavailable,
  peersPrefix,
  release,
  run,
  startContainerd,
  waitForSnapshotter,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, repoRoot, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient, type SnapshotsClient } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const crictlBin = join(peersPrefix, 'crictl', 'bin', 'crictl');
// Image volumes came with containerd 2.1 (kubelet's ImageVolume feature gate).
const imageVolumes = release.major === 2 && release.name !== '2.0';
/** Bytes of each weights file; a real model's are GiBs (docs/containerd.md, Image volumes). */
const WEIGHTS_BYTES = 64 * 1024 * 1024;

const work = tempDir('cri-pod');
const snapSocket = join(work.dir, 'snapshotter.sock');
const root = join(work.dir, 'fastpull-root');
const committedFs = (chain: string): string => join(root, 'snapshots', 'committed', chain.slice('sha256:'.length), 'fs');

const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the CRI pod tests: ${reason}`);
// A crictl that is not built fails the file, as a release that is not built does.
if (!reason && !existsSync(crictlBin)) throw new Error(`${crictlBin} not found (bash scripts/peers.sh crictl)`);

/** Whether this process may lower an oom_score_adj: CAP_SYS_RESOURCE (bit 24) in its effective set. */
function canLowerOomScore(): boolean {
  const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return eff !== undefined && (BigInt(`0x${eff}`) & (1n << 24n)) !== 0n;
}
const restrictOomScoreAdj = !reason && !canLowerOomScore();
if (restrictOomScoreAdj) console.warn('CRI pod tests: no CAP_SYS_RESOURCE here, so containerd runs with restrict_oom_score_adj = true');

/**
 * `bytes` of fp16 values as a model's weight tensors hold them, drawn from N(0, 0.02):
 * skewed exponents and noisy mantissas, so zstd gains a little on them, as on real weights. Each value
 * is one of a table of 65536 normal draws, picked by 16 random bits: the table's draws make the
 * distribution, the picks make the bytes cheap to generate.
 */
function fp16Weights(bytes: number, seed: number): Buffer {
  const rng = new Prng(seed);
  const f32 = new Float32Array(1);
  const bits = new Uint32Array(f32.buffer);
  // Rounds through float32's bits: a carry out of the mantissa lands in the exponent, as it should.
  const half = (x: number): number => {
    f32[0] = x;
    const b = bits[0]!;
    const sign = (b >>> 16) & 0x8000;
    const e = ((b >>> 23) & 0xff) - 127;
    if (e < -25) return sign;
    if (e < -14) return sign | Math.round(((b & 0x7fffff) | 0x800000) / 2 ** (-e - 1)); // subnormal
    return sign | (((e + 15) << 10) + Math.round((b & 0x7fffff) / 8192));
  };
  const table = new Uint16Array(65536);
  for (let i = 0; i < table.length; i += 2) {
    // Box-Muller: two normal draws from two uniform ones.
    const r = 0.02 * Math.sqrt(-2 * Math.log(1 - rng.float()));
    const t = 2 * Math.PI * rng.float();
    table[i] = half(r * Math.cos(t));
    table[i + 1] = half(r * Math.sin(t));
  }
  // In the machine's byte order: little-endian on amd64 and arm64, as tensors are stored.
  const values = new Uint16Array(bytes / 2);
  for (let i = 0; i + 1 < values.length; i += 2) {
    const pick = rng.nextUint32();
    values[i] = table[pick & 0xffff]!;
    values[i + 1] = table[pick >>> 16]!;
  }
  return Buffer.from(values.buffer);
}

/** Parses the overlay mounted at `point` in a /proc/self/mountinfo: its mount options and lower directories. */
function overlayAt(mountinfo: string, point: string): { options: string[]; lowerdirs: string[] } {
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    const fields = left?.split(' ') ?? [];
    if (!right || fields[4] !== point) continue;
    const [fstype, , superOptions = ''] = right.split(' ');
    if (fstype !== 'overlay') continue;
    const lower = superOptions
      .split(',')
      .find((o) => o.startsWith('lowerdir='))
      ?.slice('lowerdir='.length);
    return { options: (fields[5] ?? '').split(','), lowerdirs: lower ? lower.split(':') : [] };
  }
  throw new Error(`no overlay mounted at ${point} in:\n${mountinfo}`);
}

describe.skipIf(lacks('containerd', reason))(`a pod through CRI with crictl (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let containerd: PrivateContainerd;
  let client: SnapshotsClient;
  let busybox: BuiltImage;
  let sandbox: BuiltImage;
  let busyboxRef = '';
  let sandboxRef = '';
  const logDir = join(work.dir, 'pod-logs');
  // crictl's own file (the machine's /etc/crictl.yaml must not apply): both services on the private
  // containerd, and calls given time on a loaded machine (its default is 2 s).
  const crictlConfig = join(work.dir, 'crictl.yaml');
  let seq = 0;

  const crictl = async (args: string[]): Promise<string> => {
    const r = await run(crictlBin, ['--config', crictlConfig, ...args]);
    if (r.status !== 0) throw new Error(`crictl ${args.join(' ')} exited ${r.status}: ${r.stderr}\ncontainerd log tail:\n${containerd.log().slice(-3000)}`);
    return r.stdout;
  };
  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  };
  /** Writes a crictl config file (pod or container) and returns its path. */
  const configFile = (what: string, config: unknown): string => {
    const path = join(work.dir, `${what}-${seq++}.json`);
    writeFileSync(path, JSON.stringify(config));
    return path;
  };
  /** A pod in the node's network namespace (NODE = 2): RunPodSandbox needs no CNI for it. */
  const podConfig = (name: string): string =>
    configFile('pod', {
      metadata: { name: `${name}-${process.pid}`, namespace: 'fastpull-test', uid: `${name}-${process.pid}`, attempt: 0 },
      log_directory: join(logDir, name),
      linux: { security_context: { namespace_options: { network: 2 } } },
    });
  /** Waits for a started container to exit; returns its status as crictl inspect gives it. */
  const exited = async (id: string): Promise<{ state: string; exitCode: number; logPath: string }> => {
    let status = { state: '', exitCode: -1, logPath: '' };
    const done = await waitUntil(async () => {
      status = (JSON.parse(await crictl(['inspect', '-o', 'json', id])) as { status: typeof status }).status;
      return status.state === 'CONTAINER_EXITED';
    });
    if (!done) throw new Error(`container ${id} did not exit: ${JSON.stringify(status)}`);
    return status;
  };
  /** Waits for fastpulld to record each layer of `image` for containerd; returns how each came (`pulled`, ...). */
  const recordedFor = async (image: BuiltImage): Promise<unknown[]> => {
    const chains = chainIDs(image.layers.map((l) => l.diffID));
    const lines = await Promise.all(chains.map((c) => daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.target === c)));
    return lines.map((l) => l.how);
  };
  const contentHasNoLayerOf = async (image: BuiltImage): Promise<void> => {
    const content = await ctr(['content', 'ls', '-q']);
    expect(content).toContain(image.configDigest);
    for (const l of image.layers) expect(content).not.toContain(l.digest);
  };

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    busybox = await busyboxImage();
    await pushImage(registry.url, 'pod/busybox', 'v1', busybox);
    busyboxRef = `${registry.host}/pod/busybox:v1`;
    // The sandbox container only holds the pod's namespaces: a process that sleeps until killed
    // (StopPodSandbox kills it with SIGKILL).
    sandbox = await buildImage({
      layers: [[{ type: 'file', path: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 }]],
      containerConfig: { Entrypoint: ['/bin/busybox', 'sleep'], Cmd: ['infinity'] },
    });
    await pushImage(registry.url, 'pod/sandbox', 'v1', sandbox);
    sandboxRef = `${registry.host}/pod/sandbox:v1`;
    daemon = startDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, {
      snapshotter: 'fastpull',
      disableSnapshotAnnotations: false,
      sandboxImage: sandboxRef,
      restrictOomScoreAdj,
    });
    await waitForSnapshotter(containerd);
    const endpoint = `unix://${containerd.address}`;
    writeFileSync(crictlConfig, `runtime-endpoint: ${endpoint}\nimage-endpoint: ${endpoint}\ntimeout: 120\n`);
    client = snapshotsClient(snapSocket);
    mkdirSync(logDir, { recursive: true });
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

  it('runs a pod (its sandbox image pulled by containerd through the fast path) and a container of a fast-path image, reads its log, and removes them all', async () => {
    const pulled = (await crictl(['pull', busyboxRef])).trim();
    expect(pulled).toBe(`Image is up to date for ${busybox.configDigest}`);
    // The first layer's Prepare started the pull; the others may find their layer pulled already.
    expect((await recordedFor(busybox))[0]).toBe('pulled');
    await contentHasNoLayerOf(busybox);

    // RunPodSandbox finds no sandbox image and pulls it itself, through CRI's pull: the fast path.
    const podFile = podConfig('probe');
    const pod = (await crictl(['runp', podFile])).trim();
    expect(pod).toMatch(/^[0-9a-f]{64}$/);
    expect(await recordedFor(sandbox)).toEqual(['pulled']);
    await contentHasNoLayerOf(sandbox);
    const podStatus = JSON.parse(await crictl(['inspectp', '-o', 'json', pod])) as {
      status: { state: string; linux: { namespaces: { options: { network: string } } } };
    };
    expect(podStatus.status.state).toBe('SANDBOX_READY');
    expect(podStatus.status.linux.namespaces.options.network).toBe('NODE');

    const script = `${BUSYBOX_PROBE.at(-1)}; echo ---; cat /proc/self/mountinfo`;
    const container = configFile('container', {
      metadata: { name: 'probe' },
      image: { image: busyboxRef },
      command: ['/bin/busybox', 'sh', '-c', script],
      log_path: 'probe.log',
      linux: {},
    });
    const id = (await crictl(['create', '--no-pull', pod, container, podFile])).trim();
    await crictl(['start', id]);
    const status = await exited(id);
    expect(status.exitCode).toBe(0);
    expect(status.logPath).toBe(join(logDir, 'probe', 'probe.log'));

    // What crictl logs prints is what CRI wrote to the pod's log directory, one line per line of output.
    const [probe, mountinfo] = (await crictl(['logs', id])).split('---\n');
    expect(probe).toBe(BUSYBOX_PROBE_OUTPUT);
    const logLines = readFileSync(status.logPath, 'utf8').split('\n').filter(Boolean);
    expect(logLines.slice(0, 7).map((l) => l.replace(/^\S+ /, ''))).toEqual(
      BUSYBOX_PROBE_OUTPUT.split('\n')
        .filter(Boolean)
        .map((l) => `stdout F ${l}`),
    );
    // The container's root is an overlay over fastpull's committed layer directories, top first.
    const rootfs = overlayAt(mountinfo!, '/');
    expect(rootfs.lowerdirs).toEqual(
      chainIDs(busybox.layers.map((l) => l.diffID))
        .reverse()
        .map(committedFs),
    );

    await crictl(['rm', id]);
    await crictl(['stopp', pod]);
    await crictl(['rmp', pod]);
    expect(JSON.parse(await crictl(['pods', '-o', 'json'])) as unknown).toEqual({ items: [] });

    // With the pod gone nothing holds the images: containerd's collection removes their records from fastpulld.
    await crictl(['rmi', busyboxRef, sandboxRef]);
    expect(JSON.parse(await crictl(['images', '-o', 'json'])) as unknown).toEqual({ images: [] });
    expect(await waitUntil(async () => (await client.list()).every((r) => !r.name.startsWith(`${CRI_NAMESPACE}/`)))).toBe(true);
  });

  if (imageVolumes)
    it('mounts model-weights images (uncompressed and zstd layers) pulled by the fast path as read-only image volumes; the container reads the weights whole', async () => {
      const weights = [
        { name: 'raw', compression: 'none' as const, bytes: fp16Weights(WEIGHTS_BYTES, 1) },
        { name: 'zstd', compression: 'zstd' as const, bytes: fp16Weights(WEIGHTS_BYTES, 2) },
      ];
      const images = await Promise.all(
        weights.map(async (w) => {
          const image = await buildImage({
            layers: [
              [
                { type: 'file', path: 'model/config.json', content: `{"dtype":"float16","bytes":${WEIGHTS_BYTES}}\n` },
                { type: 'file', path: 'model/weights.bin', content: w.bytes },
              ],
            ],
            compression: w.compression,
          });
          await pushImage(registry.url, `models/${w.name}`, 'v1', image);
          return { ...w, image, ref: `${registry.host}/models/${w.name}:v1`, sha256: createHash('sha256').update(w.bytes).digest('hex') };
        }),
      );
      expect(images.map((i) => i.image.layers[0]!.mediaType)).toEqual([
        'application/vnd.oci.image.layer.v1.tar',
        'application/vnd.oci.image.layer.v1.tar+zstd',
      ]);

      // kubelet pulls an image volume's image through CRI like any other: the fast path, no layer blob in containerd.
      await crictl(['pull', busyboxRef]);
      for (const w of images) {
        await crictl(['pull', w.ref]);
        expect(await recordedFor(w.image)).toEqual(['pulled']);
        await contentHasNoLayerOf(w.image);
      }

      const podFile = podConfig('weights');
      const pod = (await crictl(['runp', podFile])).trim();
      const script =
        'sha256sum /weights/raw/model/weights.bin /weights/zstd/model/weights.bin; touch /weights/raw/x 2>/dev/null && echo writable || echo read-only; echo ---; cat /proc/self/mountinfo';
      const container = configFile('container', {
        metadata: { name: 'reader' },
        image: { image: busyboxRef },
        command: ['/bin/busybox', 'sh', '-c', script],
        mounts: images.map((w) => ({ container_path: `/weights/${w.name}`, image: { image: w.ref }, readonly: true })),
        log_path: 'reader.log',
        linux: {},
      });
      const id = (await crictl(['create', '--no-pull', pod, container, podFile])).trim();
      await crictl(['start', id]);
      const status = await exited(id);
      const [sums, mountinfo] = (await crictl(['logs', id])).split('---\n');
      expect(status.exitCode).toBe(0);
      expect(sums).toBe(`${images[0]!.sha256}  /weights/raw/model/weights.bin\n${images[1]!.sha256}  /weights/zstd/model/weights.bin\nread-only\n`);

      // Each volume is an overlay whose lower directory is fastpull's committed layer, mounted read-only.
      for (const w of images) {
        const volume = overlayAt(mountinfo!, `/weights/${w.name}`);
        expect(volume.options).toContain('ro');
        expect(volume.lowerdirs).toEqual([committedFs(chainIDs([w.image.layers[0]!.diffID])[0]!)]);
      }
      // containerd made each volume's snapshot in fastpulld: an active one on the layer's record.
      const active = (await client.list(['kind==active'])).filter((r) => r.name.startsWith(`${CRI_NAMESPACE}/`) && r.name.includes('/image-volumes/'));
      expect(active).toHaveLength(2);

      await crictl(['rm', id]);
      await crictl(['stopp', pod]);
      await crictl(['rmp', pod]);
      // Stopping the pod unmounts its image volumes and removes their snapshots.
      expect(await waitUntil(async () => (await client.list(['kind==active'])).every((r) => !r.name.includes('/image-volumes/')))).toBe(true);
      await crictl(['rmi', ...images.map((w) => w.ref), busyboxRef, sandboxRef]);
      expect(await waitUntil(async () => (await client.list()).every((r) => !r.name.startsWith(`${CRI_NAMESPACE}/`)))).toBe(true);
    });
});

// The pod spec docs/containerd.md gives for image volumes, checked as the API server would take it
// (Kubernetes' OpenAPI schema through kubernetes-models; there is no API server here). kubelet turns
// its volume into the CRI `Mount.image` that the test above gives containerd.
if (imageVolumes)
  describe('docs/containerd.md, Image volumes', () => {
    it("shows a pod spec that passes Kubernetes' schema and mounts an image volume", () => {
      const docs = readFileSync(join(repoRoot, 'docs', 'containerd.md'), 'utf8');
      const section = docs.slice(docs.indexOf('\n## Image volumes\n'));
      const block = /```yaml\n([\s\S]*?)```/.exec(section.slice(0, section.indexOf('\n## ', 1)))?.[1];
      expect(block).toBeDefined();
      const manifest = parseYaml(block!) as ConstructorParameters<typeof Pod>[0];
      const pod = new Pod(manifest);
      expect(() => pod.validate()).not.toThrow();
      const volume = pod.spec!.volumes!.find((v) => v.image)!;
      expect(volume.image).toMatchObject({ reference: expect.any(String), pullPolicy: 'IfNotPresent' });
      const mounts = pod.spec!.containers.flatMap((c) => c.volumeMounts ?? []).filter((m) => m.name === volume.name);
      expect(mounts).toHaveLength(1);
      // The schema check does catch what the API server would refuse.
      const broken = structuredClone(manifest) as { spec: { volumes: Array<{ image?: { reference: unknown } }> } };
      broken.spec.volumes.find((v) => v.image)!.image!.reference = 7;
      expect(() => new Pod(broken as never).validate()).toThrow(/reference/);
    });
  });
