// The native addon's unix datagram send, received by a real AF_UNIX SOCK_DGRAM socket: at a path and
// at an abstract name, with this process as the sender, and the errors of an address nobody can use.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unixDatagramSender } from './unix-datagram.js';
import { datagramListenerUnavailable, listenDatagrams } from './unix-datagram.testkit.js';
import { lacks } from '../testing/needs.js';

const noListener = datagramListenerUnavailable();
if (noListener) console.warn(`skipping the unix datagram round trips: ${noListener}`);

describe('unixDatagramSender', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastpull-dgram-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const send = unixDatagramSender();

  it('is the built addon’s, loaded once', () => {
    expect(send).toBeTypeOf('function');
    expect(unixDatagramSender()).toBe(send);
  });

  it.skipIf(lacks('python', noListener))('delivers one datagram to a socket at a path, sent by this process', async () => {
    const listener = await listenDatagrams(join(dir, 'notify.sock'));
    try {
      send!(listener.address, Buffer.from('READY=1\nSTATUS=up'));
      send!(listener.address, Buffer.from('STOPPING=1'));
      const first = await listener.next();
      expect(first).toMatchObject({ text: 'READY=1\nSTATUS=up', fields: { READY: '1', STATUS: 'up' }, pid: process.pid });
      expect((await listener.next()).fields).toEqual({ STOPPING: '1' });
    } finally {
      await listener.close();
    }
  });

  it.skipIf(lacks('python', noListener))('delivers to an abstract name written with a leading @', async () => {
    const name = `@fastpull-test-${process.pid}-${Date.now()}`;
    const listener = await listenDatagrams(name);
    try {
      send!(name, Buffer.from('READY=1'));
      expect(await listener.next()).toMatchObject({ text: 'READY=1', pid: process.pid });
    } finally {
      await listener.close();
    }
    // Nobody binds that name any more: the kernel refuses the datagram, and the error says so.
    expect(() => send!(name, Buffer.from('READY=1'))).toThrow(expect.objectContaining({ code: 'ECONNREFUSED', syscall: 'sendto' }));
  });

  it('throws errno errors for addresses nobody listens on or a unix socket cannot hold', () => {
    expect(() => send!(join(dir, 'absent.sock'), Buffer.from('READY=1'))).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => send!(`/${'x'.repeat(108)}`, Buffer.from('READY=1'))).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
    expect(() => send!(`@${'x'.repeat(108)}`, Buffer.from('READY=1'))).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
    for (const bad of ['', '@', 'relative/notify.sock', 'vsock:2:1234'])
      expect(() => send!(bad, Buffer.from('READY=1')), bad).toThrow(expect.objectContaining({ code: 'EINVAL' }));
    expect(() => send!(dir, 'READY=1' as unknown as Uint8Array)).toThrow(TypeError);
  });
});
