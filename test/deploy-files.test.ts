// The systemd units and the Kubernetes manifests of deploy/ as their consumers read them.
// systemd: `systemd-analyze verify` finds nothing to say about the units (skipped with the reason
// printed where it is missing), fastpulld is a Type=notify service that is not restarted after a
// configuration error, it is ordered before containerd and containerd's drop-in wants it, the gc
// timer starts the gc service, and their commands are the installed ones.
// Kubernetes: every manifest passes the validators generated from Kubernetes' OpenAPI schema
// (kubernetes-models; no API server is needed), and the fields containerd and kubelet depend on
// are as they must be: the store at the same path in the pod as on the host, the socket directory
// shared, a Pod Security label, a priority class admitted outside kube-system, HTTP probes on the
// node's loopback where fastpulld listens, the node's resolver, no memory limit, the sockets'
// group, a gc container, and no directory made on every node.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigMap, Namespace } from 'kubernetes-models/v1';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { PriorityClass } from 'kubernetes-models/scheduling.k8s.io/v1';
import type { IContainer, IProbe, IVolume } from 'kubernetes-models/v1';
import { CONFIG_KEYS, DEFAULT_CONTAINERD_SOCKET, EXIT_CONFIG, readConfigFile, resolveConfig, SUGGESTED_METRICS_PORT } from '../packages/daemon/src/config.js';
import { HTTP_PATHS } from '../packages/daemon/src/metrics.js';
import { repoRoot, tempDir } from './helpers.js';
import { lacks } from '@fastpull/core/testing';

const deploy = join(repoRoot, 'deploy');
const read = (path: string): string => readFileSync(join(deploy, path), 'utf8');
const work = tempDir('deploy-files');
afterAll(() => work.cleanup());

/** A unit file as sections of (key, value) pairs, in order. */
function unit(path: string): Map<string, Array<[string, string]>> {
  const sections = new Map<string, Array<[string, string]>>();
  let current: Array<[string, string]> = [];
  for (const line of read(path).split('\n')) {
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) sections.set(header[1]!, (current = []));
    else if (/^\w+=/.test(line)) current.push([line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]);
  }
  return sections;
}
const values = (u: Map<string, Array<[string, string]>>, section: string, key: string): string[] =>
  (u.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const noAnalyze = analyze.error ? 'systemd-analyze is not installed' : undefined;
if (noAnalyze) console.warn(`skipping systemd-analyze verify of deploy/systemd: ${noAnalyze}`);

describe('deploy/systemd', () => {
  it.skipIf(lacks('systemd-analyze', noAnalyze))('systemd-analyze verify has nothing to say about the units', () => {
    const units = ['fastpulld.service', 'fastpull-gc.service', 'fastpull-gc.timer'].map((u) => join(deploy, 'systemd', u));
    const r = spawnSync('systemd-analyze', ['verify', '--man=no', ...units], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('orders fastpulld before containerd, and containerd’s drop-in wants and waits for it', () => {
    const service = unit('systemd/fastpulld.service');
    expect(values(service, 'Unit', 'Before').join(' ').split(/\s+/)).toContain('containerd.service');
    const dropIn = unit('systemd/containerd.service.d/fastpull.conf');
    expect([...dropIn.keys()]).toEqual(['Unit']);
    expect(values(dropIn, 'Unit', 'Wants')).toEqual(['fastpulld.service']);
    expect(values(dropIn, 'Unit', 'After')).toEqual(['fastpulld.service']);
  });

  it('has systemd wait for fastpulld’s READY=1 (Type=notify, from its main process), and not restart it on a configuration error', () => {
    const service = unit('systemd/fastpulld.service');
    expect(values(service, 'Service', 'Type')).toEqual(['notify']);
    expect(values(service, 'Service', 'NotifyAccess')).toEqual(['main']);
    expect(values(service, 'Service', 'Restart')).toEqual(['on-failure']);
    expect(values(service, 'Service', 'RestartPreventExitStatus').join(' ').split(/\s+/)).toContain(String(EXIT_CONFIG));
  });

  it('runs the installed fastpulld with the documented config, the sockets’ group and their directory', () => {
    const service = unit('systemd/fastpulld.service');
    const [exec] = values(service, 'Service', 'ExecStart');
    expect(exec).toBe('/usr/bin/env fastpulld --config /etc/fastpull/fastpulld.toml --group fastpull');
    expect(values(service, 'Service', 'RuntimeDirectory')).toEqual(['fastpull']);
    const config = parseToml(read('fastpulld.toml'));
    expect(dirname(String(config.socket))).toBe('/run/fastpull');
    expect(dirname(String(config.snapshotter_socket))).toBe('/run/fastpull');
    // fastpulld reads the root's Docker config and runs credential helpers: the home must be there.
    expect(values(service, 'Service', 'ProtectHome')).toEqual([]);
  });

  it('deploy/fastpulld.toml shows every key fastpulld reads, and fastpulld accepts it', () => {
    const text = read('fastpulld.toml');
    for (const key of CONFIG_KEYS) expect(text, key).toMatch(new RegExp(`^(# )?${key} = `, 'm'));
    const file = join(work.dir, 'example.toml');
    writeFileSync(file, text);
    expect(resolveConfig(readConfigFile(file, true), {}, {})).toMatchObject({
      root: '/var/lib/fastpull',
      snapshotterSocket: '/run/fastpull/snapshotter.sock',
      containerdSocket: DEFAULT_CONTAINERD_SOCKET,
    });
  });

  it('has a timer that runs fastpull gc', () => {
    const timer = unit('systemd/fastpull-gc.timer');
    expect(values(timer, 'Timer', 'OnUnitActiveSec')).toEqual(['1h']);
    expect(values(timer, 'Install', 'WantedBy')).toEqual(['timers.target']);
    const gc = unit('systemd/fastpull-gc.service'); // a timer starts the service of its own name
    expect(values(gc, 'Service', 'Type')).toEqual(['oneshot']);
    expect(values(gc, 'Service', 'ExecStart')).toEqual(['/usr/bin/env fastpull gc']);
  });
});

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
}
const manifests = parseAllDocuments(read('kubernetes/fastpulld-daemonset.yaml')).map((d) => {
  if (d.errors.length > 0) throw new Error(`deploy/kubernetes/fastpulld-daemonset.yaml: ${d.errors.join('; ')}`);
  return d.toJS() as Manifest;
});
const byKind = (kind: string): Manifest => {
  const found = manifests.filter((m) => m.kind === kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0]!;
};

describe('deploy/kubernetes', () => {
  const ds = new DaemonSet(byKind('DaemonSet'));
  const pod = ds.spec!.template.spec!;
  const containers = new Map(pod.containers.map((c) => [c.name, c]));
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  const configMap = byKind('ConfigMap') as Manifest & { data: Record<string, string> };
  const config = parseToml(configMap.data['fastpulld.toml']!);
  const fastpulld = containers.get('fastpulld')!;
  const mountOf = (c: IContainer, path: string) => (c.volumeMounts ?? []).find((m) => m.mountPath === path);
  const hostPath = (v: IVolume | undefined) => v?.hostPath;

  it('every manifest passes the Kubernetes schema, and the kinds are the ones expected', () => {
    expect(manifests.map((m) => m.kind)).toEqual(['Namespace', 'PriorityClass', 'ConfigMap', 'DaemonSet']);
    const models = { Namespace, PriorityClass, ConfigMap, DaemonSet } as const;
    for (const m of manifests) expect(() => new models[m.kind as keyof typeof models](m as never).validate(), m.kind).not.toThrow();
    // The validators do catch what the API server would refuse.
    const broken = structuredClone(byKind('DaemonSet')) as unknown as {
      spec: { template: { spec: { containers: Array<{ volumeMounts: Array<{ mountPropagation: string }> }> } } };
    };
    broken.spec.template.spec.containers[0]!.volumeMounts[0]!.mountPropagation = 'Sideways';
    expect(() => new DaemonSet(broken as never).validate()).toThrow(/mountPropagation/);
  });

  it('runs in its own namespace, which Pod Security lets run privileged pods', () => {
    const ns = byKind('Namespace');
    expect(ns.metadata.name).not.toBe('kube-system');
    expect(ns.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('privileged');
    for (const m of manifests.filter((m) => m.kind === 'ConfigMap' || m.kind === 'DaemonSet')) expect(m.metadata.namespace).toBe(ns.metadata.name);
    expect(fastpulld.securityContext?.privileged).toBe(true);
  });

  it('has a priority class of its own, admitted outside kube-system', () => {
    const pc = byKind('PriorityClass') as Manifest & { value: number; globalDefault?: boolean };
    expect(pod.priorityClassName).toBe(pc.metadata.name);
    expect(pc.metadata.name.startsWith('system-')).toBe(false);
    expect(pc.value).toBeLessThanOrEqual(1_000_000_000); // the most a class not named system-* may have
    expect(pc.globalDefault).toBe(false);
  });

  it('mounts the store at its host path, and the socket directory that containerd dials, shared with the host', () => {
    const root = String(config.root);
    const store = mountOf(fastpulld, root)!;
    expect(hostPath(volumes.get(store.name))?.path).toBe(root);
    expect(store.mountPropagation).toBe('HostToContainer');
    const sockets = dirname(String(config.socket));
    expect(dirname(String(config.snapshotter_socket))).toBe(sockets);
    const containerd = parseToml(read('containerd/config-1.6.toml')) as { proxy_plugins: { fastpull: { address: string } } };
    expect(config.snapshotter_socket).toBe(containerd.proxy_plugins.fastpull.address);
    expect(hostPath(volumes.get(mountOf(fastpulld, sockets)!.name))?.path).toBe(sockets);
    // The 1.7.16+/2.x configs' exports.root is this root.
    const exportsRoot = (parseToml(read('containerd/config-2.1.toml')) as { proxy_plugins: { fastpull: { exports: { root: string } } } }).proxy_plugins.fastpull
      .exports.root;
    expect(exportsRoot).toBe(root);
  });

  it('reaches containerd’s socket through its directory, mounted read-only with the host’s unmounts propagated', () => {
    const socket = String(config.containerd_socket);
    expect(socket).toBe(DEFAULT_CONTAINERD_SOCKET);
    const mount = mountOf(fastpulld, dirname(socket))!;
    expect(mount).toMatchObject({ readOnly: true, mountPropagation: 'HostToContainer' });
    expect(hostPath(volumes.get(mount.name))).toEqual({ path: dirname(socket), type: 'Directory' });
  });

  it('makes no directory on a node outside fastpull’s own, and finds hosts_dir inside a mounted one', () => {
    for (const v of volumes.values()) {
      if (v.hostPath?.type === 'DirectoryOrCreate') expect(['/var/lib/fastpull', '/run/fastpull'], v.name).toContain(v.hostPath.path);
    }
    const hostsDir = String(config.hosts_dir);
    const holder = (fastpulld.volumeMounts ?? []).find((m) => hostsDir.startsWith(`${m.mountPath}/`))!;
    expect(holder.readOnly).toBe(true);
    expect(hostPath(volumes.get(holder.name))).toEqual({ path: holder.mountPath, type: 'Directory' });
    expect(volumes.get('registry-auth')?.secret?.optional).toBe(true);
  });

  it('probes over HTTP on the node’s loopback, where fastpulld’s metrics_address listens; the health-check script stays in the image', () => {
    const address = String(config.metrics_address);
    expect(address).toBe(`127.0.0.1:${SUGGESTED_METRICS_PORT}`);
    const probes = { startup: fastpulld.startupProbe, readiness: fastpulld.readinessProbe, liveness: fastpulld.livenessProbe } as Record<
      string,
      IProbe | undefined
    >;
    for (const [kind, probe] of Object.entries(probes)) {
      expect(probe?.exec, kind).toBeUndefined();
      // Without `host` kubelet dials the pod's IP: with hostNetwork, the node's address, not its loopback.
      expect(probe?.httpGet, kind).toMatchObject({ host: '127.0.0.1', port: SUGGESTED_METRICS_PORT });
      expect(HTTP_PATHS as readonly string[]).toContain(probe!.httpGet!.path);
    }
    expect(pod.hostNetwork).toBe(true);
    expect(probes.readiness!.httpGet!.path).toBe('/readyz');
    expect(probes.liveness!.httpGet!.path).toBe('/livez');
    expect(probes.startup!.httpGet!.path).toBe('/livez');
    expect(read('Containerfile')).toContain('COPY deploy/fastpulld-health.mjs /usr/local/lib/fastpull/health.mjs');
  });

  it('resolves names with the node’s resolver, as containerd does, and sets no memory limit that the page cache of a pull would fill', () => {
    expect(pod.dnsPolicy).toBe('Default');
    expect(fastpulld.resources?.limits?.memory).toBeUndefined();
    expect(fastpulld.resources?.requests?.memory).toBeDefined();
  });

  it('names the suggested metrics port, and not OpenTelemetry’s 9464, wherever deploy/ gives one', () => {
    expect(read('fastpulld.toml')).toContain(`# metrics_address = "127.0.0.1:${SUGGESTED_METRICS_PORT}"`);
    for (const file of ['fastpulld.toml', 'kubernetes/fastpulld-daemonset.yaml', 'README.md']) expect(read(file), file).not.toContain('9464');
    // A configuration that names the old port still starts as it did.
    expect(resolveConfig({ metrics_address: '127.0.0.1:9464' }, {}, {}).metricsAddress).toBe('127.0.0.1:9464');
  });

  it('gives the sockets to a group, which the non-root gc container has, and runs fastpull gc through them', () => {
    const gid = Number(config.group);
    expect(Number.isInteger(gid)).toBe(true);
    expect(pod.securityContext?.supplementalGroups).toContain(gid);
    const gc = containers.get('gc')!;
    expect(gc.securityContext?.runAsUser).not.toBe(0);
    expect(gc.image).toBe(fastpulld.image);
    expect(gc.command?.join(' ')).toContain(`fastpull gc --address ${String(config.socket)}`);
    expect(mountOf(gc, dirname(String(config.socket)))).toBeDefined();
    expect(fastpulld.command).toEqual(['fastpulld', '--config', '/etc/fastpull/fastpulld.toml']);
    expect(mountOf(fastpulld, '/etc/fastpull')?.name).toBe('config');
  });

  it('its fastpulld.toml is a configuration fastpulld accepts', () => {
    const file = join(work.dir, 'fastpulld.toml');
    writeFileSync(file, configMap.data['fastpulld.toml']!);
    const resolved = resolveConfig(readConfigFile(file, true), {}, {});
    expect(resolved).toMatchObject({
      root: '/var/lib/fastpull',
      socket: '/run/fastpull/fastpulld.sock',
      snapshotterSocket: '/run/fastpull/snapshotter.sock',
      containerdSocket: DEFAULT_CONTAINERD_SOCKET,
      group: '7077',
    });
  });
});

describe('deploy/Containerfile', () => {
  /** The RUN lines of each stage, each split into its `&&` steps. */
  const stages = new Map<string, string[][]>();
  let current: string[][] = [];
  for (const line of read('Containerfile').replace(/\\\n/g, ' ').split('\n')) {
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) stages.set(from[1] ?? 'final', (current = []));
    else if (line.startsWith('RUN ')) current.push(line.slice(4).split(/\s+&&\s+/));
  }
  const packages = (steps: string[], verb: 'install' | 'purge'): string[] =>
    steps
      .filter((s) => s.startsWith('apt-get ') && s.split(/\s+/).includes(verb))
      .flatMap((s) =>
        s
          .split(/\s+/)
          .slice(s.split(/\s+/).indexOf(verb) + 1)
          .filter((w) => !w.startsWith('-')),
      );

  it('builds the in-process ISA-L gunzip in both stages, and keeps its library in the image', () => {
    const build = stages.get('build')!.flat();
    expect(packages(build, 'install')).toContain('libisal-dev');
    expect(build.findIndex((s) => s.includes('libisal-dev'))).toBeLessThan(build.findIndex((s) => s.includes('pnpm run build')));
    const install = stages.get('final')!.find((steps) => steps.some((s) => s.startsWith('npm install -g')))!;
    const npmAt = install.findIndex((s) => s.startsWith('npm install -g'));
    expect(packages(install.slice(0, npmAt), 'install')).toEqual(expect.arrayContaining(['libisal-dev', 'libisal2']));
    // libisal-dev goes with the compilers; libisal2, installed by name, is what the addon loads at run time.
    expect(packages(install.slice(npmAt), 'purge')).toContain('libisal-dev');
    expect(packages(install.slice(npmAt), 'purge')).not.toContain('libisal2');
    const check = stages.get('final')!.flat().join(' && ');
    expect(check).toContain('fastpull_isal');
    expect(check).toContain("grep -qx 'inflater isal (built in)'");
  });
});
