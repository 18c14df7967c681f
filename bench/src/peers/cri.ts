// Pulls as kubelet makes them: CRI `PullImage` on a containerd of its own per pull (its CRI plugin
// on, own root, state and socket), either with fastpulld as its proxy snapshotter on the fast path
// (`snapshotter = "fastpull"` with the remote-snapshotter labels on: fastpulld pulls each layer and
// containerd downloads none) or with containerd's own overlayfs snapshotter. The containerd is
// Debian's 1.6, or 1.7 or 2.2 as scripts/peers.sh builds them ($FASTPULL_PEERS, default .peers in
// the repository); 2.2 is configured as deploy/containerd/config-2.1.toml ships (CRI pulls through
// the transfer service, which labels Prepares for a proxy exporting enable_remote_snapshot_annotations). The daemons are
// started and answering before the clock (containerd has dialled fastpulld, CRI answers); their CPU
// and memory count with the client's. The wall time is the PullImage call's, request to answer
// (src/peers/cri-pull.ts); the client process's own time is a phase beside it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { delimiter } from 'node:path';
import { containerdBaseConfig, failure, stop, waitFor, type Contender, type PullResult } from './contenders.js';
import { diskBytes, measure, which } from './measure.js';

/** A containerd release the CRI contenders run: `1.6` is the one on PATH, the others are built peers. */
export type CriRelease = '1.6' | '1.7' | '2.2';

function releaseBinDir(repo: string, release: CriRelease): string | undefined {
  return release === '1.6' ? undefined : join(process.env.FASTPULL_PEERS ?? join(repo, '.peers'), `containerd-${release}`, 'bin');
}

/** containerd 2.x (config version 3): the CRI images and runtime plugins, the transfer service's unpack targets. */
function criConfigV3(dir: string, sock: string, snapshotter: 'fastpull' | 'overlayfs', snapshotterSocket: string | undefined): string {
  const q = (s: string) => JSON.stringify(s);
  const base = containerdBaseConfig(dir, sock, ['io.containerd.nri.v1.nri'], snapshotterSocket ? ['io.containerd.snapshotter.v1.fastpull'] : []);
  base[0] = 'version = 3';
  const unpack = (sn: string) => ["[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]", '  platform = "linux/amd64"', `  snapshotter = ${q(sn)}`, '  differ = "walking"'];
  return [
    ...base,
    "[plugins.'io.containerd.grpc.v1.cri']",
    '  disable_tcp_service = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    "[plugins.'io.containerd.cri.v1.runtime'.cni]",
    `  bin_dirs = [${q(join(dir, 'cni-bin'))}]`,
    `  conf_dir = ${q(join(dir, 'cni-conf'))}`,
    "[plugins.'io.containerd.cri.v1.images']",
    `  snapshotter = ${q(snapshotter)}`,
    ...(snapshotterSocket
      ? ['[proxy_plugins.fastpull]', '  type = "snapshot"', `  address = ${q(snapshotterSocket)}`, '  exports = { enable_remote_snapshot_annotations = "true" }', ...unpack('overlayfs'), ...unpack('fastpull')]
      : []),
    '',
  ].join('\n');
}

function criConfig(dir: string, sock: string, snapshotter: 'fastpull' | 'overlayfs', snapshotterSocket: string | undefined): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    ...containerdBaseConfig(dir, sock, [], snapshotterSocket ? ['io.containerd.snapshotter.v1.fastpull'] : []),
    '[plugins."io.containerd.grpc.v1.cri"]',
    '  disable_tcp_service = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    '  [plugins."io.containerd.grpc.v1.cri".containerd]',
    `    snapshotter = ${q(snapshotter)}`,
    `    disable_snapshot_annotations = ${snapshotter !== 'fastpull'}`,
    '  [plugins."io.containerd.grpc.v1.cri".cni]',
    `    bin_dir = ${q(join(dir, 'cni-bin'))}`,
    `    conf_dir = ${q(join(dir, 'cni-conf'))}`,
    ...(snapshotterSocket ? ['[proxy_plugins.fastpull]', '  type = "snapshot"', `  address = ${q(snapshotterSocket)}`] : []),
    '',
  ].join('\n');
}

/** What fastpulld's log says of the fast path: layers recorded for containerd, and fallbacks. */
function fastPathNote(log: string): string {
  let recorded = 0;
  let failed = 0;
  for (const line of log.split('\n')) {
    if (line.includes('"layer recorded for containerd"')) recorded++;
    else if (line.includes('"fast path failed')) failed++;
  }
  return `fast path: ${recorded} layer(s) recorded${failed ? `, ${failed} fell back to containerd` : ''}`;
}

/**
 * `containerd + fastpull snapshotter (CRI PullImage)` when `snapshotter` is fastpull, else
 * `containerd CRI + overlayfs (PullImage)`.
 */
export function criContender(repo: string, snapshotter: 'fastpull' | 'overlayfs', release: CriRelease = '1.6'): Contender {
  const client = join(repo, 'bench', 'dist', 'peers', 'cri-pull.js');
  const daemonBin = join(repo, 'packages', 'daemon', 'dist', 'bin.js');
  const binDir = releaseBinDir(repo, release);
  const bin = (name: string) => (binDir ? join(binDir, name) : name);
  const env = { ...process.env, PATH: binDir ? `${binDir}${delimiter}${process.env.PATH ?? ''}` : process.env.PATH };
  const version = release === '1.6' ? '' : ` ${release}`;
  return {
    name: snapshotter === 'fastpull' ? `containerd${version} + fastpull snapshotter (CRI PullImage)` : `containerd${version} CRI + overlayfs (PullImage)`,
    unavailable() {
      if (binDir && !existsSync(join(binDir, 'containerd'))) return `containerd ${release} is not built (bash scripts/peers.sh containerd-${release})`;
      if (!binDir && (!which('containerd') || !which('ctr'))) return 'containerd or ctr not installed (Debian package containerd; bench/setup.sh installs it)';
      if (process.getuid?.() !== 0) return 'needs root (containerd with overlay snapshots)';
      if (snapshotter === 'fastpull' && !existsSync(daemonBin)) return `${daemonBin} is missing: build first (pnpm build)`;
      return undefined;
    },
    async pull(ref, dir, timeoutMs): Promise<PullResult> {
      const cdir = join(dir, 'containerd');
      mkdirSync(cdir, { recursive: true });
      const sock = join(cdir, 'c.sock');
      const snapSock = join(dir, 'snapshotter.sock');
      const fastpullRoot = join(dir, 'fastpull');
      let fastpulldLog = '';
      let daemon: ChildProcess | undefined;
      let containerd: ChildProcess | undefined;
      try {
        if (snapshotter === 'fastpull') {
          daemon = spawn(process.execPath, [daemonBin, '--socket', join(dir, 'fastpulld.sock'), '--snapshotter-socket', snapSock, '--root', fastpullRoot], {
            stdio: ['ignore', 'pipe', 'ignore'],
            detached: true,
            env: { ...process.env, FASTPULLD_CONFIG: '' },
          });
          daemon.stdout!.on('data', (b: Buffer) => (fastpulldLog += b.toString('utf8')));
          await waitFor(() => existsSync(snapSock), 20_000, 'fastpulld snapshotter socket');
        }
        const config = join(cdir, 'config.toml');
        const make = release === '2.2' ? criConfigV3 : criConfig;
        writeFileSync(config, make(cdir, sock, snapshotter, daemon ? snapSock : undefined));
        let log = '';
        containerd = spawn(bin('containerd'), ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'], detached: true, env });
        containerd.stderr!.on('data', (b: Buffer) => (log = (log + b.toString('utf8')).slice(-4000)));
        const ctr = (...args: string[]) => spawnSync(bin('ctr'), ['--address', sock, '--namespace', 'bench-probe', ...args], { stdio: 'ignore', timeout: 10_000 }).status === 0;
        await waitFor(() => ctr('version'), 30_000, `containerd (${log.slice(-300)})`);
        // containerd dials its proxy snapshotter lazily: make it connect before the clock.
        if (daemon) await waitFor(() => ctr('snapshots', '--snapshotter', 'fastpull', 'prepare', 'probe') && ctr('snapshots', '--snapshotter', 'fastpull', 'rm', 'probe'), 30_000, 'containerd reaching fastpulld');
        const ready = spawnSync(process.execPath, [client, 'wait', sock], { encoding: 'utf8', timeout: 40_000 });
        if (ready.status !== 0) throw new Error(`containerd's CRI plugin does not answer: ${ready.stderr.trim()}`);

        const m = await measure(process.execPath, [client, 'pull', sock, ref], { timeoutMs, daemons: [containerd.pid!, ...(daemon ? [daemon.pid!] : [])] });
        const bytes = diskBytes(join(cdir, 'root'), fastpullRoot);
        let callSeconds = NaN;
        try {
          callSeconds = (JSON.parse(m.output.trim().split('\n').at(-1)!) as { ms: number }).ms / 1000;
        } catch {
          /* failed: the note says why */
        }
        const ok = m.ok && Number.isFinite(callSeconds);
        const notes = [ok ? `${snapshotter} snapshotter` : failure(`CRI PullImage (${snapshotter})`, m), ...(daemon ? [fastPathNote(fastpulldLog)] : [])];
        return { ...m, ok, wall: ok ? callSeconds : m.wall, bytes, phases: { 'client process': m.wall }, note: notes.join('; ') };
      } finally {
        if (containerd) await stop(containerd);
        if (daemon) await stop(daemon);
        // A killed pull may leave an apply mount.
        spawnSync('sh', ['-c', 'grep -o " $0[^ ]*" /proc/mounts | xargs -r -n1 umount -l', dir], { stdio: 'ignore' });
      }
    },
  };
}
