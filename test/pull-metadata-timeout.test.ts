// The metadata timeout from each front end: `fastpull pull --metadata-timeout` and fastpulld's
// `metadata_timeout` fail a pull whose manifest a registry trickles (NETWORK_ERROR), and refuse a
// value that is no duration above zero. The loopback registry trickles; the deadline is set small.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleImage, startLoopbackRegistry, type LoopbackRegistry } from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { failure, runCliAsync, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const work = tempDir('metadata-timeout');
let reg: LoopbackRegistry;
let ref = '';

beforeAll(async () => {
  reg = await startLoopbackRegistry();
  reg.addImage('slow/app', '1', await sampleImage(71, { layers: 1 }));
  ref = `${reg.host}/slow/app:1`;
  // A byte every 50 ms: the manifest would take most of a minute; each deadline below is 300 ms.
  reg.faults.trickle = { path: /\/manifests\//, bytesPerSecond: 20 };
});
afterAll(async () => {
  await reg?.close();
  work.cleanup();
});

describe('--metadata-timeout and metadata_timeout', () => {
  it('fastpull pull --metadata-timeout fails the pull with NETWORK_ERROR (exit 1)', async () => {
    const r = await runCliAsync(['pull', '--root', join(work.dir, 'cli'), '--metadata-timeout', '300ms', ref]);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/metadata timeout \(300 ms\)/);
    expect(r.stderr).toMatch(/NETWORK_ERROR/);
  });

  it('refuses a value that is not a duration above zero (exit 2)', async () => {
    for (const bad of ['0', 'soon', '-1s']) {
      const r = await runCliAsync(['pull', '--root', join(work.dir, 'cli'), '--metadata-timeout', bad, ref]);
      expect(r.status, `${bad}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/--metadata-timeout/);
    }
  });

  it("fastpulld's metadata_timeout fails a pull through the daemon with NETWORK_ERROR", async () => {
    const socket = join(work.dir, 'd', 'fastpulld.sock');
    let daemon: RunningDaemon | undefined;
    const client = new FastpullClient(socket);
    try {
      daemon = await serveDaemon(['--socket', socket, '--root', join(work.dir, 'd', 'root'), '--metadata-timeout', '300ms']);
      const e = await failure(client.pull(ref));
      expect(e.code).toBe('NETWORK_ERROR');
      expect(e.message).toMatch(/metadata timeout \(300 ms\)/);
    } finally {
      await client.close();
      await stopDaemon(daemon);
    }
  });
});
