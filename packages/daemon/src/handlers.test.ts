// fastpulld's handlers in this process, over a real LocalService on a temporary store, called through
// the typed client on a temporary socket: each answers as the library does over the same store, and
// each refusal arrives as the library code it is, logged once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFastpullError, LocalService, type FastpullError } from '@fastpull/core';
import {
  type BuiltImage,
  type DistributionRegistry,
  findDistributionBinary,
  lacksRegistry,
  pushImage,
  sampleImage,
  startDistribution,
} from '@fastpull/core/testing';
import { FastpullClient } from './client.js';
import { resolveConfig } from './config.js';
import { Daemon } from './server.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping the handler tests that pull from docker-registry: it is not installed');

async function failure(p: Promise<unknown>): Promise<FastpullError> {
  try {
    await p;
  } catch (e) {
    if (!isFastpullError(e)) throw new Error(`failed with something that is not a FastpullError: ${String(e)}`);
    return e;
  }
  throw new Error('the call succeeded');
}

describe('fastpulld handlers over a store', () => {
  const work = mkdtempSync(join(tmpdir(), 'fastpull-handlers-'));
  const root = join(work, 'root');
  const socket = join(work, 'fastpulld.sock');
  const logs: Array<Record<string, unknown>> = [];
  let daemon: Daemon;
  let client: FastpullClient;
  let local: LocalService;

  beforeAll(async () => {
    const config = resolveConfig({ root, socket, hosts_dir: '' }, {}, {}, work);
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
    daemon = await Daemon.start({ config, logger, env: {} });
    client = new FastpullClient(socket);
    local = new LocalService({ root });
  });
  afterAll(async () => {
    await client?.close();
    await local?.close();
    await daemon?.shutdown('done testing', 5000);
    rmSync(work, { recursive: true, force: true });
  });

  it('an empty store: no images, snapshots or blobs', async () => {
    expect(await client.listImages()).toEqual([]);
    expect(await client.listSnapshots()).toEqual([]);
    expect(await client.listContent()).toEqual([]);
    expect(await client.collectGarbage({ dryRun: true })).toEqual(await local.collectGarbage({ dryRun: true }));
    expect(await client.collectGarbage({ dryRun: true })).toEqual({ blobs: [], snapshots: [], litter: 0, leftovers: [], bytes: 0, images: [] });
  });

  it('refusals arrive as their library codes, and are logged as the caller’s mistakes', async () => {
    const cases: Array<[() => Promise<unknown>, string, RegExp]> = [
      [() => client.inspectImage('registry.test/absent:v1'), 'NOT_FOUND', /absent/],
      [() => client.inspectImage(''), 'INVALID_REFERENCE', /names no image reference/],
      [() => client.inspectImage('Not A Reference!'), 'INVALID_REFERENCE', /Not A Reference/],
      [() => client.removeImage('registry.test/absent:v1'), 'NOT_FOUND', /absent/],
      [() => client.contentInfo('sha256:nothex'), 'INVALID_DIGEST', /nothex/],
      [() => client.contentInfo(''), 'INVALID_DIGEST', /names no digest/],
      [() => client.contentInfo(`sha256:${'0'.repeat(64)}`), 'NOT_FOUND', /0{64}/],
      [() => client.snapshotUsage(`sha256:${'1'.repeat(64)}`), 'NOT_FOUND', /1{64}/],
      [() => client.mounts({ chainID: '' }), 'INVALID_ARGUMENT', /name an image or a chain_id/],
      [() => client.pull(''), 'INVALID_REFERENCE', /names no image reference/],
      [() => client.pull('registry.test/app:v1', { platform: 'not/a/platform/at/all' }), 'INVALID_ARGUMENT', /platform/],
    ];
    for (const [call, code, message] of cases) {
      const e = await failure(call());
      expect({ code: e.code, message: e.message }).toEqual({ code, message: expect.stringMatching(message) });
    }
    const refused = logs.filter((l) => l.msg === 'request failed');
    expect(refused.map((l) => l.code)).toEqual(cases.map(([, code]) => code));
    expect(refused.every((l) => l.level === 30)).toBe(true);
  });

  describe.skipIf(lacksRegistry())('with an image pulled from docker-registry', () => {
    let registry: DistributionRegistry;
    let image: BuiltImage;
    let ref = '';

    beforeAll(async () => {
      registry = await startDistribution({ dir: join(work, 'registry') });
      image = await sampleImage(91, { layers: 2 });
      await pushImage(registry.url, 'handlers/app', 'v1', image);
      ref = `${registry.host}/handlers/app:v1`;
    });
    afterAll(async () => {
      await registry?.stop();
    });

    it('pull, then every read answers as the library over the same store', async () => {
      const pulled = await client.pull(ref, { credentials: { username: 'someone', password: 'not-for-logs' } });
      expect(pulled.root).toBe(root);
      expect(pulled.image.manifest.digest).toBe(image.manifestDigest);
      expect(await client.listImages()).toEqual(await local.listImages());
      expect(await client.inspectImage(ref)).toEqual(await local.inspectImage(ref));
      expect(await client.mounts({ image: ref })).toEqual(await local.mounts({ image: ref }));
      expect(await client.mounts({ chainID: pulled.image.chainID })).toEqual(await local.mounts({ chainID: pulled.image.chainID }));
      expect(await client.listSnapshots()).toEqual(await local.listSnapshots());
      expect(await client.snapshotUsage(pulled.image.chainID)).toEqual(await local.snapshotUsage(pulled.image.chainID));
      expect(await client.listContent()).toEqual(await local.listContent());
      expect(await client.contentInfo(image.manifestDigest)).toEqual(await local.contentInfo(image.manifestDigest));
      // The pull's log line, and never the password.
      const line = logs.find((l) => l.event === 'pull' && l.result === 'ok');
      expect(line).toMatchObject({ image: pulled.image.name, callers: 1, manifest: image.manifestDigest, layers: 2 });
      expect(JSON.stringify(logs)).not.toContain('not-for-logs');
    });

    it('a failed pull is logged with the code the caller got', async () => {
      const e = await failure(client.pull(`${registry.host}/handlers/app:absent`));
      expect(e.code).toBe('NOT_FOUND');
      const line = logs.find((l) => l.event === 'pull' && l.result === 'error');
      expect(line).toMatchObject({ code: 'NOT_FOUND', err: e.message, callers: 1 });
    });

    it('remove with gc forgets the image and collects what only it used', async () => {
      const removed = await client.removeImage(ref, { gc: true });
      expect(removed.name).toBe(`${registry.host}/handlers/app:v1`);
      expect(removed.gc!.snapshots).toHaveLength(2);
      expect(removed.gc!.bytes).toBeGreaterThan(0);
      expect(await client.listImages()).toEqual([]);
      expect(await client.listSnapshots()).toEqual([]);
    });
  });
});
