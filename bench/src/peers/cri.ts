// Pulls as kubelet makes them: CRI `PullImage` on a containerd of its own per pull (its CRI plugin
// on, own root, state and socket), either with fastpulld as its proxy snapshotter on the fast path
// (`snapshotter = "fastpull"` with the remote-snapshotter labels on: fastpulld pulls each layer and
// containerd downloads none), with the SOCI snapshotter in parallel pull-and-unpack mode as its proxy
// snapshotter (the same labels: it pulls each layer itself), or with containerd's own overlayfs
// snapshotter, at its defaults or tuned (src/peers/tuned.ts). The containerd is Debian's 1.6, or 1.7
// or 2.2 as scripts/peers.sh builds them ($FASTPULL_PEERS, default .peers in the repository); 2.2 is
// configured as deploy/containerd/config-2.1.toml ships (CRI pulls through the transfer service,
// which labels Prepares for a proxy exporting enable_remote_snapshot_annotations). On 2.2 the same
// pull can also be `ctr images pull`, which goes through the same transfer service. The daemons are
// started and answering before the clock (containerd has dialled its proxy snapshotter, CRI
// answers); their CPU and memory count with the client's. The wall time is the PullImage call's,
// request to answer (src/peers/cri-pull.ts); the client process's own time is a phase beside it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { delimiter } from 'node:path';
import { containerdBaseConfig, failure, stop, waitFor, type Contender, type PullResult } from './contenders.js';
import { diskBytes, measure, which } from './measure.js';
import { containerdTunedToml, sociConfig } from './tuned.js';

/** A containerd release the CRI contenders run: `1.6` is the one on PATH, the others are built peers. */
export type CriRelease = '1.6' | '1.7' | '2.2';

/** What unpacks the layers: fastpulld or the SOCI snapshotter (proxies), or containerd's overlayfs. */
export type CriSnapshotter = 'fastpull' | 'soci' | 'overlayfs';

export interface CriOptions {
  readonly release?: CriRelease;
  /** containerd 2.2's chunked fetch and parallel unpack on (src/peers/tuned.ts). */
  readonly tuned?: boolean;
  /** `ctr images pull` (2.2 only: through the transfer service, as CRI) instead of CRI PullImage. */
  readonly client?: 'cri' | 'ctr';
  /** The contender's name, when not the default one. */
  readonly name?: string;
  /** More flags for fastpulld (`--no-sync`: to see what flushing before each commit costs). */
  readonly fastpulldArgs?: readonly string[];
  /** Called after a successful pull while the daemons still run (tests look at what it left). */
  readonly inspect?: (pulled: PulledImage) => Promise<void> | void;
}

/** Where a pull left its image: containerd's socket and ctr, the namespace and the snapshotter. */
export interface PulledImage {
  readonly ref: string;
  readonly ctr: string;
  readonly socket: string;
  readonly namespace: string;
  readonly snapshotter: CriSnapshotter;
  readonly env: NodeJS.ProcessEnv;
  /** The logs of containerd and of the proxy snapshotter so far. */
  readonly logs: { readonly containerd: string; readonly snapshotter: string };
  /** The config file containerd was started with. */
  readonly config: string;
}

/** The namespace kubelet's pulls land in (CRI's), which the ctr contenders use too. */
const NAMESPACE = 'k8s.io';

function releaseBinDir(repo: string, release: CriRelease): string | undefined {
  return release === '1.6' ? undefined : join(process.env.FASTPULL_PEERS ?? join(repo, '.peers'), `containerd-${release}`, 'bin');
}

function sociBin(repo: string): string {
  return join(process.env.FASTPULL_PEERS ?? join(repo, '.peers'), 'soci-snapshotter-grpc', 'bin', 'soci-snapshotter-grpc');
}

/** containerd 2.x (config version 3): the CRI images and runtime plugins, the transfer service's unpack targets. */
function criConfigV3(dir: string, sock: string, snapshotter: CriSnapshotter, snapshotterSocket: string | undefined, tuned: boolean): string {
  const q = (s: string) => JSON.stringify(s);
  const base = containerdBaseConfig(dir, sock, ['io.containerd.nri.v1.nri'], snapshotterSocket ? [`io.containerd.snapshotter.v1.${snapshotter}`] : []);
  base[0] = 'version = 3';
  const unpack = (sn: string) => [
    "[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]",
    '  platform = "linux/amd64"',
    `  snapshotter = ${q(sn)}`,
    '  differ = "walking"',
  ];
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
    // The table before its unpack_config entries: TOML does not reopen it after them.
    ...(tuned ? containerdTunedToml() : []),
    ...(snapshotterSocket
      ? [
          `[proxy_plugins.${snapshotter}]`,
          '  type = "snapshot"',
          `  address = ${q(snapshotterSocket)}`,
          '  exports = { enable_remote_snapshot_annotations = "true" }',
          ...unpack('overlayfs'),
          ...unpack(snapshotter),
        ]
      : []),
    '',
  ].join('\n');
}

function criConfig(dir: string, sock: string, snapshotter: CriSnapshotter, snapshotterSocket: string | undefined): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    ...containerdBaseConfig(dir, sock, [], snapshotterSocket ? [`io.containerd.snapshotter.v1.${snapshotter}`] : []),
    '[plugins."io.containerd.grpc.v1.cri"]',
    '  disable_tcp_service = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    '  [plugins."io.containerd.grpc.v1.cri".containerd]',
    `    snapshotter = ${q(snapshotter)}`,
    `    disable_snapshot_annotations = ${snapshotter === 'overlayfs'}`,
    '  [plugins."io.containerd.grpc.v1.cri".cni]',
    `    bin_dir = ${q(join(dir, 'cni-bin'))}`,
    `    conf_dir = ${q(join(dir, 'cni-conf'))}`,
    ...(snapshotterSocket ? [`[proxy_plugins.${snapshotter}]`, '  type = "snapshot"', `  address = ${q(snapshotterSocket)}`] : []),
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
 * fastpulld's own account of the pull containerd asked for (its `pull finished` line): the pull's
 * time in the daemon and the summed time of each stage over the layers, seconds.
 */
export function fastpulldPhases(log: string): Record<string, number> {
  for (const line of log.split('\n').reverse()) {
    if (!line.includes('"pull finished"')) continue;
    try {
      const e = JSON.parse(line) as { totalMs?: number; phases?: Record<string, number> };
      const out: Record<string, number> = {};
      if (typeof e.totalMs === 'number') out['pull in fastpulld'] = e.totalMs / 1000;
      for (const [k, v] of Object.entries(e.phases ?? {})) if (typeof v === 'number') out[`fastpulld ${k.replace(/Ms$/, '')}, summed`] = v / 1000;
      return out;
    } catch {
      return {};
    }
  }
  return {};
}

/** The line the SOCI snapshotter logs for each layer it pulls itself in parallel mode. */
export const SOCI_PARALLEL_LINE = 'preparing snapshot with parallel pull/unpack';

function sociNote(log: string): string {
  const layers = log.split('\n').filter((l) => l.includes(SOCI_PARALLEL_LINE)).length;
  return `parallel pull/unpack: ${layers} layer(s) prepared`;
}

function defaultName(snapshotter: CriSnapshotter, release: CriRelease, tuned: boolean, client: 'cri' | 'ctr'): string {
  const version = release === '1.6' ? '' : ` ${release}`;
  if (snapshotter === 'soci') return `soci parallel (${client === 'ctr' ? 'ctr' : 'CRI'})`;
  if (tuned) return `containerd${version} (${client === 'ctr' ? 'ctr' : 'CRI'})`;
  return snapshotter === 'fastpull' ? `containerd${version} + fastpull snapshotter (CRI PullImage)` : `containerd${version} CRI + overlayfs (PullImage)`;
}

interface Proxy {
  readonly proc: ChildProcess;
  readonly name: string;
  readonly root: string;
  log(): string;
}

/** Starts fastpulld or the SOCI snapshotter on `socket`, answering before it returns. */
async function startProxy(
  repo: string,
  snapshotter: 'fastpull' | 'soci',
  dir: string,
  socket: string,
  containerdSocket: string,
  fastpulldArgs: readonly string[] = [],
): Promise<Proxy> {
  let log = '';
  const keep = (b: Buffer) => (log = (log + b.toString('utf8')).slice(-256 * 1024));
  if (snapshotter === 'fastpull') {
    const root = join(dir, 'fastpull');
    const proc = spawn(
      process.execPath,
      [
        join(repo, 'packages', 'daemon', 'dist', 'bin.js'),
        '--socket',
        join(dir, 'fastpulld.sock'),
        '--snapshotter-socket',
        socket,
        '--root',
        root,
        ...fastpulldArgs,
      ],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
        detached: true,
        env: { ...process.env, FASTPULLD_CONFIG: '' },
      },
    );
    proc.stdout.on('data', keep);
    await waitFor(() => existsSync(socket), 20_000, 'fastpulld snapshotter socket');
    return { proc, name: 'fastpulld', root, log: () => log };
  }
  const root = join(dir, 'soci');
  const config = join(dir, 'soci.toml');
  writeFileSync(config, sociConfig(containerdSocket));
  const proc = spawn(sociBin(repo), ['--address', socket, '--config', config, '--root', root, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  await waitFor(() => log.includes('successfully started') || proc.exitCode !== null, 20_000, 'the SOCI snapshotter');
  if (proc.exitCode !== null) throw new Error(`soci-snapshotter-grpc exited ${proc.exitCode}: ${log.slice(-400)}`);
  return { proc, name: 'soci-snapshotter-grpc', root, log: () => log };
}

/**
 * A contender pulling through containerd: `containerd + fastpull snapshotter (CRI PullImage)`,
 * `containerd CRI + overlayfs (PullImage)`, `soci parallel (CRI)` / `(ctr)`, or with `tuned`
 * `containerd 2.2 (CRI)` / `(ctr)`. Each pull has a sampled trace of its processes when asked.
 */
export function criContender(repo: string, snapshotter: CriSnapshotter, options: CriOptions = {}): Contender {
  const release = options.release ?? '1.6';
  const tuned = options.tuned ?? false;
  const clientKind = options.client ?? 'cri';
  const client = join(repo, 'bench', 'dist', 'peers', 'cri-pull.js');
  const daemonBin = join(repo, 'packages', 'daemon', 'dist', 'bin.js');
  const binDir = releaseBinDir(repo, release);
  const bin = (name: string) => (binDir ? join(binDir, name) : name);
  const env = { ...process.env, PATH: binDir ? `${binDir}${delimiter}${process.env.PATH ?? ''}` : process.env.PATH };
  const name = options.name ?? defaultName(snapshotter, release, tuned, clientKind);
  return {
    name,
    traces: true,
    unavailable() {
      if (binDir && !existsSync(join(binDir, 'containerd'))) return `containerd ${release} is not built (bash scripts/peers.sh containerd-${release})`;
      if (!binDir && (!which('containerd') || !which('ctr'))) return 'containerd or ctr not installed (Debian package containerd; bench/setup.sh installs it)';
      if (process.getuid?.() !== 0) return 'needs root (containerd with overlay snapshots)';
      if ((tuned || snapshotter === 'soci' || clientKind === 'ctr') && release !== '2.2')
        return 'the tuned, SOCI and ctr contenders run on containerd 2.2 (its transfer service)';
      if (snapshotter === 'fastpull' && !existsSync(daemonBin)) return `${daemonBin} is missing: build first (pnpm build)`;
      if (snapshotter === 'soci' && !existsSync(sociBin(repo))) return `the SOCI snapshotter is not built (bash scripts/peers.sh soci-snapshotter-grpc)`;
      return undefined;
    },
    async pull(ref, dir, timeoutMs, trace): Promise<PullResult> {
      const cdir = join(dir, 'containerd');
      mkdirSync(cdir, { recursive: true });
      const sock = join(cdir, 'c.sock');
      const snapSock = join(dir, 'snapshotter.sock');
      let proxy: Proxy | undefined;
      let containerd: ChildProcess | undefined;
      let log = '';
      try {
        if (snapshotter !== 'overlayfs') proxy = await startProxy(repo, snapshotter, dir, snapSock, sock, options.fastpulldArgs);
        const config = join(cdir, 'config.toml');
        writeFileSync(
          config,
          release === '2.2'
            ? criConfigV3(cdir, sock, snapshotter, proxy ? snapSock : undefined, tuned)
            : criConfig(cdir, sock, snapshotter, proxy ? snapSock : undefined),
        );
        containerd = spawn(bin('containerd'), ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'], detached: true, env });
        containerd.stderr!.on('data', (b: Buffer) => (log = (log + b.toString('utf8')).slice(-64 * 1024)));
        const ctr = (...args: string[]) =>
          spawnSync(bin('ctr'), ['--address', sock, '--namespace', 'bench-probe', ...args], { stdio: 'ignore', timeout: 10_000 }).status === 0;
        await waitFor(() => ctr('version'), 30_000, `containerd (${log.slice(-300)})`);
        // containerd dials its proxy snapshotter lazily: make it connect before the clock.
        if (proxy)
          await waitFor(
            () => ctr('snapshots', '--snapshotter', snapshotter, 'prepare', 'probe') && ctr('snapshots', '--snapshotter', snapshotter, 'rm', 'probe'),
            30_000,
            `containerd reaching ${proxy.name}`,
          );
        const ready = spawnSync(process.execPath, [client, 'wait', sock], { encoding: 'utf8', timeout: 40_000 });
        if (ready.status !== 0) throw new Error(`containerd's CRI plugin does not answer: ${ready.stderr.trim()}`);

        const daemons = [containerd.pid!, ...(proxy ? [proxy.proc.pid!] : [])];
        const traced = trace
          ? {
              trace: {
                file: trace,
                device: dir,
                command: clientKind === 'ctr' ? 'ctr images pull' : 'CRI client',
                daemons: ['containerd', ...(proxy ? [proxy.name] : [])],
              },
            }
          : {};
        const m =
          clientKind === 'ctr'
            ? await measure(bin('ctr'), ['--address', sock, '--namespace', NAMESPACE, 'images', 'pull', '--plain-http', '--snapshotter', snapshotter, ref], {
                timeoutMs,
                daemons,
                env,
                ...traced,
              })
            : await measure(process.execPath, [client, 'pull', sock, ref], { timeoutMs, daemons, ...traced });
        const bytes = diskBytes(join(cdir, 'root'), ...(proxy ? [proxy.root] : []));
        let seconds = clientKind === 'ctr' ? m.wall : NaN;
        if (clientKind === 'cri') {
          try {
            seconds = (JSON.parse(m.output.trim().split('\n').at(-1)!) as { ms: number }).ms / 1000;
          } catch {
            /* failed: the note says why */
          }
        }
        const ok = m.ok && Number.isFinite(seconds);
        const what = clientKind === 'ctr' ? `ctr images pull (${snapshotter})` : `CRI PullImage (${snapshotter})`;
        const notes = [ok ? `${snapshotter} snapshotter${tuned ? ', chunked fetch and parallel unpack' : ''}` : failure(what, m)];
        if (proxy?.name === 'fastpulld') notes.push(fastPathNote(proxy.log()));
        if (snapshotter === 'soci' && proxy) notes.push(sociNote(proxy.log()));
        if (ok && options.inspect) {
          await options.inspect({
            ref,
            ctr: bin('ctr'),
            socket: sock,
            namespace: NAMESPACE,
            snapshotter,
            env,
            logs: { containerd: log, snapshotter: proxy?.log() ?? '' },
            config,
          });
        }
        return {
          ...m,
          ok,
          wall: ok ? seconds : m.wall,
          bytes,
          phases: { ...(clientKind === 'cri' ? { 'client process': m.wall } : {}), ...(proxy?.name === 'fastpulld' ? fastpulldPhases(proxy.log()) : {}) },
          note: notes.join('; '),
        };
      } finally {
        if (containerd) await stop(containerd);
        if (proxy) await stop(proxy.proc);
        // A killed pull may leave an apply mount.
        spawnSync('sh', ['-c', 'grep -o " $0[^ ]*" /proc/mounts | xargs -r -n1 umount -l', dir], { stdio: 'ignore' });
      }
    },
  };
}
