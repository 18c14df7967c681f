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

describe('snapshotter API: sizes of keys, labels and List messages', () => {
  const labelsOf = (n: number, size: number): Record<string, string> =>
    Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${String(i).padStart(3, '0')}`, 'v'.repeat(size - 4)]));

  it('refuses keys and names over 32 KiB, as containerd stores none longer (INVALID_ARGUMENT)', async () => {
    const longest = `key/${'k'.repeat(32 * 1024 - 4)}`;
    expect(await statusOf(client.prepare(`${longest}k`))).toBe('INVALID_ARGUMENT');
    expect(await statusOf(client.view(`${longest}k`))).toBe('INVALID_ARGUMENT');
    await client.prepare(longest);
    expect(await statusOf(client.commit(`${longest}k`, longest))).toBe('INVALID_ARGUMENT');
    await client.commit(`${longest.slice(0, -1)}c`, longest);
    expect((await client.stat(`${longest.slice(0, -1)}c`)).kind).toBe('COMMITTED');
  });

  it('refuses a snapshot whose labels hold over 64 KiB in all, on Prepare, Commit and Update', async () => {
    // 16 labels of 4096 bytes each are 64 KiB: the most; one byte more is refused.
    const most = labelsOf(16, 4096);
    const over = { ...most, x: 'y' };
    expect(await statusOf(client.prepare('lb/over', '', over))).toBe('INVALID_ARGUMENT');
    await client.prepare('lb/a', '', most);
    expect(await statusOf(client.commit('lb/c', 'lb/a', over))).toBe('INVALID_ARGUMENT');
    await client.commit('lb/c', 'lb/a', most);
    expect(await statusOf(client.update({ name: 'lb/c', labels: { x: 'y' } }, ['labels.x']))).toBe('INVALID_ARGUMENT');
    expect(Object.keys((await client.stat('lb/c')).labels)).toHaveLength(16);
  });

  it('sends List answers in messages of at most 1 MiB, whatever the size of each snapshot', async () => {
    // 40 snapshots of 60 KiB of labels each: 2.4 MB, which containerd's 100 a message would send at once.
    const names = Array.from({ length: 40 }, (_, i) => `big/${String(i).padStart(2, '0')}`);
    for (const name of names) await client.prepare(name, '', labelsOf(15, 4096));
    const messages = await client.listMessages(['name~=^big/']);
    expect(messages.flat().map((i) => i.name)).toEqual(names);
    expect(messages.length).toBeGreaterThan(2);
    for (const m of messages) {
      const bytes = m.reduce((n, i) => n + i.name.length + Object.entries(i.labels).reduce((s, [k, v]) => s + k.length + v.length, 0), 0);
      expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    }
  });
});

describe('snapshotter API: labels named as Object.prototype members', () => {
  it('keeps labels named __proto__, constructor and toString, and updates them by mask', async () => {
    const odd = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}') as Record<string, string>;
    await client.prepare('proto/a', '', odd);
    expect((await client.stat('proto/a')).labels).toEqual(odd);
    await client.commit('proto/c', 'proto/a', odd);
    // Masks that name a label the update leaves out delete that label; those it carries set it.
    const info = await client.update({ name: 'proto/c', labels: JSON.parse('{"__proto__":"p2"}') as Record<string, string> }, [
      'labels.__proto__',
      'labels.constructor',
    ]);
    expect(info.labels).toEqual(JSON.parse('{"__proto__":"p2","toString":"t"}'));
    expect((await client.update({ name: 'proto/c', labels: {} }, ['labels.toString', 'labels.hasOwnProperty'])).labels).toEqual(
      JSON.parse('{"__proto__":"p2"}'),
    );
    expect((await client.list(['labels.__proto__==p2'])).map((i) => i.name)).toEqual(['proto/c']);
    expect(await client.list(['labels.constructor'])).toEqual([]);
  });
});
