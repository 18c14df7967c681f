// A private containerd for tests: its own root, state, gRPC address and config under a temporary
// directory, with fastpulld's snapshotter socket as the proxy snapshotter `fastpull` (required: a
// containerd that cannot load it fails to start). The config is the shipped file of
// deploy/containerd/ for the release under test, with only its paths made private and the test's
// CRI choices applied, so every shipped config is started for real. The release is
// $FASTPULL_CONTAINERD (1.6, Debian's, on PATH; 1.7, 2.0 and 2.2 as scripts/peers.sh builds them);
// vitest.config.ts runs the containerd suites once per release. Shim sockets and runc state are
// shared with any system containerd, so callers use their own namespace and unique container ids.
// Also: a runnable busybox image of several layers, and a client of the CRI image service.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { parse, stringify, type TomlTable } from 'smol-toml';
import type { Platform } from '@fastpull/core';
import { buildImage, Prng, type BuiltImage, type LayerEntry } from '@fastpull/core/testing';

const repoRoot = join(import.meta.dirname, '..');

/** A containerd release the suites run against. */
export interface ContainerdRelease {
  /** `1.6`, `1.7`, `2.0`, `2.2`. */
  readonly name: string;
  /** The major version: 2 reads config version 3 and has the split CRI plugins. */
  readonly major: 1 | 2;
  /** Where its containerd, ctr and containerd-shim-runc-v2 are; undefined for the ones on PATH. */
  readonly binDir: string | undefined;
  /** The file of deploy/containerd/ written for it. */
  readonly configFile: string;
  /** 2.1 and later: CRI pulls go through the transfer service unless told `use_local_image_pull`. */
  readonly transfer: boolean;
}

/** The prefix scripts/peers.sh builds into. */
export const peersPrefix = process.env.FASTPULL_PEERS ?? join(repoRoot, '.peers');

export const CONTAINERD_RELEASES: readonly ContainerdRelease[] = [
  { name: '1.6', major: 1, binDir: undefined, configFile: 'config-1.6.toml', transfer: false },
  { name: '1.7', major: 1, binDir: join(peersPrefix, 'containerd-1.7', 'bin'), configFile: 'config-1.7.toml', transfer: false },
  { name: '2.0', major: 2, binDir: join(peersPrefix, 'containerd-2.0', 'bin'), configFile: 'config-2.0.toml', transfer: false },
  { name: '2.2', major: 2, binDir: join(peersPrefix, 'containerd-2.2', 'bin'), configFile: 'config-2.1.toml', transfer: true },
];

export function containerdRelease(name: string): ContainerdRelease {
  const r = CONTAINERD_RELEASES.find((c) => c.name === name);
  if (!r) throw new Error(`FASTPULL_CONTAINERD=${name}: not one of ${CONTAINERD_RELEASES.map((c) => c.name).join(', ')}`);
  return r;
}

/** The release this test process runs against ($FASTPULL_CONTAINERD, default 1.6). */
export const release: ContainerdRelease = containerdRelease(process.env.FASTPULL_CONTAINERD ?? '1.6');

/** A binary of `r` (ctr, containerd): its path in the peers prefix, or its name on PATH. */
export const releaseBin = (r: ContainerdRelease, bin: string): string => (r.binDir ? join(r.binDir, bin) : bin);

/**
 * `ctr images pull` flags for containerd's own client-side pull (no remote-snapshotter labels, so
 * containerd downloads and applies every layer itself): 2.x pulls through the transfer service
 * unless told `--local`, and the transfer service labels Prepares for a snapshotter that exports
 * enable_remote_snapshot_annotations, as the shipped 2.1 file's does.
 */
export const ctrLocalPull = (r: ContainerdRelease = release): string[] => (r.major === 2 ? ['--local'] : []);

/** PATH for a process of `r`: containerd finds its shim on PATH, so the release's own comes first. */
export const releasePath = (r: ContainerdRelease): string => (r.binDir ? `${r.binDir}${delimiter}${process.env.PATH ?? ''}` : (process.env.PATH ?? ''));

/** What the CRI plugin should do, when a test needs it (else it is disabled). */
export interface CriOptions {
  /** The snapshotter CRI pulls unpack into. */
  readonly snapshotter: string;
  /** containerd's `disable_snapshot_annotations` (the remote-snapshotter labels are sent when false). */
  readonly disableSnapshotAnnotations: boolean;
  /**
   * 2.1 and later: `use_local_image_pull` (CRI pulls as 2.0 did, client side) instead of the transfer
   * service the shipped file configures; default $FASTPULL_CRI_PULL = `local`. Ignored by earlier releases.
   */
  readonly localImagePull?: boolean;
  /**
   * The image RunPodSandbox starts each pod's sandbox container from (1.x `sandbox_image`, 2.x
   * `pinned_images.sandbox`): the default, registry.k8s.io's pause, is out of reach of a test.
   */
  readonly sandboxImage?: string;
  /**
   * CRI's `restrict_oom_score_adj`: no container's oom_score_adj below containerd's own. Needed
   * where containerd lacks CAP_SYS_RESOURCE, which lowering it takes (a pod's sandbox asks for -998).
   */
  readonly restrictOomScoreAdj?: boolean;
}

/** The CRI pull path of this test process on 2.1 and later: `transfer` (as shipped) or `local` ($FASTPULL_CRI_PULL). */
export const criPull: 'transfer' | 'local' = process.env.FASTPULL_CRI_PULL === 'local' ? 'local' : 'transfer';

/** A running private containerd. */
export interface PrivateContainerd {
  /** Its gRPC socket. */
  readonly address: string;
  /** The namespace the `ctr` helper uses. */
  readonly namespace: string;
  /** Its release. */
  readonly release: ContainerdRelease;
  /** Runs `ctr --address … --namespace … ARGS` (its own namespace unless told); never throws on a non-zero exit. */
  ctr(args: readonly string[], options?: { timeoutMs?: number; namespace?: string }): Promise<{ status: number | null; stdout: string; stderr: string }>;
  /** containerd's log so far. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Why a private containerd cannot run here at all (not root), or undefined. A release whose binaries
 * are missing is not a reason to skip: {@link startContainerd} fails, saying what to install or build.
 */
export function containerdUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root';
  return undefined;
}

/** What `r` lacks on this machine (its binaries, runc), or undefined when it has everything. */
export function releaseMissing(r: ContainerdRelease = release): string | undefined {
  const missing = ['containerd', 'ctr', 'containerd-shim-runc-v2'].filter((bin) =>
    r.binDir ? !existsSync(join(r.binDir, bin)) : spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0,
  );
  if (spawnSync('sh', ['-c', 'command -v runc']).status !== 0) missing.push('runc');
  if (missing.length === 0) return undefined;
  const how = r.binDir ? `bash scripts/peers.sh containerd-${r.name}` : 'bash scripts/bootstrap.sh (Debian packages containerd, runc)';
  return `containerd ${r.name}: ${missing.join(', ')} not found (${how})`;
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

const table = (v: unknown): TomlTable => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as TomlTable) : {});
/** `t[key]` as a table, created when absent. */
const sub = (t: TomlTable, key: string): TomlTable => {
  if (table(t[key]) !== t[key]) t[key] = {};
  return t[key];
};

/** Where a private containerd keeps everything, and what it is pointed at. */
export interface PrivatePaths {
  /** Its directory: root, state, sockets, config and log go under it. */
  readonly dir: string;
  /** fastpulld's snapshotter socket. */
  readonly snapshotterSocket: string;
  /** fastpulld's store root (the proxy plugin's exports.root, where the file names one). */
  readonly fastpullRoot?: string;
}

/**
 * The shipped config for `r` as a private containerd runs it: every path made private, CRI kept off
 * TCP, debug logs, fastpull required, plugins that would reach outside the test's directory (NRI's
 * socket, the snapshotters this machine lacks) off; `cri` applied to the CRI keys of `r`'s layout,
 * the file's own CRI settings kept with `'shipped'`, or the CRI plugins off when it is undefined.
 * Nothing else of the file is changed.
 */
export function containerdConfig(
  r: ContainerdRelease,
  paths: PrivatePaths,
  cri?: CriOptions | 'shipped',
  source?: string,
): { config: string; address: string } {
  const t = parse(source ?? readFileSync(join(repoRoot, 'deploy', 'containerd', r.configFile), 'utf8'));
  const address = join(paths.dir, 'containerd.sock');
  t.root = join(paths.dir, 'root');
  t.state = join(paths.dir, 'state');
  t.grpc = { address };
  t.ttrpc = { address: `${address}.ttrpc` };
  t.debug = { level: 'debug' };
  t.required_plugins = ['io.containerd.snapshotter.v1.fastpull'];
  const disabled = [
    'io.containerd.snapshotter.v1.aufs',
    'io.containerd.snapshotter.v1.btrfs',
    'io.containerd.snapshotter.v1.zfs',
    'io.containerd.snapshotter.v1.devmapper',
  ];
  if (r.major === 2) disabled.push('io.containerd.nri.v1.nri', 'io.containerd.snapshotter.v1.erofs');
  const proxy = sub(sub(t, 'proxy_plugins'), 'fastpull');
  proxy.address = paths.snapshotterSocket;
  if (proxy.exports && paths.fastpullRoot) table(proxy.exports).root = paths.fastpullRoot;
  const plugins = sub(t, 'plugins');
  const cniDirs = { bin: join(paths.dir, 'cni-bin'), conf: join(paths.dir, 'cni-conf') };
  if (r.major === 1) {
    if (!cri) disabled.push('io.containerd.grpc.v1.cri');
    const plugin = sub(plugins, 'io.containerd.grpc.v1.cri');
    Object.assign(plugin, {
      disable_tcp_service: true,
      stream_server_address: '127.0.0.1',
      stream_server_port: '0',
      cni: { bin_dir: cniDirs.bin, conf_dir: cniDirs.conf },
    });
    if (cri && cri !== 'shipped') {
      Object.assign(sub(plugin, 'containerd'), { snapshotter: cri.snapshotter, disable_snapshot_annotations: cri.disableSnapshotAnnotations });
      if (cri.sandboxImage) plugin.sandbox_image = cri.sandboxImage;
      if (cri.restrictOomScoreAdj) plugin.restrict_oom_score_adj = true;
    }
  } else {
    if (!cri)
      disabled.push(
        'io.containerd.grpc.v1.cri',
        'io.containerd.cri.v1.runtime',
        'io.containerd.cri.v1.images',
        'io.containerd.podsandbox.controller.v1.podsandbox',
        'io.containerd.sandbox.controller.v1.shim',
      );
    Object.assign(sub(plugins, 'io.containerd.grpc.v1.cri'), { disable_tcp_service: true, stream_server_address: '127.0.0.1', stream_server_port: '0' });
    Object.assign(sub(plugins, 'io.containerd.cri.v1.runtime'), { cni: { bin_dirs: [cniDirs.bin], conf_dir: cniDirs.conf } });
    if (cri && cri !== 'shipped') {
      const images = sub(plugins, 'io.containerd.cri.v1.images');
      images.snapshotter = cri.snapshotter;
      if (cri.sandboxImage) sub(images, 'pinned_images').sandbox = cri.sandboxImage;
      if (cri.restrictOomScoreAdj) sub(plugins, 'io.containerd.cri.v1.runtime').restrict_oom_score_adj = true;
      const local = cri.localImagePull ?? criPull === 'local';
      if (!r.transfer || local) {
        // The client-side pull reads the CRI key (and 2.1+ turns to it when the key says false).
        images.disable_snapshot_annotations = cri.disableSnapshotAnnotations;
        if (r.transfer) images.use_local_image_pull = true;
      } else {
        // The transfer service labels Prepares for a snapshotter that exports this; the CRI key
        // must stay unset there, or containerd falls back to the client-side pull.
        delete images.disable_snapshot_annotations;
        const exports = sub(proxy, 'exports');
        if (cri.disableSnapshotAnnotations) delete exports.enable_remote_snapshot_annotations;
        else exports.enable_remote_snapshot_annotations = 'true';
      }
    }
  }
  t.disabled_plugins = disabled;
  return { config: stringify(t), address };
}

/**
 * Starts the release under test with its shipped config (see {@link containerdConfig}) under `dir`,
 * `snapshotterSocket` as `fastpull`. Resolves once it answers; rejects with its log when it exits or
 * does not answer in time, or with what is missing when the release is not installed or built.
 */
export async function startContainerd(
  dir: string,
  snapshotterSocket: string,
  cri?: CriOptions | 'shipped',
  options: { release?: ContainerdRelease; fastpullRoot?: string } = {},
): Promise<PrivateContainerd> {
  const r = options.release ?? release;
  const { config, address } = containerdConfig(r, { dir, snapshotterSocket, fastpullRoot: options.fastpullRoot }, cri);
  return launchContainerd(dir, address, config, r);
}

/**
 * Starts containerd of release `r` with `config` (written to `dir`/config.toml) whose gRPC address
 * is `address`. Resolves once it answers; rejects with its log when it exits or does not answer in time.
 */
export async function launchContainerd(dir: string, address: string, config: string, r: ContainerdRelease = release): Promise<PrivateContainerd> {
  const missing = releaseMissing(r);
  if (missing) throw new Error(missing);
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'config.toml');
  writeFileSync(configPath, config);
  const logPath = join(dir, 'containerd.log');
  const logFd = openSync(logPath, 'a');
  const env = { ...process.env, PATH: releasePath(r) };
  const proc: ChildProcess = spawn(releaseBin(r, 'containerd'), ['--config', configPath], { stdio: ['ignore', logFd, logFd], env });
  let exited: number | null | undefined;
  const gone = new Promise<void>((resolve) =>
    proc.on('exit', (code) => {
      exited = code;
      resolve();
    }),
  );
  const log = (): string => (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '');
  const namespace = `fastpull-test-${process.pid}`;
  const ctr: PrivateContainerd['ctr'] = (args, options = {}) =>
    run(releaseBin(r, 'ctr'), ['--address', address, '--namespace', options.namespace ?? namespace, ...args], options.timeoutMs);
  const stop = async (): Promise<void> => {
    if (exited !== undefined) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
    await gone;
    clearTimeout(timer);
  };
  // Generous: a containerd that starts in a second alone can take a minute on a machine held by other work.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exited !== undefined) throw new Error(`containerd ${r.name} exited with ${exited}:\n${log().slice(-4000)}`);
    if (existsSync(address) && (await ctr(['version'], { timeoutMs: 30_000 })).status === 0) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`containerd ${r.name} did not answer within 120 s:\n${log().slice(-4000)}`);
    }
    await new Promise((res) => setTimeout(res, 200));
  }
  return { address, namespace, release: r, ctr, log, stop };
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
export async function waitForSnapshotter(containerd: PrivateContainerd, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const key = `${PROBE_KEY_PREFIX}${process.pid}`;
  for (;;) {
    const r = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'prepare', key], { timeoutMs: 60_000 });
    if (r.status === 0) break;
    if (Date.now() > deadline) throw new Error(`containerd does not reach the fastpull snapshotter: ${r.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const rm = await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'rm', key], { timeoutMs: 60_000 });
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
  /** The platform its config and descriptor name; default linux/amd64 (the builder's). */
  readonly platform?: Platform;
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
  return buildImage({ layers, ...(options.platform ? { platform: options.platform } : {}) });
}

/** The output `ctr run` of {@link busyboxImage} gives for {@link BUSYBOX_PROBE}. */
export const BUSYBOX_PROBE_OUTPUT = 'one v3\ntwo\nthree\nthree\nkept\nb\ngone-absent\n';
/** A command that prints a file of every layer of {@link busyboxImage}, and what was deleted. */
export const BUSYBOX_PROBE = [
  '/bin/busybox',
  'sh',
  '-c',
  'cat /etc/one /etc/two /etc/three /etc/three-link; ls /del; ls /opq; test -e /del/gone && echo gone-present || echo gone-absent',
];

/** What CRI's ImageStatus says of an image (the fields the tests read). */
export interface CriImage {
  readonly id: string;
  readonly repoTags: string[];
  readonly repoDigests: string[];
  readonly size: number;
}

/** Registry credentials as kubelet sends them in PullImageRequest.auth (from a pull secret). */
export interface CriAuth {
  readonly username: string;
  readonly password: string;
}

/** A client of the CRI image service on containerd's socket (what kubelet calls). */
export interface CriImages {
  /** PullImage, with `auth` as kubelet sends an image pull secret's credentials; resolves with the image id. */
  pullImage(image: string, auth?: CriAuth): Promise<string>;
  /** The image as CRI lists it, or undefined when CRI has none by that name. */
  imageStatus(image: string): Promise<CriImage | undefined>;
  removeImage(image: string): Promise<void>;
  close(): void;
}

export function criImages(address: string): CriImages {
  const def = protoLoader.loadSync(['runtime/v1/api.proto'], {
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: true,
    includeDirs: [join(import.meta.dirname, 'proto')],
  });
  const Ctor = grpc.makeGenericClientConstructor(def['runtime.v1.ImageService'] as grpc.ServiceDefinition, 'ImageService');
  const raw = new Ctor(`unix:${address}`, grpc.credentials.createInsecure()) as unknown as Record<
    string,
    (req: unknown, cb: (e: grpc.ServiceError | null, res: unknown) => void) => void
  > & { close(): void };
  const call = <T>(method: string, req: unknown): Promise<T> =>
    new Promise((resolve, reject) => raw[method]!.call(raw, req, (e, res) => (e ? reject(e) : resolve(res as T))));
  return {
    pullImage: async (image, auth) =>
      (await call<{ imageRef: string }>('PullImage', { image: { image }, ...(auth ? { auth: { username: auth.username, password: auth.password } } : {}) }))
        .imageRef,
    imageStatus: async (image) => (await call<{ image: CriImage | null }>('ImageStatus', { image: { image } })).image ?? undefined,
    removeImage: async (image) => void (await call('RemoveImage', { image: { image } })),
    close: () => raw.close(),
  };
}
