// announceImages where containerd is not there: no socket, or a socket file nobody serves (what a
// containerd that stopped, or died, leaves). Neither is an error: fastpulld starts before
// containerd under systemd. A containerd that answers is driven in test/containerd-started-first.test.ts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { announceImages } from './announce.js';

const dir = mkdtempSync(join(tmpdir(), 'fastpull-announce-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('announceImages without a containerd', () => {
  it('no socket: nothing to announce, saying so', async () => {
    const socket = join(dir, 'absent.sock');
    expect(await announceImages({ socket })).toEqual({ result: 'no-containerd', reason: `${socket} does not exist` });
  });

  it('a socket file nobody serves: nothing to announce, with the refusal as the reason', async () => {
    const socket = join(dir, 'stale.sock');
    // A process killed while it listens leaves its socket file, as a containerd killed does.
    const killed = spawnSync(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(socket)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    expect(killed.signal).toBe('SIGKILL');
    expect(statSync(socket).isSocket()).toBe(true);
    const outcome = await announceImages({ socket });
    expect(outcome.result).toBe('no-containerd');
    expect(outcome.result === 'no-containerd' && outcome.reason).toMatch(/ECONNREFUSED|connection refused|No connection established/i);
  });
});
