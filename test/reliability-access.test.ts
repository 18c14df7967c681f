// Reliability campaign 6, access: fastpulld's socket is not usable by other users (mode, owner and
// group checked; a process of another uid is refused with EACCES, a member of the configured group
// gets in), requests cannot name paths outside the store (hostile names, digests and snapshot keys
// on every RPC that takes one, with sentinel files around the store), and credentials never appear
// in logs, errors or metrics (basic auth and a token registry, right and wrong passwords, a
// redirect to another origin; CLI with --debug and --json, and the daemon's pino logs and
// Prometheus text are searched for the password, its base64 and any token-shaped string).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { parseReference } from '@fastpull/core';
import { type BuiltImage, lacks, lacksRoot, notHere, type LoopbackRegistry, sampleImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { FASTPULL_PROTO, PROTO_DIR } from '@fastpull/daemon';
import { cliPath, repoRoot, runCliAsync, tempDir } from './helpers.js';

const daemonBin = join(repoRoot, 'packages', 'daemon', 'dist', 'bin.js');
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;
/** A gid nobody on the machine has: only the processes the test gives it are in the group. */
const SOCKET_GID = 42_424;
const OTHER_UID = 65_534;
/** FASTPULL_RELIABILITY_LONG=1: every output form (plain, --debug, --json) for every credential case. */
const LONG = process.env.FASTPULL_RELIABILITY_LONG === '1';

interface Daemon {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  metrics: string;
  exited: Promise<void>;
}

async function startDaemon(args: string[]): Promise<Daemon> {
  const proc = spawn(process.execPath, [daemonBin, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FASTPULLD_CONFIG: '' } });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const line = out.split('\n').find((l) => l.includes('"fastpulld serving"'));
    if (line) return { proc, out: () => out, err: () => err, metrics: String((JSON.parse(line) as { metrics?: string }).metrics ?? ''), exited };
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`fastpulld did not start: ${out}\n${err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopDaemon(d: Daemon | undefined): Promise<void> {
  if (!d || d.proc.exitCode !== null) return;
  d.proc.kill('SIGTERM');
  await d.exited;
}

/** Tries to connect to the socket as `uid` with `groups`, in a separate process; returns 'connected' or the errno. */
function connectAs(socket: string, uid: number, gid: number, groups: number[]): string {
  const args = [`--reuid=${uid}`, `--regid=${gid}`, ...(groups.length > 0 ? [`--groups=${groups.join(',')}`] : ['--clear-groups'])];
  const script = `const s=require('net').connect(${JSON.stringify(socket)});s.on('connect',()=>{console.log('connected');s.destroy()});s.on('error',(e)=>console.log(e.code))`;
  const r = spawnSync('setpriv', [...args, process.execPath, '-e', script], { encoding: 'utf8', timeout: 120_000, env: { PATH: process.env.PATH } });
  return (r.stdout || r.stderr).trim();
}

/** Everything under `dir` but `skip`: type, mode, size, mtime, link target, content hash. */
function fingerprint(dir: string, skip: string): string {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (p === skip) continue;
      const st = lstatSync(p);
      const extra = st.isSymbolicLink() ? readlinkSync(p) : st.isFile() ? createHash('sha256').update(readFileSync(p)).digest('hex') : '';
      out.push(`${p} ${st.mode.toString(8)} ${st.size} ${st.mtimeMs} ${extra}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.join('\n');
}

/** The store's objects (blobs, snapshots, image records), as names. */
function storeObjects(root: string): string {
  const list = (p: string): string[] => {
    try {
      return readdirSync(join(root, p)).sort();
    } catch {
      return [];
    }
  };
  return JSON.stringify({ blobs: list('content/blobs/sha256'), snapshots: list('snapshots'), images: list('images') });
}

describe.skipIf(lacksRoot())('access: the daemon socket', () => {
  const work = tempDir('access-socket');
  let daemon: Daemon | undefined;
  const socket = join(work.dir, 'run', 'fastpulld.sock');

  beforeAll(async () => {
    // The path to the socket must be open to everyone, so that only the socket's own mode decides.
    chmodSync(work.dir, 0o755);
    daemon = await startDaemon(['--socket', socket, '--root', join(work.dir, 'root'), '--group', String(SOCKET_GID)]);
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    work.cleanup();
  });

  it('is a socket of mode 0660, owned by root and the configured group', () => {
    const st = statSync(socket);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o7777).toBe(0o660);
    expect(st.uid).toBe(0);
    expect(st.gid).toBe(SOCKET_GID);
  });

  it.skipIf(lacks('setpriv', hasSetpriv ? undefined : 'setpriv (util-linux) is not installed'))(
    'refuses another user (EACCES) and admits a member of the group',
    () => {
      expect(connectAs(socket, OTHER_UID, OTHER_UID, [])).toBe('EACCES');
      // Same uid, now in the socket's group: admitted.
      expect(connectAs(socket, OTHER_UID, OTHER_UID, [SOCKET_GID])).toBe('connected');
      // The group as primary group is enough too.
      expect(connectAs(socket, OTHER_UID, SOCKET_GID, [])).toBe('connected');
      // Root's group (gid 0) is not the socket's group: no way in through it either.
      expect(connectAs(socket, OTHER_UID, 0, [])).toBe('EACCES');
    },
  );

  it.skipIf(lacks('setpriv', hasSetpriv ? undefined : 'setpriv (util-linux) is not installed'))(
    'tells a user refused by the socket that it may not connect, not that nothing listens',
    (ctx) => {
      const asOther = (args: string[]) =>
        spawnSync('setpriv', [`--reuid=${OTHER_UID}`, `--regid=${OTHER_UID}`, '--clear-groups', process.execPath, cliPath, ...args], {
          encoding: 'utf8',
          timeout: 120_000,
          env: { PATH: process.env.PATH, HOME: '/nonexistent' },
        });
      const probe = asOther(['--version']);
      if (probe.status !== 0) {
        notHere(`the CLI cannot run as uid ${OTHER_UID} from this checkout (its files are closed to that user): ${probe.stderr.trim().split('\n')[0]}`);
        ctx.skip();
        return;
      }
      const refused = asOther(['images', '--address', `unix:${socket}`]);
      expect(refused.status, refused.stderr).toBe(1);
      expect(refused.stderr).toContain('PERMISSION_DENIED');
      expect(refused.stderr).toContain(`may not connect to fastpulld at ${socket}`);
      expect(refused.stderr).toContain(`gid ${SOCKET_GID}, mode 0660`);
      // Where no socket is, it still says that nothing listens.
      const none = asOther(['images', '--address', `unix:${join(work.dir, 'run', 'none.sock')}`]);
      expect(none.status, none.stderr).toBe(1);
      expect(none.stderr).toContain('no fastpulld listens at');
    },
  );
});

// ---- requests that name paths ----

type Unary = (req: object, cb: (e: grpc.ServiceError | null, res?: unknown) => void) => void;

describe('access: requests cannot name paths outside the store', () => {
  const work = tempDir('access-paths');
  const root = join(work.dir, 'store', 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  let daemon: Daemon | undefined;
  let loop: LoopbackRegistry;
  let image: BuiltImage;
  let services: Record<string, grpc.Client & Record<string, Unary>> = {};

  beforeAll(async () => {
    // Sentinels around the store: a victim tree beside it, a secret above it, a blob-named file and a
    // snapshot-named directory outside it, and a link pointing out.
    mkdirSync(join(work.dir, 'victim', 'dir'), { recursive: true });
    writeFileSync(join(work.dir, 'victim', 'secret.txt'), 'secret\n');
    mkdirSync(join(work.dir, 'store'), { recursive: true });
    writeFileSync(join(work.dir, 'store', 'above.txt'), 'above the store root\n');
    writeFileSync(join(work.dir, 'victim', 'a'.repeat(64)), 'not a blob\n');
    mkdirSync(join(work.dir, 'victim', 'snapshot', 'fs'), { recursive: true });
    loop = await startLoopbackRegistry();
    image = await sampleImage(606, { layers: 2 });
    loop.addImage('access/app', '1', image);
    daemon = await startDaemon(['--socket', socket, '--root', root]);
    const pull = await runCliAsync(['pull', '--address', socket, '--quiet', `${loop.host}/access/app:1`]);
    expect(pull.status, pull.stderr).toBe(0);
    const def = grpc.loadPackageDefinition(
      protoLoader.loadSync(FASTPULL_PROTO, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] }),
    ) as unknown as { fastpull: { v1: Record<string, grpc.ServiceClientConstructor> } };
    for (const name of ['Images', 'Snapshots', 'Content']) {
      services[name] = new def.fastpull.v1[name]!(`unix://${socket}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Unary>;
    }
  });
  afterAll(async () => {
    for (const c of Object.values(services)) c.close();
    services = {};
    await stopDaemon(daemon);
    await loop?.close();
    work.cleanup();
  });

  const HOSTILE_NAMES = [
    '../',
    '../../victim/secret.txt',
    '/etc/passwd',
    '/',
    '.',
    '..',
    'a\0b',
    `sha256:${'a'.repeat(64)}\0`,
    'x'.repeat(10_000),
    `sha256:../../victim/${'a'.repeat(64)}`,
    `sha256:${'a'.repeat(64)}/../../..`,
    `sha256:${'a'.repeat(32)}/${'a'.repeat(31)}`,
    `sha256:/${'a'.repeat(63)}`,
    'sha256:..',
    `sha512:${'b'.repeat(64)}`,
    `SHA256:${'a'.repeat(64)}`,
    '127.0.0.1:1/../../../victim:1',
    'docker.io/library/../../victim',
    'localhost:5000/a/../../b:1',
    'a/b@sha256:../../../victim',
    '%2e%2e%2fvictim',
    'snapshots/../../victim',
    `sha256:${'0'.repeat(64)}`,
  ];

  function call(service: string, method: string, req: object): Promise<{ code: number; fastpullCode: string | undefined; details: string }> {
    return new Promise((resolve) => {
      services[service]![method]!.call(services[service], req, (e: grpc.ServiceError | null) => {
        if (!e) resolve({ code: grpc.status.OK, fastpullCode: undefined, details: '' });
        else resolve({ code: e.code, fastpullCode: String(e.metadata?.get('fastpull-code')[0] ?? ''), details: e.details });
      });
    });
  }

  function pullCall(reference: string, platform = ''): Promise<{ code: number; fastpullCode: string | undefined }> {
    return new Promise((resolve) => {
      const stream = (services.Images as unknown as { Pull: (r: object) => grpc.ClientReadableStream<unknown> }).Pull({ reference, platform, plainHttp: true });
      stream.on('data', () => undefined);
      stream.on('error', (e: grpc.ServiceError) => resolve({ code: e.code, fastpullCode: String(e.metadata?.get('fastpull-code')[0] ?? '') }));
      stream.on('end', () => resolve({ code: grpc.status.OK, fastpullCode: undefined }));
    });
  }

  it('answers INVALID_ARGUMENT or NOT_FOUND to every hostile name, digest and snapshot key, and touches nothing', async () => {
    const outside = () => fingerprint(work.dir, root);
    const before = outside();
    const objects = storeObjects(root);
    const calls: Array<[string, string, (v: string) => object]> = [
      ['Images', 'Get', (v) => ({ name: v })],
      ['Images', 'Remove', (v) => ({ name: v, gc: true })],
      ['Snapshots', 'Mounts', (v) => ({ image: v })],
      ['Snapshots', 'Mounts', (v) => ({ chainId: v })],
      ['Snapshots', 'Usage', (v) => ({ chainId: v })],
      ['Content', 'Info', (v) => ({ digest: v })],
      ['Content', 'Delete', (v) => ({ digest: v })],
    ];
    let tried = 0;
    for (const v of HOSTILE_NAMES) {
      for (const [service, method, req] of calls) {
        const r = await call(service, method, req(v));
        tried++;
        expect(
          [grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND],
          `${service}.${method}(${JSON.stringify(v.slice(0, 80))}): ${r.code} ${r.details}`,
        ).toContain(r.code);
        expect(['INVALID_ARGUMENT', 'INVALID_REFERENCE', 'INVALID_DIGEST', 'NOT_FOUND']).toContain(r.fastpullCode);
      }
      // Pulls of hostile references and platforms are refused before any request goes out. (A value
      // that is a valid reference on its own names Docker Hub: only its loopback form is pulled.)
      const served = loop.stats.requests.length;
      let valid = true;
      try {
        parseReference(v);
      } catch {
        valid = false;
      }
      if (!valid) {
        const p = await pullCall(v);
        tried++;
        expect(p.code, `Pull(${JSON.stringify(v.slice(0, 80))})`).toBe(grpc.status.INVALID_ARGUMENT);
        expect(loop.stats.requests.length).toBe(served);
      }
      const onLoop = await pullCall(`${loop.host}/${v}`);
      const q = await pullCall(`${loop.host}/access/app:1`, v);
      tried += 2;
      expect([grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND], `Pull(${JSON.stringify(`${loop.host}/${v}`.slice(0, 80))})`).toContain(onLoop.code);
      expect(q.code, `Pull(platform ${JSON.stringify(v.slice(0, 80))})`).toBe(grpc.status.INVALID_ARGUMENT);
    }
    expect(outside(), 'files outside the store changed').toBe(before);
    expect(storeObjects(root), 'the store lost or gained objects').toBe(objects);
    // The image is still there and whole.
    const get = await call('Images', 'Get', { name: `${loop.host}/access/app:1` });
    expect(get.code).toBe(grpc.status.OK);
    console.log(`access: ${tried} hostile requests over ${HOSTILE_NAMES.length} values, all refused; nothing outside the store changed`);
  });
});

// ---- credentials ----

describe('access: credentials never appear in logs, errors or metrics', () => {
  const USER = 'alice';
  const PASSWORD = 'pw-Zk3q9vT7mX2bL5';
  const B64 = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
  /** The loopback registry's tokens are 24 random bytes as hex. */
  const TOKEN_SHAPE = /(?<![0-9a-f])[0-9a-f]{48}(?![0-9a-f])/;
  const work = tempDir('access-creds');
  let basic: LoopbackRegistry;
  let bearer: LoopbackRegistry;
  let storage: LoopbackRegistry;
  let daemon: Daemon | undefined;
  const socket = join(work.dir, 'fastpulld.sock');
  const texts: Array<[string, string]> = [];

  beforeAll(async () => {
    const image = await sampleImage(607, { layers: 2 });
    basic = await startLoopbackRegistry({ auth: { type: 'basic', username: USER, password: PASSWORD } });
    bearer = await startLoopbackRegistry({ auth: { type: 'bearer', username: USER, password: PASSWORD } });
    storage = await startLoopbackRegistry();
    for (const r of [basic, bearer, storage]) r.addImage('sec/app', '1', image);
    daemon = await startDaemon(['--socket', socket, '--root', join(work.dir, 'droot'), '--metrics-address', '127.0.0.1:0', '--log-level', 'trace']);
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    for (const r of [basic, bearer, storage]) await r?.close();
    work.cleanup();
  });

  let pulls = 0;
  async function cli(label: string, args: string[], want: number): Promise<void> {
    pulls++;
    const r = await runCliAsync(args);
    texts.push([`${label} stdout`, r.stdout], [`${label} stderr`, r.stderr]);
    expect(r.status, `${label}: ${r.stderr}`).toBe(want);
  }

  it(
    'pulls with right and wrong credentials through the CLI and the daemon, with a redirect to another origin, and no secret leaks',
    { timeout: LONG ? 400_000 : 150_000 },
    async () => {
      let n = 0;
      const cases: Array<[string, LoopbackRegistry, string, number]> = [
        ['basic', basic, PASSWORD, 0],
        ['basic wrong', basic, 'wrong-password', 1],
        ['bearer', bearer, PASSWORD, 0],
        ['bearer wrong', bearer, 'wrong-password', 1],
      ];
      for (const [label, reg, pw, want] of cases) {
        const ref = `${reg.host}/sec/app:1`;
        for (const form of LONG ? [['--debug'], ['--json'], []] : label.endsWith('wrong') ? [['--debug'], ['--json']] : [['--json']]) {
          await cli(
            `CLI ${label} ${form.join(' ')}`,
            [
              ...form.filter((f) => f === '--debug'),
              'pull',
              '--root',
              join(work.dir, `root-${n++}`),
              '--creds',
              `${USER}:${pw}`,
              ...form.filter((f) => f === '--json'),
              ref,
            ],
            want,
          );
          await cli(
            `daemon ${label} ${form.join(' ')}`,
            [...form.filter((f) => f === '--debug'), 'pull', '--address', socket, '--creds', `${USER}:${pw}`, ...form.filter((f) => f === '--json'), ref],
            want,
          );
        }
      }
      // A redirect of every blob to another origin: the credentials stay with the registry.
      basic.faults.redirectBlobsTo = storage.url;
      storage.stats.reset();
      await cli('CLI redirect', ['--debug', 'pull', '--root', join(work.dir, 'root-redirect'), '--creds', `${USER}:${PASSWORD}`, `${basic.host}/sec/app:1`], 0);
      await cli('daemon redirect', ['--debug', 'pull', '--address', socket, '--creds', `${USER}:${PASSWORD}`, `${basic.host}/sec/app:1`], 0);
      const blobGets = storage.stats.requests.filter((r) => r.path.includes('/blobs/'));
      expect(blobGets.length).toBeGreaterThan(0);
      expect(
        blobGets.every((r) => !r.authorization),
        'credentials went to the redirect target',
      ).toBe(true);
      expect(basic.stats.requests.some((r) => r.authorization)).toBe(true);
      expect(bearer.stats.tokensIssued).toBeGreaterThan(0);

      const metrics = await (await fetch(`${daemon!.metrics.replace(/\/metrics$/, '')}/metrics`)).text();
      expect(metrics).toContain('fastpulld_');
      texts.push(['daemon stdout (pino)', daemon!.out()], ['daemon stderr', daemon!.err()], ['metrics', metrics]);
      // The daemon logged the failures it saw.
      expect(daemon!.out()).toMatch(/UNAUTHORIZED/);
      let bytes = 0;
      for (const [where, text] of texts) {
        bytes += text.length;
        expect(text.includes(PASSWORD), `the password appears in ${where}`).toBe(false);
        expect(text.includes(B64), `user:password in base64 appears in ${where}`).toBe(false);
        expect(TOKEN_SHAPE.test(text), `a token appears in ${where}: ${TOKEN_SHAPE.exec(text)?.[0]}`).toBe(false);
        expect(/Basic [A-Za-z0-9+/=]{8,}|Bearer [A-Za-z0-9._~+/-]{8,}/.test(text), `an Authorization value appears in ${where}`).toBe(false);
      }
      console.log(`access: ${texts.length} outputs (${bytes} bytes) of ${pulls} pulls searched; no password, base64 or token in any`);
    },
  );
});
