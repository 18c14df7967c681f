// What a hostile client of the snapshotter socket may send: fastpulld answers each with a clear
// status and stays responsive to everyone else. fastpulld runs as a real process, driven over gRPC
// as containerd's proxy snapshotter drives it.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient, statusOf, type SnapshotsClient } from './snapshotter-client.js';

const work = tempDir('snapshotter-hostile');
const socket = join(work.dir, 'fastpulld.sock');
const snapSocket = join(work.dir, 'snapshotter.sock');
let daemon: RunningDaemon | undefined;
let client: SnapshotsClient;

beforeAll(async () => {
  daemon = await serveDaemon(['--socket', socket, '--snapshotter-socket', snapSocket, '--root', join(work.dir, 'root')]);
  client = snapshotsClient(snapSocket);
});
afterAll(async () => {
  client?.close();
  await stopDaemon(daemon);
  work.cleanup();
});

describe('snapshotter API: hostile List filters', () => {
  it('matches a pattern that backtracks exponentially elsewhere in linear time, and answers other calls', async () => {
    // A backtracking engine takes about 2^48 steps for this key: the call would never return.
    const key = `re/${'a'.repeat(48)}!`;
    await client.prepare(key);
    const [listed, stat] = await Promise.all([client.list(['name~="^re/(a+)+$"']), client.stat(key)]);
    expect(listed).toEqual([]);
    expect(stat.name).toBe(key);
    expect((await client.list(['name~="^re/(a+)+!$"'])).map((i) => i.name)).toEqual([key]);
  });

  it("reads Go's RE2 syntax and refuses what RE2 refuses (INVALID_ARGUMENT)", async () => {
    await client.prepare('RE2/Mixed');
    expect((await client.list(['name~="(?i)^re2/mixed\\\\z"'])).map((i) => i.name)).toEqual(['RE2/Mixed']);
    expect(await statusOf(client.list(['name~="(R)\\\\1"']))).toBe('INVALID_ARGUMENT');
  });
});
