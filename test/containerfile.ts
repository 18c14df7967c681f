// Replays a Containerfile without a container engine: each stage runs in a private mount namespace
// (unshare) where the directories an image would own (/usr/local, /home, /root, /tmp, /run) are empty
// directories of the test's, so `npm install -g` puts commands in /usr/local/bin as in the node
// images. COPY of the context copies a clean tree of the repository's HEAD (what a fresh clone
// holds); RUN runs each `&&` step as written, as the stage's USER (setpriv), except the steps that
// would change this machine rather than the stage: `apt-get` (checked: every package it installs
// must be one apt knows) and removals outside the stage's own directories. How this machine reaches
// the npm registry (its user npmrc, CA and proxy variables) is carried into the stages: that is
// the machine's, not the image's.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** The directories a stage owns: they start empty, like an image's. */
export const STAGE_DIRS = ['/usr/local', '/home', '/root', '/tmp', '/run'] as const;

export interface Instruction {
  readonly op: string;
  readonly args: string;
}

/** The instructions of a Containerfile, one per line (comments and blank lines dropped). */
export function parseContainerfile(text: string): Instruction[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'))
    .map((l) => {
      const m = /^\s*([A-Z]+)\s+(.*)$/.exec(l);
      if (!m) throw new Error(`not an instruction: ${l}`);
      return { op: m[1]!, args: m[2]!.trim() };
    });
}

/** A user to run as: ids, supplementary groups (none unless given) and home. */
export interface StageUser {
  readonly uid: number;
  readonly gid: number;
  readonly groups?: readonly number[];
  readonly home: string;
}

/** The users of the node images, by name. */
const USERS: Record<string, StageUser> = { root: { uid: 0, gid: 0, home: '/root' }, node: { uid: 1000, gid: 1000, home: '/home/node' } };

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * A stage's mount namespace, held open by a sleeping process (killed with this one, should the
 * test die); commands enter it with nsenter.
 */
export class StageNamespace {
  private constructor(
    private readonly holder: ChildProcess,
    /** Where each of {@link STAGE_DIRS} lies on this machine. */
    readonly dirs: Record<string, string>,
    /** The machine's settings for reaching the registry, as environment variables. */
    private readonly machineEnv: Record<string, string>,
  ) {}

  static async open(base: string): Promise<StageNamespace> {
    mkdirSync(base, { recursive: true });
    for (const d of [dirname(base), base]) chmodSync(d, 0o755); // the stage's users read the machine's npmrc here
    const machineEnv: Record<string, string> = {};
    for (const k of [
      'NODE_EXTRA_CA_CERTS',
      'SSL_CERT_FILE',
      'SSL_CERT_DIR',
      'HTTP_PROXY',
      'HTTPS_PROXY',
      'NO_PROXY',
      'http_proxy',
      'https_proxy',
      'no_proxy',
    ]) {
      if (process.env[k]) machineEnv[k] = process.env[k]!;
    }
    const npmrc = join(homedir(), '.npmrc');
    if (existsSync(npmrc)) {
      copyFileSync(npmrc, (machineEnv.NPM_CONFIG_USERCONFIG = join(base, 'machine.npmrc')));
      chmodSync(machineEnv.NPM_CONFIG_USERCONFIG, 0o644);
    }
    const dirs: Record<string, string> = {};
    for (const d of STAGE_DIRS) mkdirSync((dirs[d] = join(base, d.slice(1).replace(/\//g, '-'))), { recursive: true });
    mkdirSync(join(dirs['/home']!, 'node'), { recursive: true });
    spawnSync('chown', ['1000:1000', join(dirs['/home']!, 'node')]);
    spawnSync('chmod', ['1777', dirs['/tmp']!]);
    const binds = STAGE_DIRS.map((d) => `mount --bind '${dirs[d]}' '${d}'`).join(' && ');
    const holder = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', 'setpriv', '--pdeathsig', 'KILL', 'sh', '-c', `${binds} && echo ready && exec sleep 100000`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await new Promise<void>((resolve, reject) => {
      let err = '';
      holder.stderr.on('data', (d: Buffer) => (err += d.toString()));
      holder.stdout.once('data', () => resolve());
      holder.once('exit', (code) => reject(new Error(`unshare exited with ${code}: ${err}`)));
    });
    return new StageNamespace(holder, dirs, machineEnv);
  }

  /** The argv that runs `script` (bash) inside the namespace as `user`, in `cwd`, with an image's environment. */
  argv(script: string, user: string | StageUser = 'root', cwd = '/', env: Record<string, string> = {}): string[] {
    const u = typeof user === 'string' ? USERS[user] : user;
    if (!u) throw new Error(`unknown user ${String(user)}`);
    const vars = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: u.home,
      NPM_CONFIG_PREFIX: '/usr/local',
      NPM_CONFIG_UPDATE_NOTIFIER: 'false',
      ...this.machineEnv,
      ...env,
    };
    const groups = u.groups?.length ? [`--groups=${u.groups.join(',')}`] : ['--clear-groups'];
    const setpriv = ['setpriv', `--reuid=${u.uid}`, `--regid=${u.gid}`, ...groups];
    return [
      'nsenter',
      `--target=${this.holder.pid}`,
      '--mount',
      '--',
      'env',
      '-i',
      ...Object.entries(vars).map(([k, v]) => `${k}=${v}`),
      ...setpriv,
      'bash',
      '-c',
      `cd '${cwd}' && ${script}`,
    ];
  }

  /** Runs `script` in the namespace; never throws on a non-zero exit. */
  run(script: string, user: string | StageUser = 'root', cwd = '/', timeoutMs = 600_000): Promise<RunResult> {
    const [cmd, ...args] = this.argv(script, user, cwd);
    return new Promise((resolve) => {
      const child = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  }

  close(): void {
    this.holder.kill('SIGKILL');
  }
}

/** What a replayed RUN step did. */
export interface Step {
  readonly stage: string;
  readonly command: string;
  readonly how: 'ran' | 'checked' | 'partly';
  readonly note?: string;
}

/**
 * Replays `containerfile`: `context` is the build context (a clean tree), `stages` gets each
 * stage's namespace by name (the last is kept open for the caller and returned; the others closed).
 */
export async function replay(
  containerfile: string,
  context: string,
  work: string,
  log: (s: Step) => void,
): Promise<{ final: StageNamespace; stages: Map<string, StageNamespace> }> {
  const stages = new Map<string, StageNamespace>();
  try {
    return await replayStages(containerfile, context, work, log, stages);
  } catch (e) {
    for (const s of stages.values()) s.close();
    throw e;
  }
}

async function replayStages(
  containerfile: string,
  context: string,
  work: string,
  log: (s: Step) => void,
  stages: Map<string, StageNamespace>,
): Promise<{ final: StageNamespace; stages: Map<string, StageNamespace> }> {
  let ns: StageNamespace | undefined;
  let stage = '';
  let user = 'root';
  let cwd = '/';
  const fail = (what: string, r: RunResult): never => {
    throw new Error(`${stage}: ${what} exited with ${r.status}\nstdout:\n${r.stdout.slice(-4000)}\nstderr:\n${r.stderr.slice(-4000)}`);
  };
  for (const { op, args } of parseContainerfile(readFileSync(containerfile, 'utf8'))) {
    if (op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      stage = m[2] ?? `stage-${stages.size}`;
      ns = await StageNamespace.open(join(work, stage));
      stages.set(stage, ns);
      user = 'root';
      cwd = '/';
    } else if (!ns) {
      throw new Error(`${op} before FROM`);
    } else if (op === 'USER') {
      user = args;
    } else if (op === 'WORKDIR') {
      cwd = args;
    } else if (op === 'COPY') {
      const words = args.split(/\s+/);
      const flags = Object.fromEntries(words.filter((w) => w.startsWith('--')).map((w) => w.slice(2).split('=') as [string, string]));
      const [src, dest] = words.filter((w) => !w.startsWith('--')) as [string, string];
      const from = flags.from ? stages.get(flags.from) : undefined;
      if (flags.from && !from) throw new Error(`COPY --from=${flags.from}: no such stage`);
      const source = from ? hostPath(from, src) : join(context, src);
      const target = hostPath(ns, dest);
      mkdirSync(dirname(target), { recursive: true });
      cpSync(source, target, { recursive: true });
      if (flags.chown)
        spawnSync('chown', [
          '-R',
          flags.chown
            .split(':')
            .map((n) => String(n === 'node' ? 1000 : n === 'root' ? 0 : n))
            .join(':'),
          target,
        ]);
    } else if (op === 'RUN') {
      for (const command of args.split(/\s+&&\s+/)) {
        if (command.startsWith('apt-get ')) {
          const words = command.split(/\s+/).slice(1);
          const verb = words.find((w) => !w.startsWith('-'));
          const packages = verb === 'install' || verb === 'purge' ? words.slice(words.indexOf(verb) + 1).filter((w) => !w.startsWith('-')) : [];
          for (const p of packages) {
            const known = spawnSync('apt-cache', ['show', '--no-all-versions', p], { encoding: 'utf8' });
            if (known.status !== 0) throw new Error(`${stage}: ${command}: apt knows no package ${p}`);
          }
          log({
            stage,
            command,
            how: 'checked',
            note: packages.length ? `apt knows ${packages.join(', ')}` : 'not run: it changes the machine, not the stage',
          });
        } else if (command.startsWith('rm ')) {
          const words = command.split(/\s+/).slice(1);
          const own = words.filter((w) => w.startsWith('-') || STAGE_DIRS.some((d) => w === d || w.startsWith(`${d}/`)));
          const r = await ns.run(`rm ${own.join(' ')}`, user, cwd);
          if (r.status !== 0) fail(command, r);
          const left = words.filter((w) => !own.includes(w));
          log({
            stage,
            command,
            how: left.length ? 'partly' : 'ran',
            ...(left.length ? { note: `not removed here (outside the stage): ${left.join(' ')}` } : {}),
          });
        } else {
          const r = await ns.run(command, user, cwd);
          if (r.status !== 0) fail(command, r);
          log({ stage, command, how: 'ran' });
        }
      }
    } else if (op !== 'CMD' && op !== 'ENTRYPOINT' && op !== 'LABEL') {
      throw new Error(`the replay does not know ${op}`);
    }
  }
  for (const s of stages.values()) if (s !== ns) s.close();
  if (!ns) throw new Error('no stage');
  return { final: ns, stages };
}

/** Where a path of a stage lies on this machine (it must be under one of {@link STAGE_DIRS}). */
export function hostPath(ns: StageNamespace, path: string): string {
  const dir = STAGE_DIRS.find((d) => path === d || path.startsWith(`${d}/`));
  if (!dir) throw new Error(`${path} is outside the directories a replayed stage owns`);
  return join(ns.dirs[dir]!, path.slice(dir.length));
}
