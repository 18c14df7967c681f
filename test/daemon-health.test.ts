// fastpulld's health per service, on a real process whose store is a small tmpfs: the store made
// read-only (a read-only bind mount: root writes through a chmod), the disk nearly full (a filler
// file), containerd's snapshot records taken away (their directory renamed). Each fault, with a
// check asked for through /readyz (no timer: --health-interval 0), turns the services that need the
// faulty part NOT_SERVING, seen through grpc.health.v1 Watch and Check (its reason in the trailing
// metadata), /readyz's 503 and body, the log and the metrics; given back, all turn SERVING again.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { lacks } from '@fastpull/core/testing';
import { HEALTH_PROTO, PROTO_DIR } from '@fastpull/daemon';
import { repoRoot, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const MiB = 1024 * 1024;
const API = 'fastpull.v1.Images';
const SNAPSHOTTER = 'containerd.services.snapshots.v1.Snapshots';
const SERVICES = ['', API, 'fastpull.v1.Snapshots', 'fastpull.v1.Content', SNAPSHOTTER] as const;

function tmpfsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root (mounting a tmpfs and a read-only bind mount needs it)';
  const { dir, cleanup } = tempDir('tmpfs-probe');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'fastpull-probe', dir], { stdio: 'pipe' });
    execFileSync('umount', [dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return `tmpfs mount not permitted: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`;
  } finally {
    cleanup();
  }
}
const missing = tmpfsUnavailable();

type HealthClient = grpc.Client & {
  Watch: (req: { service: string }) => grpc.ClientReadableStream<{ status: string }>;
  Check: (req: { service: string }, cb: (e: grpc.ServiceError | null, r: { status: string }) => void) => grpc.ClientUnaryCall;
};

/** A Watch of one service: every status it was sent, and a wait for the next one to be `status`. */
class Watched {
  readonly seen: string[] = [];
  private waiters: Array<{ status: string; resolve: () => void }> = [];
  readonly stream: grpc.ClientReadableStream<{ status: string }>;
  constructor(client: HealthClient, service: string) {
    this.stream = client.Watch({ service });
    this.stream.on('data', (m: { status: string }) => {
      this.seen.push(m.status);
      this.waiters = this.waiters.filter((w) => (w.status === m.status ? (w.resolve(), false) : true));
    });
    this.stream.on('error', () => undefined);
  }
  /** Resolves once the latest status sent is `status`. */
  until(status: string): Promise<void> {
    if (this.seen.at(-1) === status) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ status, resolve }));
  }
}

describe.skipIf(lacks('tmpfs', missing))('fastpulld health per service', () => {
  const work = tempDir('daemon-health');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  const snapshotterSocket = join(work.dir, 'snapshotter.sock');
  let d: RunningDaemon | undefined;
  let client: HealthClient;
  let base = '';
  const watches = new Map<string, Watched>();
  let roBind = false;

  beforeAll(async () => {
    mkdirSync(root);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${32 * MiB},mode=0755`, 'fastpull-health', root], { stdio: 'pipe' });
    d = await serveDaemon([
      '--socket',
      socket,
      '--snapshotter-socket',
      snapshotterSocket,
      '--root',
      root,
      '--metrics-address',
      '127.0.0.1:0',
      '--min-free-space',
      '8MiB',
      '--health-interval',
      '0',
    ]);
    base = String(d.logs.find((l) => l.msg === 'fastpulld serving')!.metrics).replace(/\/metrics$/, '');
    const def = protoLoader.loadSync(HEALTH_PROTO, { includeDirs: [PROTO_DIR], keepCase: false, defaults: true, enums: String });
    const Ctor = grpc.makeClientConstructor(def['grpc.health.v1.Health'] as grpc.ServiceDefinition, 'Health');
    client = new Ctor(`unix:${socket}`, grpc.credentials.createInsecure()) as unknown as HealthClient;
    for (const s of SERVICES) watches.set(s, new Watched(client, s));
  });
  afterAll(async () => {
    for (const w of watches.values()) w.stream.cancel();
    client?.close();
    await stopDaemon(d);
    if (roBind) execFileSync('umount', [root], { stdio: 'pipe' });
    if (!missing) execFileSync('umount', ['-l', root], { stdio: 'pipe' });
    work.cleanup();
  });

  const readyz = async (service?: string): Promise<{ status: number; body: string }> => {
    const r = await fetch(`${base}/readyz${service === undefined ? '' : `?service=${encodeURIComponent(service)}`}`);
    return { status: r.status, body: await r.text() };
  };
  const metrics = async (): Promise<string> => (await fetch(`${base}/metrics`)).text();
  /** A health Check: the status, and the reason its trailing metadata gives. */
  const check = (service: string): Promise<{ status: string; reason: string | undefined }> =>
    new Promise((resolve, reject) => {
      let reason: string | undefined;
      const call = client.Check({ service }, (e, r) => (e ? reject(e) : setImmediate(() => resolve({ status: r.status, reason }))));
      call.on('status', (s: grpc.StatusObject) => (reason = s.metadata.get('fastpull-health-reason')[0]?.toString()));
    });
  /**
   * deploy/fastpulld-health.mjs as written, run where @fastpull/daemon resolves (this folder's
   * node_modules): its source on stdin.
   */
  const healthScript = (): { status: number | null; stderr: string } =>
    spawnSync(process.execPath, ['--input-type=module', '-', '--socket', socket, '--snapshotter-socket', snapshotterSocket], {
      cwd: join(repoRoot, 'test'),
      input: readFileSync(join(repoRoot, 'deploy', 'fastpulld-health.mjs')),
      encoding: 'utf8',
    });
  const allAre = async (services: readonly string[], status: string): Promise<void> => {
    await Promise.all(services.map((s) => watches.get(s)!.until(status)));
  };

  /**
   * Applies `fault`, asks for a check through /readyz and expects `down` NOT_SERVING with `reason`
   * (and every other service SERVING), the failing check in the log and the metrics; then `restore`,
   * and every service SERVING again.
   */
  async function faultAndBack(name: string, fault: () => void, restore: () => void, down: readonly string[], reason: RegExp): Promise<void> {
    const up = SERVICES.filter((s) => !down.includes(s));
    fault();
    const r = await readyz();
    expect(r.status, name).toBe(503);
    expect(r.body).toMatch(/^not ready: /);
    expect(r.body).toMatch(reason);
    await allAre(down, 'NOT_SERVING');
    for (const s of down) {
      const c = await check(s);
      expect(c.status, s).toBe('NOT_SERVING');
      expect(c.reason, s).toMatch(reason);
    }
    for (const s of up) expect(await check(s), s).toEqual({ status: 'SERVING', reason: undefined });
    // Each service's readiness on its own, as a probe of one socket asks for it.
    for (const s of down.filter(Boolean)) expect((await readyz(s)).body, s).toMatch(reason);
    for (const s of down.filter(Boolean)) expect((await readyz(s)).status, s).toBe(503);
    for (const s of up) expect(await readyz(s), s).toEqual({ status: 200, body: 'ok\n' });
    const failing = await d!.waitLog((l) => l.msg === 'health check failing' && l.check === name);
    expect(String(failing.reason)).toMatch(reason);
    expect(d!.logs.filter((l) => l.msg === 'health check failing' && l.check === name)).toHaveLength(1);
    // Asked again, the same fault is no change: nothing more is logged.
    expect((await readyz()).status).toBe(503);
    expect(d!.logs.filter((l) => l.msg === 'health check failing' && l.check === name)).toHaveLength(1);
    const text = await metrics();
    expect(text).toMatch(new RegExp(`^fastpull_health_check_failing\\{check="${name}"\\} 1$`, 'm'));
    for (const s of down) expect(text).toMatch(new RegExp(`^fastpull_health_serving\\{service="${s}"\\} 0$`, 'm'));
    for (const s of up) expect(text).toMatch(new RegExp(`^fastpull_health_serving\\{service="${s}"\\} 1$`, 'm'));

    if (down.includes('')) {
      const script = healthScript();
      expect(script.status).toBe(1);
      expect(script.stderr).toMatch(new RegExp(`^fastpulld is not healthy: ${socket}: health is NOT_SERVING: .*${reason.source}`));
    }

    restore();
    expect(await readyz()).toEqual({ status: 200, body: 'ok\n' });
    if (down.includes('')) expect(healthScript()).toMatchObject({ status: 0, stderr: '' });
    await allAre(SERVICES, 'SERVING');
    for (const s of SERVICES) expect(await check(s), s).toEqual({ status: 'SERVING', reason: undefined });
    await d!.waitLog((l) => l.msg === 'health check passing again' && l.check === name);
    expect(await metrics()).toMatch(new RegExp(`^fastpull_health_check_failing\\{check="${name}"\\} 0$`, 'm'));
    // A Watch saw each change once: no repeats of a status that did not change.
    for (const s of down) expect(watches.get(s)!.seen.slice(-2), s).toEqual(['NOT_SERVING', 'SERVING']);
  }

  it('starts with every service SERVING, each reported on its own, and /readyz 200', async () => {
    await allAre(SERVICES, 'SERVING');
    for (const s of SERVICES) expect(await check(s), s).toEqual({ status: 'SERVING', reason: undefined });
    expect(await readyz()).toEqual({ status: 200, body: 'ok\n' });
    for (const s of SERVICES) expect(await readyz(s), s).toEqual({ status: 200, body: 'ok\n' });
    const unknown = await readyz('no.such.Service');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toContain('containerd.services.snapshots.v1.Snapshots');
    const text = await metrics();
    for (const s of SERVICES) expect(text).toMatch(new RegExp(`^fastpull_health_serving\\{service="${s}"\\} 1$`, 'm'));
    for (const c of ['api_socket', 'snapshotter_socket', 'store_writable', 'disk_free', 'snapshot_records'])
      expect(text).toMatch(new RegExp(`^fastpull_health_check_failing\\{check="${c}"\\} 0$`, 'm'));
    expect(text).toMatch(/^fastpull_store_free_bytes [1-9]\d*$/m);
  });

  it('a read-only store: every service NOT_SERVING, saying the store root is not writable', async () => {
    await faultAndBack(
      'store_writable',
      () => {
        execFileSync('mount', ['--bind', root, root], { stdio: 'pipe' });
        roBind = true;
        execFileSync('mount', ['-o', 'remount,bind,ro', root], { stdio: 'pipe' });
      },
      () => {
        execFileSync('umount', [root], { stdio: 'pipe' });
        roBind = false;
      },
      SERVICES,
      new RegExp(`store root ${root} is not writable: EROFS`),
    );
  });

  it('a disk under min_free_space: every service NOT_SERVING, saying how much is free', async () => {
    const filler = join(root, 'filler');
    await faultAndBack(
      'disk_free',
      () => writeFileSync(filler, Buffer.alloc(26 * MiB, 1)),
      () => rmSync(filler),
      SERVICES,
      new RegExp(`store root ${root} has \\d+\\.\\d (MiB|KiB) free, under min_free_space \\(8\\.0 MiB\\)`),
    );
  });

  it("containerd's snapshot records gone: the snapshotter and the whole daemon NOT_SERVING, fastpull's own API SERVING", async () => {
    const records = join(root, 'snapshots', 'containerd');
    await faultAndBack(
      'snapshot_records',
      () => renameSync(records, `${records}.away`),
      () => renameSync(`${records}.away`, records),
      ['', SNAPSHOTTER],
      /containerd's snapshots cannot be answered: reading the snapshot records in .*ENOENT/,
    );
  });

  it('a socket removed from under it: the services behind it NOT_SERVING', async () => {
    await faultAndBack(
      'snapshotter_socket',
      () => renameSync(snapshotterSocket, `${snapshotterSocket}.away`),
      () => renameSync(`${snapshotterSocket}.away`, snapshotterSocket),
      ['', SNAPSHOTTER],
      new RegExp(`snapshotter socket ${snapshotterSocket} takes no connection: connect ENOENT`),
    );
  });
});
