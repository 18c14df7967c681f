// A private containerd for tests: its own root, state, gRPC address and config under a temporary
// directory, with fastpulld's snapshotter socket as the proxy snapshotter `fastpull` (required: a
// containerd that cannot load it fails to start). Shim sockets and runc state are shared with any
// system containerd, so callers use their own namespace and unique container ids. Also: a runnable
// busybox image of several layers, and a client of the CRI image service.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { buildImage, Prng, type BuiltImage, type LayerEntry } from '@fastpull/core/testing';

/** What the CRI plugin should do, when a test needs it (else it is disabled). */
export interface CriOptions {
  /** The snapshotter CRI pulls unpack into. */
  readonly snapshotter: string;
  /** containerd's `disable_snapshot_annotations` (the remote-snapshotter labels are sent when false). */
  readonly disableSnapshotAnnotations: boolean;
}

/** A running private containerd. */
export interface PrivateContainerd {
  /** Its gRPC socket. */
  readonly address: string;
  /** The namespace the `ctr` helper uses. */
  readonly namespace: string;
  /** Runs `ctr --address … --namespace … ARGS` (its own namespace unless told); never throws on a non-zero exit. */
  ctr(args: readonly string[], options?: { timeoutMs?: number; namespace?: string }): Promise<{ status: number | null; stdout: string; stderr: string }>;
  /** containerd's log so far. */
  log(): string;
  stop(): Promise<void>;
}

/** Why a private containerd cannot run here, or undefined when it can. */
export function containerdUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root';
  for (const bin of ['containerd', 'ctr', 'runc', 'containerd-shim-runc-v2']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0) return `${bin} is not installed`;
  }
  return undefined;
}

/** Runs a command without blocking the event loop (fastpulld's log pipe must keep draining). */
export function run(cmd: string, args: readonly string[], timeoutMs = 120_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/**
 * Starts containerd with a config of its own under `dir`, `snapshotterSocket` as `fastpull`.
 * Resolves once it answers; rejects with its log when it exits or does not answer in time.
 */
export async function startContainerd(dir: string, snapshotterSocket: string, cri?: CriOptions): Promise<PrivateContainerd> {
  mkdirSync(dir, { recursive: true });
  const address = join(dir, 'containerd.sock');
  const criConfig = cri
    ? `[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "${cri.snapshotter}"
    disable_snapshot_annotations = ${cri.disableSnapshotAnnotations}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${join(dir, 'cni-bin')}"
    conf_dir = "${join(dir, 'cni-conf')}"
`
    : '';
  const config = `version = 2
root = "${join(dir, 'root')}"
state = "${join(dir, 'state')}"
required_plugins = ["io.containerd.snapshotter.v1.fastpull"]
disabled_plugins = [${cri ? '' : '"io.containerd.grpc.v1.cri", '}"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${address}"
[ttrpc]
  address = "${address}.ttrpc"
[debug]
  level = "debug"

[proxy_plugins.fastpull]
  type = "snapshot"
  address = "${snapshotterSocket}"
${criConfig}`;
  return launchContainerd(dir, address, config);
}

/**
 * Starts containerd with `config` (written to `dir`/config.toml) whose gRPC address is `address`.
 * Resolves once it answers; rejects with its log when it exits or does not answer in time.
 */
export async function launchContainerd(dir: string, address: string, config: string): Promise<PrivateContainerd> {
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'config.toml');
  writeFileSync(configPath, config);
  const logPath = join(dir, 'containerd.log');
  const logFd = openSync(logPath, 'a');
  const proc: ChildProcess = spawn('containerd', ['--config', configPath], { stdio: ['ignore', logFd, logFd] });
  let exited: number | null | undefined;
  const gone = new Promise<void>((resolve) =>
    proc.on('exit', (code) => {
      exited = code;
      resolve();
    }),
  );
  const log = (): string => (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '');
  const namespace = `fastpull-test-${process.pid}`;
  const ctr: PrivateContainerd['ctr'] = (args, options = {}) => run('ctr', ['--address', address, '--namespace', options.namespace ?? namespace, ...args], options.timeoutMs);
  const stop = async (): Promise<void> => {
    if (exited !== undefined) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited !== undefined) throw new Error(`containerd exited with ${exited}:\n${log().slice(-4000)}`);
    if (existsSync(address) && (await ctr(['version'], { timeoutMs: 5_000 })).status === 0) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`containerd did not answer within 30 s:\n${log().slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { address, namespace, ctr, log, stop };
}

/**
 * Keys of the probe snapshots of {@link waitForSnapshotter} start with this. A probe whose `ctr` call
 * failed (timed out on a loaded machine, say) after containerd had reached the snapshotter leaves
 * an active record there that containerd's metadata never took; only containerd's garbage
 * collection removes it, at a time of its choosing. Tests that count records leave these out.
 */
export const PROBE_KEY_PREFIX = 'fastpull-probe-';

/** True for a record (its name is `namespace/id/key` in the snapshotter) of a probe of {@link waitForSnapshotter}. */
export const isProbeRecord = (name: string): boolean => (name.split('/').at(-1) ?? '').startsWith(PROBE_KEY_PREFIX);

/**
 * Waits until containerd reaches the proxy snapshotter `fastpull`: it dials lazily and, after a
 * failed dial, retries with a back-off of up to a few seconds; calls fail UNAVAILABLE meanwhile.
 * Listing goes to containerd's own metadata only, so the probe prepares (then removes) a snapshot.
 */
export async function waitForSnapshotter(containerd: PrivateContainerd, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const key = `${PROBE_KEY_PREFIX}${process.pid}`;
  for (;;) {
    const r = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'prepare', key], { timeoutMs: 10_000 });
    if (r.status === 0) break;
    if (Date.now() > deadline) throw new Error(`containerd does not reach the fastpull snapshotter: ${r.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const rm = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'rm', key], { timeoutMs: 10_000 });
  if (rm.status !== 0) throw new Error(`removing the probe snapshot: ${rm.stderr}`);
}

/** Options of {@link busyboxImage}. */
export interface BusyboxImageOptions {
  /**
   * Bytes of incompressible padding added to each layer (`pad/<layer>`, seeded by `seed`), so that
   * every layer blob is larger than a small range size; default none.
   */
  readonly padding?: number;
  /** Seed of the padding: another seed, other layer blobs; default 1. */
  readonly seed?: number;
  /** A file `etc/variant` with this text in the top layer only: an image sharing its lower layers with the plain one. */
  readonly variant?: string;
}

/** Three layers over a static busybox: files replaced, deleted (whiteout), hidden (opaque dir), hard-linked. */
export async function busyboxImage(options: BusyboxImageOptions = {}): Promise<BuiltImage> {
  const l1: LayerEntry[] = [
    { type: 'file', path: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 },
    { type: 'symlink', path: 'bin/sh', target: 'busybox' },
    { type: 'file', path: 'etc/one', content: 'one\n' },
    { type: 'file', path: 'del/gone', content: 'gone\n' },
    { type: 'file', path: 'del/kept', content: 'kept\n' },
    { type: 'file', path: 'opq/a', content: 'a\n' },
  ];
  const l2: LayerEntry[] = [
    { type: 'file', path: 'etc/two', content: 'two\n', mode: 0o600, uid: 1000, gid: 1000 },
    { type: 'whiteout', path: 'del/gone' },
    { type: 'opaque', path: 'opq' },
    { type: 'file', path: 'opq/b', content: 'b\n' },
  ];
  const l3: LayerEntry[] = [
    { type: 'file', path: 'etc/three', content: 'three\n' },
    { type: 'hardlink', path: 'etc/three-link', target: 'etc/three' },
    { type: 'file', path: 'etc/one', content: 'one v3\n' },
  ];
  if (options.variant !== undefined) l3.push({ type: 'file', path: 'etc/variant', content: options.variant });
  const layers = [l1, l2, l3];
  if (options.padding) {
    const prng = new Prng(options.seed ?? 1);
    layers.forEach((l, i) => l.push({ type: 'file', path: `pad/${i}`, content: prng.bytes(options.padding!) }));
  }
  return buildImage({ layers });
}

/** The output `ctr run` of {@link busyboxImage} gives for {@link BUSYBOX_PROBE}. */
export const BUSYBOX_PROBE_OUTPUT = 'one v3\ntwo\nthree\nthree\nkept\nb\ngone-absent\n';
/** A command that prints a file of every layer of {@link busyboxImage}, and what was deleted. */
export const BUSYBOX_PROBE = ['/bin/busybox', 'sh', '-c', 'cat /etc/one /etc/two /etc/three /etc/three-link; ls /del; ls /opq; test -e /del/gone && echo gone-present || echo gone-absent'];

/** What CRI's ImageStatus says of an image (the fields the tests read). */
export interface CriImage {
  readonly id: string;
  readonly repoTags: string[];
  readonly repoDigests: string[];
  readonly size: number;
}

/** A client of the CRI image service on containerd's socket (what kubelet calls). */
export interface CriImages {
  pullImage(image: string): Promise<string>;
  /** The image as CRI lists it, or undefined when CRI has none by that name. */
  imageStatus(image: string): Promise<CriImage | undefined>;
  removeImage(image: string): Promise<void>;
  close(): void;
}

export function criImages(address: string): CriImages {
  const def = protoLoader.loadSync(['runtime/v1/api.proto'], { keepCase: false, longs: Number, enums: String, defaults: true, includeDirs: [join(import.meta.dirname, 'proto')] });
  const Ctor = grpc.makeGenericClientConstructor(def['runtime.v1.ImageService'] as grpc.ServiceDefinition, 'ImageService');
  const raw = new Ctor(`unix:${address}`, grpc.credentials.createInsecure()) as unknown as Record<string, (req: unknown, cb: (e: grpc.ServiceError | null, res: unknown) => void) => void> & { close(): void };
  const call = <T>(method: string, req: unknown): Promise<T> => new Promise((resolve, reject) => raw[method]!.call(raw, req, (e, res) => (e ? reject(e) : resolve(res as T))));
  return {
    pullImage: async (image) => (await call<{ imageRef: string }>('PullImage', { image: { image } })).imageRef,
    imageStatus: async (image) => (await call<{ image: CriImage | null }>('ImageStatus', { image: { image } })).image ?? undefined,
    removeImage: async (image) => void (await call('RemoveImage', { image: { image } })),
    close: () => raw.close(),
  };
}
