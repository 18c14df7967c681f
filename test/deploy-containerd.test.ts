// The containerd configurations in deploy/containerd as containerd reads them. Each file (and each
// alternative it shows in comments) parses as TOML and uses only keys that its containerd version's
// config structures read, with the values the fast path needs. Then each file runs for real on every
// release it is for: Debian's containerd 1.6.20, and 1.7, 2.0 and 2.2 as scripts/peers.sh builds
// them, started with the file (only its paths made private), load the CRI plugin and the fastpull
// proxy plugin, reach fastpulld through it, and a CRI PullImage is answered by fastpulld's fast path
// (containerd holds no layer blob). The 2.1 file runs on 2.2 twice: as shipped (CRI pulls through
// the transfer service) and with its use_local_image_pull alternative. The 1.7 file also loads in
// 1.6.20 (its 1.7-only keys are ignored, as 1.7 before 1.7.16 ignores `exports`). And the guide's
// commands around them run as written: step 4's link, step 5's checks on every release (the lines
// `ctr plugins ls` prints, the probe snapshot with fastpulld serving, stopped and killed), and the
// messages its troubleshooting rows quote.
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify, type TomlTable } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SNAPSHOTTER_SOCKET } from '@fastpull/daemon/paths';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import {
  busyboxImage,
  containerdConfig,
  containerdRelease,
  containerdUnavailable,
  criImages,
  launchContainerd,
  waitForSnapshotter,
  type ContainerdRelease,
  type PrivateContainerd,
} from './containerd.js';
import { escapeRegExp, guide, guideLine, guideQuote, lastLine, shell } from './guide.js';
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
  '1.6': [
    'version',
    ...PROXY,
    'plugins.io.containerd.grpc.v1.cri.containerd.snapshotter',
    'plugins.io.containerd.grpc.v1.cri.containerd.disable_snapshot_annotations',
  ],
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
    else if (table(v) === v) out.push(...keyPaths(v, path));
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
  it.each(FILES)(
    '%s (containerd %s) parses and every key, in it and in its commented alternatives, is one that version reads',
    (file, version, configVersion) => {
      const variants = [text(file), ...alternatives(text(file))];
      expect(variants.length, 'the commented alternatives found').toBe({ '1.6': 1, '1.7': 2, '2.0': 2, '2.1': 2 }[version]);
      for (const v of variants) {
        const t = parse(v);
        expect(unknownKeys(t, version)).toEqual([]);
        expect(t.version).toBe(configVersion);
      }
    },
  );

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
      expect(table(table(t.plugins)['io.containerd.cri.v1.images']).snapshotter).toBe('fastpull');
      expect(table(t.plugins)['io.containerd.grpc.v1.cri'], file).toBeUndefined();
    }
    expect(table(table(parse(text('config-2.0.toml')).plugins)['io.containerd.cri.v1.images']).disable_snapshot_annotations).toBe(false);
    const t = parse(text('config-2.1.toml'));
    // Unset, so that CRI pulls stay on the transfer service (false makes 2.1+ fall back to the local pull).
    expect(table(table(t.plugins)['io.containerd.cri.v1.images']).disable_snapshot_annotations).toBeUndefined();
    // The transfer service adds the labels only for a snapshotter exporting this, as the string "true".
    expect(table(table(table(t.proxy_plugins).fastpull).exports).enable_remote_snapshot_annotations).toBe('true');
    const unpack = table(table(t.plugins)['io.containerd.transfer.v1.local']).unpack_config as TomlTable[];
    expect(unpack.map((u) => u.snapshotter)).toEqual(['overlayfs', 'fastpull']);
    for (const u of unpack) {
      expect(u.platform).toMatch(/^linux\/(amd64|arm64)$/);
      expect(u.differ).toBe('walking');
    }
    const local = parse(alternatives(text('config-2.1.toml'))[0]!);
    expect(table(table(local.plugins)['io.containerd.cri.v1.images'])).toMatchObject({ use_local_image_pull: true, disable_snapshot_annotations: false });
  });
});

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

/** The version containerd's server reports (`ctr version`), e.g. `1.7.35` or `v2.2.10`. */
async function serverVersion(containerd: PrivateContainerd): Promise<string> {
  const r = await containerd.ctr(['version']);
  const m = /Server:\s*\n\s*Version:\s*(\S+)/.exec(r.stdout);
  if (!m) throw new Error(`ctr version: no server version in ${JSON.stringify(r.stdout)}`);
  return m[1]!;
}

/** How a run changes the shipped file: not at all, one of its commented alternatives, or one key set. */
type Variant = { kind: 'shipped' } | { kind: 'alternative'; index: number } | { kind: 'with'; plugin: string; key: string; value: boolean };

/** Each shipped file on each release it is for, and the CRI pull path containerd takes with it. */
interface Run {
  readonly file: string;
  readonly release: string;
  readonly variant: Variant;
  readonly label: string;
  /** 2.1+: whether CRI pulls go through the transfer service (else containerd's client-side pull). */
  readonly transfer?: boolean;
}
const IMAGES_PLUGIN = 'io.containerd.cri.v1.images';
const RUNS: Run[] = [
  { file: 'config-1.6.toml', release: '1.6', variant: { kind: 'shipped' }, label: 'as shipped' },
  { file: 'config-1.7.toml', release: '1.6', variant: { kind: 'shipped' }, label: 'shipped; 1.7 keys ignored' },
  { file: 'config-1.7.toml', release: '1.7', variant: { kind: 'shipped' }, label: 'as shipped' },
  { file: 'config-2.0.toml', release: '2.0', variant: { kind: 'shipped' }, label: 'as shipped' },
  { file: 'config-2.1.toml', release: '2.2', variant: { kind: 'shipped' }, label: 'shipped; transfer service', transfer: true },
  { file: 'config-2.1.toml', release: '2.2', variant: { kind: 'alternative', index: 0 }, label: 'with use_local_image_pull', transfer: false },
  // What the file warns against: the CRI key set false makes 2.1+ leave the transfer service.
  {
    file: 'config-2.1.toml',
    release: '2.2',
    variant: { kind: 'with', plugin: IMAGES_PLUGIN, key: 'disable_snapshot_annotations', value: false },
    label: 'annotations key false',
    transfer: false,
  },
];

function variantSource(run: Run): string {
  const v = run.variant;
  if (v.kind === 'shipped') return text(run.file);
  if (v.kind === 'alternative') return alternatives(text(run.file))[v.index]!;
  const t = parse(text(run.file));
  table(table(t.plugins)[v.plugin])[v.key] = v.value;
  return stringify(t);
}

const work = tempDir('deploy-containerd');
const reason = containerdUnavailable() ?? overlayUnavailable() ?? (findDistributionBinary() ? undefined : 'docker-registry is not installed');
if (reason) console.warn(`skipping the deploy/containerd runs: ${reason}`);

describe.skipIf(lacks('containerd', reason))('deploy/containerd files started on their containerd releases', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let image: BuiltImage;
  const snapSocket = join(work.dir, 'snapshotter.sock');
  const root = join(work.dir, 'fastpull-root');
  let seq = 0;

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

  it.each(RUNS)('$file in containerd $release ($label): CRI and fastpull load, fastpulld answers, a CRI PullImage takes the fast path', async (run) => {
    const name = run.release;
    const r: ContainerdRelease = containerdRelease(name);
    const source = variantSource(run);
    const ctrDir = join(work.dir, `containerd-${seq++}`);
    const { config, address } = containerdConfig(r, { dir: ctrDir, snapshotterSocket: snapSocket, fastpullRoot: root }, 'shipped', source);
    const containerd = await launchContainerd(ctrDir, address, config, r);
    const cri = criImages(containerd.address);
    try {
      expect((await serverVersion(containerd)).replace(/^v/, '')).toMatch(new RegExp(`^${name.replace('.', '\\.')}\\.`));
      const loaded = await plugins(containerd);
      expect(loaded.find((p) => p.type === 'io.containerd.snapshotter.v1' && p.id === 'fastpull')?.status).toBe('ok');
      expect(loaded.find((p) => p.type === 'io.containerd.grpc.v1' && p.id === 'cri')?.status).toBe('ok');
      await waitForSnapshotter(containerd);

      const ref = `${registry.host}/deploy/busybox:v1`;
      const before = daemon.logs.filter((l) => l.msg === 'layer recorded for containerd').length;
      expect(await cri.pullImage(ref)).toBe(image.configDigest);
      if (run.transfer !== undefined) {
        // containerd says at debug level which path a CRI pull took (its log is written before it answers).
        const viaTransfer = containerd
          .log()
          .split('\n')
          .filter((l) => l.includes('PullImage') && l.includes('using transfer service'));
        expect(viaTransfer.length, 'CRI pulls through the transfer service').toBe(run.transfer ? 1 : 0);
        expect(/Falling back to local image pull mode/.test(containerd.log())).toBe(run.variant.kind === 'with');
      }
      await expect
        .poll(() => daemon.logs.filter((l) => l.msg === 'layer recorded for containerd').length - before, { timeout: 120_000 })
        .toBe(image.layers.length);
      expect((await cri.imageStatus(ref))?.id).toBe(image.configDigest);
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
});

describe('docs/containerd.md, step 4: the link for kubelet’s image-filesystem stats', () => {
  const mkdir = guideLine('mkdir -p -m 0700 /var/lib/containerd');
  const link = guideLine('ln -sfn /var/lib/fastpull /var/lib/containerd/io.containerd.snapshotter.v1.fastpull');
  /** The two commands as written, with /var/lib/ moved under `dir`. */
  const script = (dir: string): string => [mkdir, link].map((l) => l.replaceAll('/var/lib/', `${dir}/var/lib/`)).join('\n');

  it('the deploy files’ comments give the same two commands', () => {
    for (const file of ['config-1.6.toml', 'config-1.7.toml']) {
      const commented = text(file)
        .split('\n')
        .map((l) => l.replace(/^\s*#\s+/, ''));
      for (const line of [mkdir, link]) expect(commented, file).toContain(line.replace(/\s+#.*$/, ''));
    }
  });

  it('makes the link where containerd’s root does not exist yet, again over its own link, and leaves an existing root’s mode alone', () => {
    const t = tempDir('guide-step4');
    try {
      mkdirSync(join(t.dir, 'fresh', 'var', 'lib', 'fastpull'), { recursive: true });
      const target = join(t.dir, 'fresh', 'var', 'lib', 'containerd', 'io.containerd.snapshotter.v1.fastpull');
      for (let i = 0; i < 2; i++) {
        const r = spawnSync('sh', ['-ec', script(join(t.dir, 'fresh'))], { encoding: 'utf8' });
        expect(r.stderr, `run ${i + 1}`).toBe('');
        expect(r.status).toBe(0);
        expect(lstatSync(target).isSymbolicLink()).toBe(true);
        expect(readlinkSync(target)).toBe(join(t.dir, 'fresh', 'var', 'lib', 'fastpull'));
      }
      expect(statSync(join(t.dir, 'fresh', 'var', 'lib', 'containerd')).mode & 0o777).toBe(0o700);

      mkdirSync(join(t.dir, 'existing', 'var', 'lib', 'containerd'), { recursive: true, mode: 0o711 });
      expect(spawnSync('sh', ['-ec', script(join(t.dir, 'existing'))]).status).toBe(0);
      expect(statSync(join(t.dir, 'existing', 'var', 'lib', 'containerd')).mode & 0o777).toBe(0o711);
    } finally {
      t.cleanup();
    }
  });
});

/** The releases step 5's checks run on: each that a shipped file is for. */
const GUIDE_RELEASES = ['1.6', '1.7', '2.0', '2.2'];
const platform = `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`;

describe.skipIf(lacks('containerd', reason))('docs/containerd.md, step 5’s checks and the troubleshooting rows, run as written', () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  const guideWork = tempDir('deploy-containerd-guide');
  const snapSocket = join(guideWork.dir, 'snapshotter.sock');
  // A store per containerd: each fresh containerd numbers its snapshots from 1 again, and a record
  // that an earlier one had not yet collected would take the name.
  let root = '';
  const daemonArgs = (): string[] => ['--socket', join(guideWork.dir, 'fastpulld.sock'), '--snapshotter-socket', snapSocket, '--root', root];
  const freshDaemon = async (): Promise<void> => {
    await stopDaemon(daemon);
    root = join(guideWork.dir, `fastpull-root-${seq}`);
    daemon = await serveDaemon(daemonArgs());
  };
  const plugins = guideLine('ctr plugins ls | awk');
  const check = guideLine('prepare fastpull-check');
  /** A message of the guide with this test's socket for the node's. */
  const mine = (quote: string): string => quote.replaceAll(DEFAULT_SNAPSHOTTER_SOCKET, snapSocket);
  /** Any of the failures the guide names for a fastpulld that does not serve, in the words of 1.6 to 2.x. */
  const notServing = new RegExp(
    `^ctr: connection (?:error: desc = "(?:transport: Error while dialing:? dial unix(?::\\/\\/| )${escapeRegExp(snapSocket)}: (?:timeout|connect: connection refused)|transport is closing|transport: failed to write client preface: write unix @->${escapeRegExp(snapSocket)}: write: broken pipe)"|closed)(?:: unavailable)?$`,
  );
  const columns = (t: string): string[][] =>
    t
      .trim()
      .split('\n')
      .map((l) => l.trim().split(/\s+/));
  let seq = 0;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(guideWork.dir, 'registry') });
    await pushImage(registry.url, 'guide/busybox', 'v1', await busyboxImage());
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    await registry?.stop();
    guideWork.cleanup();
  });

  /** The release's shipped file on a private containerd (`edit` changes its text first). */
  const start = async (
    name: string,
    edit: (source: string) => string = (t) => t,
    snapshotterSocket?: (d: RunningDaemon) => string,
  ): Promise<PrivateContainerd> => {
    await freshDaemon();
    const r = containerdRelease(name);
    const ctrDir = join(guideWork.dir, `containerd-${seq++}`);
    const { config, address } = containerdConfig(
      r,
      { dir: ctrDir, snapshotterSocket: snapshotterSocket?.(daemon) ?? snapSocket, fastpullRoot: root },
      'shipped',
      edit(text(r.configFile)),
    );
    return launchContainerd(ctrDir, address, config, r);
  };

  it.each(GUIDE_RELEASES)(
    'containerd %s: the plugins say ok with fastpulld up or down, as the guide shows them; the probe snapshot answers only while fastpulld serves',
    async (name) => {
      const containerd = await start(name);
      try {
        const listed = await shell(plugins, containerd);
        expect(listed.status).toBe(0);
        if (name === '1.6') {
          // The lines the guide shows, column for column.
          expect(columns(listed.stdout)).toEqual(columns(/```\n(io\.containerd\.snapshotter\.v1 [^`]*)```/.exec(guide)![1]!));
        } else {
          // From 1.7.16 the fastpull line names the node's platform; 2.x shows none for cri.
          expect(columns(listed.stdout)).toEqual([
            ['io.containerd.snapshotter.v1', 'fastpull', platform, 'ok'],
            ['io.containerd.grpc.v1', 'cri', name.startsWith('2.') ? '-' : platform, 'ok'],
          ]);
        }
        await waitForSnapshotter(containerd);
        expect(await shell(check, containerd)).toMatchObject({ status: 0, stdout: 'fastpulld answers\n' });

        // Stopped: fastpulld removes its socket. containerd says ok all the same, and lists.
        await stopDaemon(daemon);
        expect(columns((await shell(plugins, containerd)).stdout)).toEqual(columns(listed.stdout));
        expect((await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'ls'])).status).toBe(0);
        const down = await shell(check, containerd);
        expect(down.status).not.toBe(0);
        expect(down.stdout).toBe('');
        expect(lastLine(down.stderr), down.stderr).toMatch(notServing);
        // The dial error the guide quotes; right after the stop, a loaded machine may still see the old
        // connection go ("transport is closing"), which the guide names too.
        if (name === '1.6' && lastLine(down.stderr).includes('Error while dialing'))
          expect(lastLine(down.stderr)).toBe(mine(guideQuote('ctr: connection error: ')));

        // Killed: its socket file stays, and nobody answers on it. containerd says its connection
        // closed, or, once it has dialed again, that the dial was refused.
        daemon = await serveDaemon(daemonArgs());
        await waitForSnapshotter(containerd);
        daemon.proc.kill('SIGKILL');
        await daemon.exited;
        const killed = await shell(check, containerd);
        expect(killed.status).not.toBe(0);
        expect(lastLine(killed.stderr), killed.stderr).toMatch(notServing);
        if (name === '1.6' && lastLine(killed.stderr).includes('connection refused')) {
          expect(lastLine(killed.stderr)).toBe(`ctr: connection error: desc = "transport: Error while dialing ${mine(guideQuote('... dial unix ').slice(4))}`);
        }

        // Back: the check passes again once containerd has reconnected (it backs off between tries).
        daemon = await serveDaemon(daemonArgs());
        await waitForSnapshotter(containerd);
        expect(await shell(check, containerd)).toMatchObject({ status: 0, stdout: 'fastpulld answers\n' });
        // What a check that failed half-way leaves, as the guide words it, and how it goes.
        expect((await containerd.ctr(['snapshots', '--snapshotter', 'fastpull', 'prepare', 'fastpull-check'], { namespace: 'default' })).status).toBe(0);
        expect(lastLine((await shell(check, containerd)).stderr)).toBe(guideQuote('ctr: snapshot "fastpull-check": already exists'));
        expect(await shell(check.split(' && ')[1]!, containerd)).toMatchObject({ status: 0 });
        expect(await shell(check, containerd)).toMatchObject({ status: 0, stdout: 'fastpulld answers\n' });
      } finally {
        await containerd.stop();
      }
    },
  );

  it.each(['1.6', '2.2'])('containerd %s: a CRI snapshotter that names no snapshotter stops the CRI plugin, with the error the guide quotes', async (name) => {
    const containerd = await start(name, (t) => t.replace(/^(\s*snapshotter = )"fastpull"$/m, '$1"fastpul"'));
    const cri = criImages(containerd.address);
    try {
      const listed = columns((await shell(plugins, containerd)).stdout);
      expect(listed.find((c) => c[1] === 'cri')?.at(-1)).toBe('error');
      const detail = await containerd.ctr(['plugins', 'ls', '-d']);
      expect(detail.stdout).toContain(
        `Message:     ${name === '1.6' ? guideQuote('failed to create CRI service: ') : guideQuote('failed to find snapshotter ')}`,
      );
      await expect(cri.pullImage(`${registry.host}/guide/busybox:v1`)).rejects.toThrow(guideQuote('unknown service runtime.v1.ImageService'));
    } finally {
      cri.close();
      await containerd.stop();
    }
  });

  it('containerd 1.6: the API socket given as the snapshotter’s address fails as the guide quotes', async () => {
    const containerd = await start(
      '1.6',
      (t) => t,
      (d) => d.socket,
    );
    const cri = criImages(containerd.address);
    const unimplemented = (method: string): string =>
      guideQuote('The server does not implement the method ').replace(/\/Stat: not implemented$/, `/${method}: not implemented`);
    try {
      expect(lastLine((await shell(check, containerd)).stderr)).toBe(`ctr: ${unimplemented('Prepare')}`);
      const e = await cri.pullImage(`${registry.host}/guide/busybox:v1`).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(e?.message).toContain(unimplemented('Prepare'));
    } finally {
      cri.close();
      await containerd.stop();
    }
  });
});
