// fastpulld's notifier for systemd: read from $NOTIFY_SOCKET and taken out of the environment, refused
// at once where it cannot work, and its messages as a real unix datagram socket receives them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isFastpullError, unixDatagramSender } from '@fastpull/core';
import { datagramListenerUnavailable, listenDatagrams } from '../../core/src/util/unix-datagram.testkit.js';
import { serviceNotifier } from './notify.js';
import { lacks } from '@fastpull/core/testing';

const noListener = datagramListenerUnavailable();
if (noListener) console.warn(`skipping the notifier's round trips: ${noListener}`);

/** The FastpullError `fn` throws. */
function thrown(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (isFastpullError(e)) return e;
    throw e;
  }
  throw new Error('expected a FastpullError');
}

const ignore = (): void => undefined;
const send = unixDatagramSender();

describe('serviceNotifier', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastpulld-notify-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is none without NOTIFY_SOCKET, and takes NOTIFY_SOCKET out of the environment the daemon passes on', () => {
    const env: NodeJS.ProcessEnv = { PATH: '/usr/bin' };
    expect(serviceNotifier(env, send, ignore)).toBeUndefined();
    expect(env).toEqual({ PATH: '/usr/bin' });
    const empty: NodeJS.ProcessEnv = { NOTIFY_SOCKET: '' };
    expect(serviceNotifier(empty, send, ignore)).toBeUndefined();
    expect('NOTIFY_SOCKET' in empty).toBe(false);
    const set: NodeJS.ProcessEnv = { NOTIFY_SOCKET: '/run/systemd/notify', PATH: '/usr/bin' };
    expect(serviceNotifier(set, send, ignore)?.address).toBe('/run/systemd/notify');
    expect(set).toEqual({ PATH: '/usr/bin' });
    expect(serviceNotifier({ NOTIFY_SOCKET: '@/org/freedesktop/systemd1/notify' }, send, ignore)?.address).toBe('@/org/freedesktop/systemd1/notify');
  });

  it('refuses, before anything starts, an address it cannot send to and a build without the addon', () => {
    for (const address of ['vsock:2:1234', 'relative.sock', '@']) {
      const env: NodeJS.ProcessEnv = { NOTIFY_SOCKET: address };
      const e = thrown(() => serviceNotifier(env, send, ignore));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.message).toContain(JSON.stringify(address));
      expect(env.NOTIFY_SOCKET).toBeUndefined();
    }
    const env: NodeJS.ProcessEnv = { NOTIFY_SOCKET: '/run/systemd/notify' };
    const e = thrown(() => serviceNotifier(env, undefined, ignore));
    expect(e.code).toBe('FAILED_PRECONDITION');
    // It says how to get out of it: the build, or a unit type that does not wait for READY=1.
    expect(e.message).toContain('npm rebuild -g @fastpull/core');
    expect(e.message).toContain('Type=exec');
    expect(env.NOTIFY_SOCKET).toBeUndefined();
  });

  it.skipIf(lacks('python', noListener))(
    'sends READY=1, RELOADING=1 with the monotonic clock, and STOPPING=1, from this process, one line per field',
    async () => {
      const listener = await listenDatagrams(join(dir, 'notify.sock'));
      try {
        const notifier = serviceNotifier({ NOTIFY_SOCKET: listener.address }, send, (e) => {
          throw e;
        })!;
        notifier.ready('serving /run/a.sock and\n/run/b.sock');
        const before = process.hrtime.bigint() / 1000n;
        notifier.reloading();
        const after = process.hrtime.bigint() / 1000n;
        notifier.stopping('stopping on SIGTERM');
        const ready = await listener.next();
        expect(ready.fields).toEqual({ READY: '1', STATUS: 'serving /run/a.sock and /run/b.sock' });
        expect(ready.pid).toBe(process.pid);
        const reloading = await listener.next();
        expect(Object.keys(reloading.fields)).toEqual(['RELOADING', 'MONOTONIC_USEC']);
        // CLOCK_MONOTONIC in microseconds, as the receiver's own clock reads it.
        const usec = BigInt(reloading.fields.MONOTONIC_USEC!);
        expect(usec >= before && usec <= after && usec <= reloading.readUsec, `${before} <= ${usec} <= ${after}, read at ${reloading.readUsec}`).toBe(true);
        expect((await listener.next()).fields).toEqual({ STOPPING: '1', STATUS: 'stopping on SIGTERM' });
      } finally {
        await listener.close();
      }
    },
  );

  it('hands a failed send to onError and goes on', () => {
    const failures: Array<[string | undefined, string]> = [];
    const notifier = serviceNotifier({ NOTIFY_SOCKET: join(dir, 'nobody-listens.sock') }, send, (e, message) =>
      failures.push([(e as NodeJS.ErrnoException).code, message]),
    )!;
    notifier.ready('serving');
    notifier.stopping('stopping');
    expect(failures).toEqual([
      ['ENOENT', 'READY=1\nSTATUS=serving'],
      ['ENOENT', 'STOPPING=1\nSTATUS=stopping'],
    ]);
  });
});
