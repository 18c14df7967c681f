// The containerd configurations in deploy/containerd as containerd reads them. Each file (and each
// alternative it shows in comments) parses as TOML and uses only keys that its containerd version's
// config structures read, with the values the fast path needs. The 1.6 file runs for real: Debian's
// containerd 1.6.20 started with it (only its paths made private) loads the CRI plugin and the
// fastpull proxy plugin, and a CRI PullImage is answered by fastpulld's fast path. The 1.7 file
// loads in 1.6.20 too (its 1.7-only keys are ignored, as 1.7 before 1.7.16 ignores `exports`).
// containerd 2.x cannot run here: its files are checked against the keys it reads, not started.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify, type TomlTable } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SNAPSHOTTER_SOCKET } from '@fastpull/daemon/paths';
import { findDistributionBinary, pushImage, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { busyboxImage, containerdUnavailable, criImages, launchContainerd, waitForSnapshotter, type PrivateContainerd } from './containerd.js';
import { overlayUnavailable, repoRoot, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const dir = join(repoRoot, 'deploy', 'containerd');
const fastpulld = parse(readFileSync(join(repoRoot, 'deploy', 'fastpulld.toml'), 'utf8'));
const text = (name: string): string => readFileSync(join(dir, name), 'utf8');
const table = (v: unknown): TomlTable => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as TomlTable) : {});

/**
 * The key paths each containerd version reads, as far as these files use them, from its config
 * structures (server config: ProxyPlugin; CRI: PluginConfig/ContainerdConfig/Runtime in 1.x,
 * ImageConfig/ImagePlatform in 2.x; the transfer plugin's transferConfig/unpackConfiguration).
 * `*` is any name; `[]` an array of tables.
 */
const PROXY = ['proxy_plugins.*.type', 'proxy_plugins.*.address', 'proxy_plugins.*.platform'];
const KEYS: Record<string, string[]> = {
  '1.6': ['version', ...PROXY, 'plugins.io.containerd.grpc.v1.cri.containerd.snapshotter', 'plugins.io.containerd.grpc.v1.cri.containerd.disable_snapshot_annotations'],
  '1.7': [
    'version',
    ...PROXY,
    'proxy_plugins.*.exports.*', // 1.7.16
    'plugins.io.containerd.grpc.v1.cri.containerd.snapshotter',
    'plugins.io.containerd.grpc.v1.cri.containerd.disable_snapshot_annotations',
    'plugins.io.containerd.grpc.v1.cri.containerd.runtimes.*.snapshotter',
  ],
  '2.0': [
    'version',
    ...PROXY,
    'proxy_plugins.*.exports.*',
    'plugins.io.containerd.cri.v1.images.snapshotter',
    'plugins.io.containerd.cri.v1.images.disable_snapshot_annotations',
    'plugins.io.containerd.cri.v1.images.runtime_platforms.*.snapshotter',
  ],
  '2.1': [
    'version',
    ...PROXY,
    'proxy_plugins.*.exports.*',
    'plugins.io.containerd.cri.v1.images.snapshotter',
    'plugins.io.containerd.cri.v1.images.disable_snapshot_annotations',
    'plugins.io.containerd.cri.v1.images.use_local_image_pull',
    'plugins.io.containerd.transfer.v1.local.unpack_config[].platform',
    'plugins.io.containerd.transfer.v1.local.unpack_config[].snapshotter',
    'plugins.io.containerd.transfer.v1.local.unpack_config[].differ',
  ],
};

/** Every leaf key path of a table, with `[]` for arrays of tables. */
function keyPaths(t: TomlTable, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(t)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (Array.isArray(v) && v.every((e) => table(e) === e)) for (const e of v) out.push(...keyPaths(e as TomlTable, `${path}[]`));
    else if (table(v) === v) out.push(...keyPaths(v as TomlTable, path));
    else out.push(path);
  }
  return [...new Set(out)];
}

function unknownKeys(t: TomlTable, version: string): string[] {
  const allowed = KEYS[version]!.map((p) => new RegExp(`^${p.replace(/[.[\]]/g, (c) => `\\${c}`).replace(/\\\*|\*/g, '[^.]+')}$`));
  return keyPaths(t).filter((p) => !allowed.some((a) => a.test(p)));
}

/**
 * The file with each run of commented TOML lines (`#   [table]`, `#   key = value`) uncommented
 * in place: the alternatives the file offers, each a config of its own.
 */
function alternatives(source: string): string[] {
  const lines = source.split('\n');
  const toml = /^(\s*)#\s+(\[[^\]]+\]|[a-z_]+ = \S.*)$/;
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!toml.test(lines[i]!) || (i > 0 && toml.test(lines[i - 1]!))) continue;
    const copy = [...lines];
    for (let j = i; j < lines.length && toml.test(lines[j]!); j++) copy[j] = lines[j]!.replace(toml, '$1$2');
    out.push(copy.join('\n'));
  }
  return out;
}

const FILES: Array<[string, string, number]> = [
  ['config-1.6.toml', '1.6', 2],
  ['config-1.7.toml', '1.7', 2],
  ['config-2.0.toml', '2.0', 3],
  ['config-2.1.toml', '2.1', 3],
];

describe('deploy/containerd: the keys each containerd version reads', () => {
  it.each(FILES)('%s (containerd %s) parses and every key, in it and in its commented alternatives, is one that version reads', (file, version, configVersion) => {
    const variants = [text(file), ...alternatives(text(file))];
    expect(variants.length, 'the commented alternatives found').toBe({ '1.6': 1, '1.7': 2, '2.0': 2, '2.1': 2 }[version]);
    for (const v of variants) {
      const t = parse(v);
      expect(unknownKeys(t, version)).toEqual([]);
      expect(t.version).toBe(configVersion);
    }
  });

  it.each(FILES)('%s names fastpulld’s snapshotter socket and root, and declares no capability', (file, version) => {
    const t = parse(text(file));
    const proxy = table(table(t.proxy_plugins).fastpull);
    expect(proxy.type).toBe('snapshot');
    expect(proxy.address).toBe(DEFAULT_SNAPSHOTTER_SOCKET);
    expect(proxy.address).toBe(fastpulld.snapshotter_socket);
    expect(proxy.capabilities).toBeUndefined();
    if (version === '1.6') expect(proxy.exports).toBeUndefined();
    else expect(table(proxy.exports).root).toBe(fastpulld.root);
  });

  it('1.x: the CRI plugin unpacks into fastpull with the snapshot labels on', () => {
    for (const file of ['config-1.6.toml', 'config-1.7.toml']) {
      const cri = table(table(table(parse(text(file)).plugins)['io.containerd.grpc.v1.cri']).containerd);
      expect(cri, file).toEqual({ snapshotter: 'fastpull', disable_snapshot_annotations: false });
    }
    const perRuntime = parse(alternatives(text('config-1.7.toml'))[0]!);
    expect(table(table(table(table(table(perRuntime.plugins)['io.containerd.grpc.v1.cri']).containerd).runtimes).runc).snapshotter).toBe('fastpull');
  });

  it('2.x: the CRI images plugin unpacks into fastpull; 2.1 also through the transfer service', () => {
    for (const file of ['config-2.0.toml', 'config-2.1.toml']) {
      const t = parse(text(file));
      expect(table(table(t.plugins)['io.containerd.cri.v1.images'])).toMatchObject({ snapshotter: 'fastpull', disable_snapshot_annotations: false });
      expect(table(t.plugins)['io.containerd.grpc.v1.cri'], file).toBeUndefined();
    }
    const t = parse(text('config-2.1.toml'));
    // The transfer service adds the labels only for a snapshotter exporting this, as the string "true".
    expect(table(table(table(t.proxy_plugins).fastpull).exports).enable_remote_snapshot_annotations).toBe('true');
    const unpack = table(table(t.plugins)['io.containerd.transfer.v1.local']).unpack_config as TomlTable[];
    expect(unpack.map((u) => u.snapshotter)).toEqual(['overlayfs', 'fastpull']);
    for (const u of unpack) {
      expect(u.platform).toMatch(/^linux\/(amd64|arm64)$/);
      expect(u.differ).toBe('walking');
    }
    const local = parse(alternatives(text('config-2.1.toml'))[0]!);
    expect(table(table(local.plugins)['io.containerd.cri.v1.images']).use_local_image_pull).toBe(true);
  });
});

/** A deploy config with every path made private, CRI kept off TCP and ports; nothing else changed. */
function privateConfig(source: string, work: string, snapshotterSocket: string, fastpullRoot: string): { config: string; address: string } {
  const t = parse(source);
  const address = join(work, 'containerd.sock');
  t.root = join(work, 'root');
  t.state = join(work, 'state');
  t.grpc = { address };
  t.ttrpc = { address: `${address}.ttrpc` };
  t.debug = { level: 'debug' };
  const proxy = table(table(t.proxy_plugins).fastpull);
  proxy.address = snapshotterSocket;
  if (proxy.exports) table(proxy.exports).root = fastpullRoot;
  const cri = table(table(t.plugins)['io.containerd.grpc.v1.cri']);
  Object.assign(cri, { disable_tcp_service: true, stream_server_address: '127.0.0.1', stream_server_port: '0', cni: { bin_dir: join(work, 'cni-bin'), conf_dir: join(work, 'cni-conf') } });
  return { config: stringify(t), address };
}

/** `ctr plugins ls` rows: type, id and status. */
async function plugins(containerd: PrivateContainerd): Promise<Array<{ type: string; id: string; status: string }>> {
  const r = await containerd.ctr(['plugins', 'ls']);
  if (r.status !== 0) throw new Error(`ctr plugins ls: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .map((c) => ({ type: c[0]!, id: c[1]!, status: c.at(-1)! }));
}

const work = tempDir('deploy-containerd');
const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the deploy/containerd run with containerd 1.6: ${reason}`);

describe.skipIf(reason !== undefined)('deploy/containerd/config-1.6.toml in containerd 1.6.20', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let image: BuiltImage;
  const snapSocket = join(work.dir, 'snapshotter.sock');
  const root = join(work.dir, 'fastpull-root');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await busyboxImage();
    await pushImage(registry.url, 'deploy/busybox', 'v1', image);
    daemon = await serveDaemon(['--socket', join(work.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root]);
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    await registry?.stop();
    work.cleanup();
  });

  it('loads the CRI plugin and the fastpull proxy plugin, and a CRI PullImage is answered by fastpulld', async () => {
    const ctrDir = join(work.dir, 'containerd-1.6');
    const { config, address } = privateConfig(text('config-1.6.toml'), ctrDir, snapSocket, root);
    const containerd = await launchContainerd(ctrDir, address, config);
    const cri = criImages(containerd.address);
    try {
      const loaded = await plugins(containerd);
      expect(loaded.find((p) => p.type === 'io.containerd.snapshotter.v1' && p.id === 'fastpull')?.status).toBe('ok');
      expect(loaded.find((p) => p.type === 'io.containerd.grpc.v1' && p.id === 'cri')?.status).toBe('ok');
      await waitForSnapshotter(containerd);

      const ref = `${registry.host}/deploy/busybox:v1`;
      expect(await cri.pullImage(ref)).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(daemon.logs.filter((l) => l.msg === 'layer recorded for containerd')).toHaveLength(image.layers.length);
      const content = await containerd.ctr(['content', 'ls', '-q'], { namespace: 'k8s.io' });
      expect(content.stdout).toContain(image.manifestDigest);
      for (const l of image.layers) expect(content.stdout).not.toContain(l.digest);
      // What docs/containerd.md tells users to expect: the image is incomplete to containerd.
      // Of the config and the layers only the config is there; unpacked in fastpull all the same.
      const check = await containerd.ctr(['images', 'check', '--snapshotter', 'fastpull'], { namespace: 'k8s.io' });
      expect(check.stdout.split('\n').find((l) => l.startsWith(`${ref} `))).toMatch(new RegExp(`incomplete \\(1/${image.layers.length + 1}\\).*\\btrue\\s*$`));
      await cri.removeImage(ref);
    } finally {
      cri.close();
      await containerd.stop();
    }
  });

  it('config-1.7.toml loads in 1.6.20 as well: the keys 1.6 does not know are ignored', async () => {
    const ctrDir = join(work.dir, 'containerd-1.7-file');
    const { config, address } = privateConfig(text('config-1.7.toml'), ctrDir, snapSocket, root);
    const containerd = await launchContainerd(ctrDir, address, config);
    try {
      const loaded = await plugins(containerd);
      expect(loaded.find((p) => p.id === 'fastpull')?.status).toBe('ok');
      expect(loaded.find((p) => p.id === 'cri')?.status).toBe('ok');
    } finally {
      await containerd.stop();
    }
  });
});
