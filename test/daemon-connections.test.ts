// fastpulld's bounds on connections: each socket takes at most its configured number, refuses the
// next at once, and drops a client that never finishes the HTTP/2 handshake or sits idle, so a
// crowd of silent clients cannot hold the daemon's descriptors. fastpulld runs as a real process; the
// hostile clients are raw unix-socket connections, the honest one the product's own client.
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FastpullClient } from '@fastpull/daemon';
import { failure, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient } from './snapshotter-client.js';

/** The client connection preface of HTTP/2 (RFC 9113, section 3.4): the magic and an empty SETTINGS frame. */
const MAGIC = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

/** A raw connection, with what the daemon sent on it and a promise of its end. */
interface RawClient {
  readonly socket: Socket;
  /** Bytes received from the daemon so far. */
  received(): number;
  /** Resolves when the connection is closed (by either side), with the bytes received by then. */
  readonly closed: Promise<number>;
}

/** Connects to `path` and, once connected, writes `send`. */
async function rawClient(path: string, send?: Buffer): Promise<RawClient> {
  const socket = connect(path);
  let got = 0;
  socket.on('data', (d: Buffer) => (got += d.length));
  socket.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(got)));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  if (send) socket.write(send);
  return { socket, received: () => got, closed };
}

/** Resolves once `c` has received a byte from the daemon (its SETTINGS: the connection was taken). */
function answered(c: RawClient): Promise<void> {
  return new Promise((resolve, reject) => {
    if (c.received() > 0) return resolve();
    c.socket.once('data', () => resolve());
    void c.closed.then(() => reject(new Error('closed before the daemon answered')));
  });
}

const work = tempDir('daemon-connections');
let daemon: RunningDaemon | undefined;
const raws: RawClient[] = [];

afterEach(async () => {
  for (const r of raws.splice(0)) r.socket.destroy();
  await stopDaemon(daemon);
  daemon = undefined;
});
afterAll(() => work.cleanup());

function start(name: string, extra: string[]): Promise<RunningDaemon> {
  const dir = join(work.dir, name);
  return serveDaemon(['--socket', join(dir, 'api.sock'), '--snapshotter-socket', join(dir, 'snap.sock'), '--root', join(dir, 'root'), ...extra]);
}

describe('fastpulld connection limits', () => {
  it('refuses the connection past max_connections at once, tells the client why, and answers again once idle ones are dropped', async () => {
    const limit = 3;
    daemon = await start('limit', ['--max-connections', String(limit), '--connection-idle-timeout', '10s', '--log-level', 'debug']);
    const api = join(work.dir, 'limit', 'api.sock');
    // Clients that complete the handshake and then say nothing: each holds a slot until it is idle too
    // long. The idle timeout must outlast the refusal checks below on a machine that stalls: 10 s.
    for (let i = 0; i < limit; i++) raws.push(await rawClient(api, Buffer.concat([MAGIC, EMPTY_SETTINGS])));
    await Promise.all(raws.map(answered));
    const extra = await rawClient(api, Buffer.concat([MAGIC, EMPTY_SETTINGS]));
    raws.push(extra);
    // Closed by the daemon without a byte: no HTTP/2 session was ever made for it.
    expect(await extra.closed).toBe(0);
    await daemon.waitLog((l) => l.msg === 'connection limit reached; refusing new connections' && l.maxConnections === limit);

    // The product's client says what happened, not that nobody listens.
    const refused = new FastpullClient(api);
    try {
      const e = await failure(refused.health());
      expect(e.code).toBe('NETWORK_ERROR');
      expect(e.message).toMatch(/max_connections/);
      expect(e.message).not.toMatch(/no fastpulld listens/);
    } finally {
      await refused.close();
    }

    // The idle ones are dropped by the daemon (each had the daemon's SETTINGS, then its GOAWAY) ...
    const bytes = await Promise.all(raws.slice(0, limit).map((r) => r.closed));
    for (const b of bytes) expect(b).toBeGreaterThan(0);
    // ... and an honest client is answered again.
    const honest = new FastpullClient(api);
    try {
      expect(await honest.health()).toBe('SERVING');
    } finally {
      await honest.close();
    }
  });

  it('bounds each socket on its own: a full API socket leaves the snapshotter socket to containerd', async () => {
    daemon = await start('apart', ['--max-connections', '2', '--snapshotter-max-connections', '2']);
    const dir = join(work.dir, 'apart');
    for (let i = 0; i < 2; i++) raws.push(await rawClient(join(dir, 'api.sock'), Buffer.concat([MAGIC, EMPTY_SETTINGS])));
    await Promise.all(raws.map(answered));
    const extra = await rawClient(join(dir, 'api.sock'));
    raws.push(extra);
    expect(await extra.closed).toBe(0);
    const snapshots = snapshotsClient(join(dir, 'snap.sock'));
    try {
      expect(await snapshots.list()).toEqual([]);
    } finally {
      snapshots.close();
    }
  });

  it('drops a client that sends half the HTTP/2 preface once the handshake deadline passes, on both sockets', async () => {
    daemon = await start('handshake', ['--handshake-timeout', '1s']);
    const dir = join(work.dir, 'handshake');
    for (const path of [join(dir, 'api.sock'), join(dir, 'snap.sock')]) {
      const half = await rawClient(path, MAGIC.subarray(0, 12));
      raws.push(half);
      // Nothing was ever sent back: the daemon waited for the rest, then hung up.
      expect(await half.closed).toBe(0);
      // The preface without its SETTINGS frame is no handshake either.
      const noSettings = await rawClient(path, MAGIC);
      raws.push(noSettings);
      expect(await noSettings.closed).toBe(0);
    }
    const c = new FastpullClient(join(dir, 'api.sock'));
    try {
      expect(await c.health()).toBe('SERVING');
    } finally {
      await c.close();
    }
  });

  it('hangs up at once on a client that speaks anything but HTTP/2', async () => {
    daemon = await start('garbage', ['--handshake-timeout', '1h']);
    const bad = await rawClient(join(work.dir, 'garbage', 'api.sock'), Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    raws.push(bad);
    expect(await bad.closed).toBe(0);
  });

  it('refuses limits that are not positive integers and timeouts that are not durations (exit 2)', async () => {
    for (const args of [
      ['--max-connections', '0'],
      ['--snapshotter-max-connections', 'many'],
      ['--connection-idle-timeout', 'soon'],
      ['--handshake-timeout', '-1s'],
    ]) {
      const e = await start('bad', args).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(e?.message, args.join(' ')).toMatch(/exited with 2/);
    }
  });
});
