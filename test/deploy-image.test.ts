// deploy/Containerfile without a container engine: its stages replayed by test/containerfile.ts
// against a clean tree of HEAD (as a fresh clone), each in a private mount namespace where
// /usr/local, /home, /root, /tmp and /run are the stage's own. Then, in the final stage, what the
// image is for: fastpull and fastpulld on PATH with the native addons (the in-process ISA-L gunzip
// among them, which pulls use by default), for the image's user too;
// the systemd unit's `/usr/bin/env fastpulld` found on systemd's PATH; and the DaemonSet's own
// pieces run as written: fastpulld with the ConfigMap's configuration, answering the probes' HTTP
// GETs, the image's health-check script (healthy, then not once fastpulld stops), and the gc
// container's command as its non-root user,
// let in by the sockets' group and refused without it.
// As root, with util-linux (unshare, nsenter, setpriv), git, apt and the npm registry; the
// apt-get steps are checked (apt knows every package), not run: they would change this machine.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml, stringify } from 'smol-toml';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '@fastpull/core';
import { hostPath, replay, type StageNamespace, type Step } from './containerfile.js';
import { repoRoot } from './helpers.js';
import { lacks } from '@fastpull/core/testing';

const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm|pnpm)_/i.test(k)));

function whySkip(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root (the replay binds directories in a mount namespace)';
  for (const bin of ['unshare', 'nsenter', 'setpriv', 'git', 'apt-cache', 'npm']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0) return `${bin} is not installed`;
  }
  if (spawnSync('unshare', ['--mount', 'true']).status !== 0) return 'unshare --mount is not permitted here';
  // The apt-get steps are not run: the stages build against this machine's packages.
  if (!existsSync('/usr/include/isa-l/igzip_lib.h')) return 'libisal-dev is not installed (the image installs it; scripts/bootstrap.sh does here)';
  const ping = spawnSync('npm', ['ping'], { env, encoding: 'utf8', timeout: 30_000 });
  if (ping.status !== 0) return 'the npm registry cannot be reached (npm ping failed): the image build downloads dependencies';
  return undefined;
}
const skip = whySkip();
if (skip) console.warn(`skipping the Containerfile replay: ${skip}`);

const BUILD_TIMEOUT_MS = 1_500_000;

/** The health-check script as the image holds it (deploy/Containerfile copies it there). */
const HEALTH_SCRIPT = 'node /usr/local/lib/fastpull/health.mjs';

/** A probe of the DaemonSet's, as far as the test reads it. */
interface Probe {
  httpGet?: { host: string; port: number; path: string };
}

describe.skipIf(lacks('root', skip))('deploy/Containerfile, replayed', () => {
  // Not under /tmp: the final stage's /tmp is a directory of this one.
  const work = mkdtempSync('/var/tmp/fastpull-image-');
  const steps: Step[] = [];
  let final: StageNamespace;
  let stages: Map<string, StageNamespace>;
  const manifests = parseAllDocuments(readFileSync(join(repoRoot, 'deploy', 'kubernetes', 'fastpulld-daemonset.yaml'), 'utf8')).map(
    (d) => d.toJS() as Record<string, unknown>,
  );
  const configMap = manifests.find((m) => m.kind === 'ConfigMap') as { data: Record<string, string> };
  const pod = (
    manifests.find((m) => m.kind === 'DaemonSet') as {
      spec: {
        template: {
          spec: {
            containers: Array<{
              name: string;
              command: string[];
              startupProbe?: Probe;
              readinessProbe?: Probe;
              livenessProbe?: Probe;
              securityContext?: { runAsUser: number; runAsGroup: number };
            }>;
            securityContext: { supplementalGroups: number[] };
          };
        };
      };
    }
  ).spec.template.spec;

  beforeAll(async () => {
    const context = join(work, 'context');
    const archive = spawnSync('sh', ['-c', `mkdir -p '${context}' && git -C '${repoRoot}' archive HEAD | tar -x -C '${context}'`], { encoding: 'utf8' });
    if (archive.status !== 0) throw new Error(`git archive: ${archive.stderr}`);
    const started = Date.now();
    ({ final, stages } = await replay(join(repoRoot, 'deploy', 'Containerfile'), context, work, (s) => steps.push(s)));
    console.log(
      `Containerfile replayed in ${((Date.now() - started) / 1000).toFixed(0)} s:\n${steps.map((s) => `  [${s.stage}] ${s.how}: ${s.command}${s.note ? ` (${s.note})` : ''}`).join('\n')}`,
    );
  }, BUILD_TIMEOUT_MS);
  afterAll(() => {
    final?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const ok = async (script: string, user?: Parameters<StageNamespace['run']>[1]): Promise<string> => {
    const r = await final.run(script, user);
    if (r.status !== 0) throw new Error(`${script} exited with ${r.status}: ${r.stderr}`);
    return r.stdout;
  };

  it('runs every step but apt-get’s, which installs only packages apt knows; the packed commands are executable', () => {
    const packages = hostPath(stages.get('build')!, '/home/node/packages');
    for (const pkg of ['daemon', 'cli']) {
      const listing = spawnSync('sh', ['-c', `tar -tvzf ${packages}/fastpull-${pkg}-${VERSION}.tgz package/dist/launch.cjs`], { encoding: 'utf8' });
      expect(listing.stdout, pkg).toMatch(/^-rwxr-xr-x /);
    }
    expect(steps.filter((s) => s.how === 'checked').every((s) => s.command.startsWith('apt-get '))).toBe(true);
    expect(steps.some((s) => s.command.startsWith('npm install -g') && s.command.includes('/tmp/fastpull-packages/*.tgz') && s.how === 'ran')).toBe(true);
    expect(steps.some((s) => s.command.startsWith('pnpm run package') && s.how === 'ran')).toBe(true);
  });

  it('puts fastpull and fastpulld on PATH with the native addon, for root and for the image’s user', async () => {
    expect(await ok('fastpull version')).toContain(`fastpull ${VERSION}`);
    expect(await ok('fastpulld --version')).toBe(`fastpulld ${VERSION}\n`);
    expect(await ok('fastpull version', 'node')).toContain(`fastpull ${VERSION}`);
    expect(await ok('command -v fastpull fastpulld')).toBe('/usr/local/bin/fastpull\n/usr/local/bin/fastpulld\n');
    for (const addon of ['fastpull_native', 'fastpull_isal'])
      expect(existsSync(hostPath(final, `/usr/local/lib/node_modules/@fastpull/core/native/build/Release/${addon}.node`)), addon).toBe(true);
    // auto: ISA-L in process, the addon linked against libisal.
    expect(await ok('fastpull version', 'node')).toContain('\ninflater isal (built in)\n');
    expect(readFileSync(hostPath(final, '/usr/local/lib/fastpull/health.mjs'), 'utf8')).toBe(
      readFileSync(join(repoRoot, 'deploy', 'fastpulld-health.mjs'), 'utf8'),
    );
  });

  it('the systemd unit’s ExecStart finds fastpulld on systemd’s PATH after npm install -g', async () => {
    const unit = readFileSync(join(repoRoot, 'deploy', 'systemd', 'fastpulld.service'), 'utf8');
    const exec = /^ExecStart=(\/usr\/bin\/env fastpulld)\s/m.exec(unit)![1]!;
    // systemd's PATH for services on a merged-/usr system.
    expect(await ok(`env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin ${exec} --version`)).toBe(`fastpulld ${VERSION}\n`);
  });

  it('runs the DaemonSet’s fastpulld, its probes, the health-check script and the gc container as written', async () => {
    const config = parseToml(configMap.data['fastpulld.toml']!);
    // The store where this stage may write; the probes' port one that is free here (a fixed port
    // may be taken on a test machine), on the loopback address the manifest's probes dial.
    config.root = '/tmp/fastpull-store';
    const probeHost = String(config.metrics_address).split(':')[0]!;
    config.metrics_address = `${probeHost}:0`;
    writeFileSync(hostPath(final, '/tmp/fastpulld.toml'), stringify(config));
    const fastpulld = pod.containers.find((c) => c.name === 'fastpulld')!;
    const command = fastpulld.command.map((a) => (a === '/etc/fastpull/fastpulld.toml' ? '/tmp/fastpulld.toml' : a));
    const [cmd, ...args] = final.argv(`exec ${command.join(' ')}`);
    const daemon = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    daemon.stdout.on('data', (d: Buffer) => (out += d.toString()));
    daemon.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => daemon.on('exit', resolve));
    try {
      const deadline = Date.now() + 30_000;
      while (!out.includes('fastpulld serving')) {
        if (daemon.exitCode !== null || Date.now() > deadline) throw new Error(`fastpulld did not start: ${out}${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const serving = JSON.parse(out.split('\n').find((l) => l.includes('fastpulld serving'))!) as { metrics: string };
      const port = new URL(serving.metrics).port;
      for (const probe of [fastpulld.startupProbe, fastpulld.readinessProbe, fastpulld.livenessProbe]) {
        const { host, path } = probe!.httpGet!;
        expect(host).toBe(probeHost);
        const r = await fetch(`http://${host}:${port}${path}`);
        expect({ path, status: r.status, body: await r.text() }).toEqual({ path, status: 200, body: 'ok\n' });
      }
      // The image's health-check script, for shells and scripts: it checks through the sockets.
      expect(await final.run(HEALTH_SCRIPT)).toMatchObject({ status: 0, stderr: '' });

      const gcContainer = pod.containers.find((c) => c.name === 'gc')!;
      const gc = /fastpull gc --address \S+/.exec(gcContainer.command.join(' '))![0];
      const user = { uid: gcContainer.securityContext!.runAsUser, gid: gcContainer.securityContext!.runAsGroup, home: '/' };
      const collected = await final.run(gc, { ...user, groups: pod.securityContext.supplementalGroups });
      expect(collected.stderr).toBe('');
      expect(collected.stdout).toMatch(/^removed 0 snapshots and 0 blobs/);
      // Without the group the socket (0660) refuses the connection: nothing is collected.
      const refused = await final.run(gc, user);
      expect(refused.status).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(/^fastpull: collecting garbage in unix:\/run\/fastpull\/fastpulld\.sock: /);
    } finally {
      daemon.kill('SIGTERM');
      await exited;
    }
    const down = await final.run(HEALTH_SCRIPT);
    expect(down.status).toBe(1);
    expect(down.stderr).toMatch(/^fastpulld is not healthy: /);
  });
});
