// fastpulld as systemd runs deploy/systemd/fastpulld.service (Type=notify, NotifyAccess=main): the
// launcher the unit runs, with $NOTIFY_SOCKET naming a real unix datagram socket (a python3 receiver
// that reads the sender's pid from SCM_CREDENTIALS and, the moment each datagram is read, tries both
// of fastpulld's sockets). READY=1 comes from fastpulld's own pid once both sockets take calls;
// RELOADING=1 and READY=1 on SIGHUP; STOPPING=1 on SIGTERM; a credential helper it runs never sees
// NOTIFY_SOCKET. Failed starts: nothing is sent, what the start made is gone, and a configuration no
// restart mends exits with EXIT_CONFIG, 2 (the unit's RestartPreventExitStatus).
import { existsSync, mkdirSync, readdirSync, readFileSync, watch, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unixDatagramSender } from '@fastpull/core';
import { lacks, type LoopbackRegistry, sampleImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { EXIT_CONFIG, FastpullClient } from '@fastpull/daemon';
import { datagramListenerUnavailable, listenDatagrams, type Datagram, type DatagramListener } from '../packages/core/src/util/unix-datagram.testkit.js';
import { repoRoot, startDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient } from './snapshotter-client.js';

const launcher = join(repoRoot, 'packages', 'daemon', 'dist', 'launch.cjs');
const noListener = datagramListenerUnavailable();
if (noListener) console.warn(`skipping fastpulld's notification tests: ${noListener}`);

describe.skipIf(lacks('python', noListener))('fastpulld under Type=notify', () => {
  const work = tempDir('daemon-notify');
  const helperDir = join(work.dir, 'bin');
  const helperLog = join(work.dir, 'helper.log');
  const dockerConfig = join(work.dir, 'docker');
  const config = join(work.dir, 'fastpulld.toml');
  const send = unixDatagramSender()!;
  let loop: LoopbackRegistry;
  let ref = '';
  let n = 0;

  beforeAll(async () => {
    loop = await startLoopbackRegistry({ auth: { type: 'basic', username: 'notify', password: 'notify-secret' } });
    loop.addImage('notify/app', 'v1', await sampleImage(83, { layers: 2 }));
    ref = `${loop.host}/notify/app:v1`;
    // A credential helper that writes down whether NOTIFY_SOCKET reached it, then answers.
    mkdirSync(helperDir);
    writeFileSync(
      join(helperDir, 'docker-credential-envcheck'),
      '#!/bin/sh\nread -r url\necho "NOTIFY_SOCKET=${NOTIFY_SOCKET-unset}" >> "$HELPER_LOG"\nprintf \'{"ServerURL":"%s","Username":"notify","Secret":"notify-secret"}\' "$url"\n',
      { mode: 0o755 },
    );
    mkdirSync(dockerConfig);
    writeFileSync(join(dockerConfig, 'config.json'), JSON.stringify({ credHelpers: { [loop.host]: 'envcheck' } }));
    writeFileSync(config, 'log_level = "info"\n');
  });
  afterAll(async () => {
    await loop?.close();
    work.cleanup();
  });

  /** A fresh directory for one start's sockets and store, and a receiver bound where systemd's would be. */
  async function setup(): Promise<{ dir: string; api: string; snap: string; root: string; listener: DatagramListener }> {
    const dir = join(work.dir, `case-${++n}`);
    mkdirSync(dir);
    const api = join(dir, 'run', 'fastpulld.sock');
    const snap = join(dir, 'run', 'snapshotter.sock');
    const listener = await listenDatagrams(join(dir, 'notify.sock'), [api, snap]);
    return { dir, api, snap, root: join(dir, 'root'), listener };
  }

  function start(args: string[], listener: DatagramListener): RunningDaemon {
    return startDaemon([...args, '--config', config], {
      bin: launcher,
      env: { NOTIFY_SOCKET: listener.address, DOCKER_CONFIG: dockerConfig, HELPER_LOG: helperLog, PATH: `${helperDir}:${process.env.PATH ?? '/usr/bin:/bin'}` },
    });
  }

  /** The next datagram, or the daemon's exit if that comes first. */
  async function next(listener: DatagramListener, d: RunningDaemon): Promise<Datagram> {
    return Promise.race([
      listener.next(),
      d.exited.then(({ code, signal }) => {
        throw new Error(`fastpulld exited (${signal ?? code}) before notifying: ${d.stderr()}`);
      }),
    ]);
  }

  /** Asserts nothing more reached the receiver: a datagram sent now is the next one read. */
  async function nothingMore(listener: DatagramListener): Promise<void> {
    send(listener.address, Buffer.from('MARK=1'));
    expect((await listener.next()).fields).toEqual({ MARK: '1' });
  }

  it('sends READY=1 from its own pid only once both sockets take calls, RELOADING=1 and READY=1 on SIGHUP, STOPPING=1 on SIGTERM', async () => {
    const { api, snap, root, listener } = await setup();
    const d = start(['--socket', api, '--snapshotter-socket', snap, '--root', root], listener);
    const client = new FastpullClient(api);
    const snapshots = snapshotsClient(snap);
    try {
      const ready = await next(listener, d);
      expect(ready.fields).toEqual({ READY: '1', STATUS: `serving ${api} and ${snap}` });
      // The launcher runs the daemon in its own process: the sender is the unit's main pid.
      expect(ready.pid).toBe(d.proc.pid);
      // Both sockets took a connection when the datagram was read, and both answer calls.
      expect(ready.answered).toEqual({ [api]: true, [snap]: true });
      expect(await client.health()).toBe('SERVING');
      expect(await snapshots.list()).toEqual([]);
      expect(listener.received).toHaveLength(1);

      // A pull that runs the credential helper: the helper does not get NOTIFY_SOCKET.
      const pulled = await client.pull(ref);
      expect(pulled.image.name).toBe(ref);
      const helperRuns = readFileSync(helperLog, 'utf8').trim().split('\n');
      expect(helperRuns.length).toBeGreaterThan(0);
      expect(new Set(helperRuns)).toEqual(new Set(['NOTIFY_SOCKET=unset']));

      d.proc.kill('SIGHUP');
      const reloading = await next(listener, d);
      expect(Object.keys(reloading.fields)).toEqual(['RELOADING', 'MONOTONIC_USEC']);
      expect(BigInt(reloading.fields.MONOTONIC_USEC!) <= reloading.readUsec).toBe(true);
      expect((await next(listener, d)).fields).toEqual({ READY: '1', STATUS: `serving ${api} and ${snap}` });
      await d.waitLog((l) => l.msg === 'configuration reloaded');

      d.proc.kill('SIGTERM');
      expect(await listener.next()).toMatchObject({ fields: { STOPPING: '1', STATUS: 'stopping on SIGTERM' }, pid: d.proc.pid });
      expect(await d.exited).toEqual({ code: 0, signal: null });
      expect(existsSync(api) || existsSync(snap)).toBe(false);
      await nothingMore(listener);
    } finally {
      await client.close();
      snapshots.close();
      await stopDaemon(d);
      await listener.close();
    }
  });

  it('a start that fails after its API socket was bound takes the socket and the directory it made away, and says nothing to systemd', async () => {
    // The snapshotter socket's path holds a file: refused (a configuration to fix) after the API
    // socket was bound, which the watch on the sockets' directory sees come and go.
    const a = await setup();
    const run = join(a.dir, 'run');
    mkdirSync(run);
    const file = join(a.dir, 'not-a-socket');
    writeFileSync(file, 'x');
    let apiCame!: () => void;
    const apiSocketCame = new Promise<void>((resolve) => (apiCame = resolve));
    const watcher = watch(run, (_, name) => {
      if (name === 'fastpulld.sock') apiCame();
    });
    try {
      const refused = start(['--socket', a.api, '--snapshotter-socket', file, '--root', a.root], a.listener);
      expect(await refused.exited).toEqual({ code: EXIT_CONFIG, signal: null });
      expect(refused.stderr()).toBe(`fastpulld: ${file} exists and is not a socket; not replacing it (INVALID_ARGUMENT)\n`);
      await apiSocketCame;
      expect(readdirSync(run)).toEqual([]);
      expect(readFileSync(file, 'utf8')).toBe('x');
      await nothingMore(a.listener);
    } finally {
      watcher.close();
      await a.listener.close();
    }

    // Metrics cannot listen (the port is taken): both sockets were bound by then, and both go.
    const b = await setup();
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const failed = start(['--socket', b.api, '--snapshotter-socket', b.snap, '--root', b.root, '--metrics-address', `127.0.0.1:${port}`], b.listener);
      expect(await failed.exited).toEqual({ code: 1, signal: null });
      expect(failed.stderr()).toMatch(/^fastpulld: .*EADDRINUSE.*\(INTERNAL\)\n$/);
      expect(failed.logs.map((l) => l.msg)).toContain('serving the containerd snapshotter API');
      expect(existsSync(join(b.dir, 'run'))).toBe(false);
      await nothingMore(b.listener);
    } finally {
      taken.close();
      await b.listener.close();
    }
  });

  it('exits with EXIT_CONFIG (2), before making anything, when a restart cannot help: a group that does not exist, a bad flag, config file or NOTIFY_SOCKET', async () => {
    const { dir, api, root, listener } = await setup();
    try {
      const group = 'fastpull-test-no-such-group';
      const noGroup = start(['--socket', api, '--root', root, '--group', group], listener);
      expect(await noGroup.exited).toEqual({ code: EXIT_CONFIG, signal: null });
      expect(noGroup.stderr()).toContain(`group "${group}" does not exist: create it (groupadd --system ${group}), or drop --group`);
      expect(existsSync(join(dir, 'run')) || existsSync(root)).toBe(false);

      const badFlag = start(['--socket', api, '--root', root, '--no-such-flag'], listener);
      expect(await badFlag.exited).toEqual({ code: EXIT_CONFIG, signal: null });
      expect(badFlag.stderr()).toContain("Unknown option '--no-such-flag'");

      const badConfig = join(dir, 'bad.toml');
      writeFileSync(badConfig, 'no_such_key = 1\n');
      const badFile = startDaemon(['--socket', api, '--root', root, '--config', badConfig], { bin: launcher, env: { NOTIFY_SOCKET: listener.address } });
      expect(await badFile.exited).toEqual({ code: EXIT_CONFIG, signal: null });
      expect(badFile.stderr()).toContain('unknown key "no_such_key"');

      const vsock = startDaemon(['--socket', api, '--root', root], { bin: launcher, env: { NOTIFY_SOCKET: 'vsock:2:1234' } });
      expect(await vsock.exited).toEqual({ code: EXIT_CONFIG, signal: null });
      expect(vsock.stderr()).toContain('NOTIFY_SOCKET "vsock:2:1234"');

      expect(existsSync(join(dir, 'run')) || existsSync(root)).toBe(false);
      await nothingMore(listener);
    } finally {
      await listener.close();
    }
  });
});
