// Pulls against the project's loopback registry, where auth and faults are under the test's control.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MediaTypes, openStore, pull, sha256Digest } from '@fastpull/core';
import { FetchScheduler, RegistryClient } from '@fastpull/core/registry';
import { buildImage, Prng, sampleImage, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import { corruptBlobs, failure, ls, runCliAsync, tempDir } from './helpers.js';
import { resumeBound } from './store-verify.js';

const work = tempDir('faults');
let image: BuiltImage;
let big: BuiltImage;
let n = 0;
const freshRoot = () => join(work.dir, `root${n++}`);

function expectCleanStore(root: string): void {
  expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
  expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
  expect(corruptBlobs(root)).toEqual([]);
}

beforeAll(async () => {
  image = await sampleImage(5, { layers: 3 });
  // A layer of ~3 MiB of incompressible bytes, to be fetched in many 64 KiB ranges.
  const noise = Buffer.from(new Prng(9).bytes(3 * 1024 * 1024 + 123));
  big = await buildImage({ layers: [[{ type: 'file', path: 'noise.bin', content: noise }], [{ type: 'file', path: 'top', content: 'x' }]] });
});
afterAll(() => work.cleanup());

describe('ranged fetch', () => {
  let reg: LoopbackRegistry;
  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    reg.addImage('big/app', '1', big);
  });
  afterEach(() => {
    reg.faults = {};
    reg.stats.reset();
  });
  afterAll(() => reg.close());

  it('splits a blob into parallel Range requests that land at their offsets', async () => {
    // Slow responses, so that requests overlap even though this server shares the test's thread.
    reg.faults.bytesPerSecond = 256 * 1024;
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024, keepBlobs: true });
    const layer = big.layers[0]!;
    const ranged = reg.stats.requests.filter((r) => r.path.endsWith(layer.digest) && r.range);
    expect(ranged.length).toBe(Math.ceil(layer.size / (64 * 1024)));
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    expect(reg.stats.maxInFlight).toBeGreaterThan(1);
    await expect(openStore(root).content.info(layer.digest)).resolves.toEqual({ digest: layer.digest, size: layer.size });
    expectCleanStore(root);
  });

  it('shares one scheduler between concurrent pulls of a process', async () => {
    reg.faults.bytesPerSecond = 1024 * 1024;
    const scheduler = new FetchScheduler({ maxRequests: 3 });
    await Promise.all([
      pull(`${reg.host}/big/app:1`, { root: freshRoot(), chunkSize: 256 * 1024, scheduler }),
      pull(`${reg.host}/big/app:1`, { root: freshRoot(), chunkSize: 256 * 1024, scheduler }),
    ]);
    // Blob requests of both pulls together never exceeded the limit (manifests and configs are
    // not blob ranges and are not scheduled).
    expect(reg.stats.maxInFlight).toBeLessThanOrEqual(3 + 2);
    expect(reg.stats.maxInFlight).toBeGreaterThanOrEqual(2);
    expect(scheduler.inFlight).toEqual({ requests: 0, bytes: 0 });
  });

  it('uses a server that ignores Range as one stream', async () => {
    reg.faults.ignoreRange = true;
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024 });
    const layer = big.layers[0]!;
    expect(reg.stats.requests.filter((r) => r.path.endsWith(layer.digest))).toHaveLength(1);
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    expectCleanStore(root);
  });

  it('starts a whole-blob read over when a server that ignores Range drops the connection (campaign 2)', async () => {
    // Found by test/reliability-faults.test.ts (seed 2002, pull 25): the retry asked for the rest,
    // got the whole blob again with 200, and the pull failed with REGISTRY_ERROR.
    const layer = big.layers[0]!;
    reg.faults.ignoreRange = true;
    reg.faults.dropAfter = { bytes: 100_000, times: 2, path: new RegExp(layer.digest) };
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024, keepBlobs: true });
    const gets = reg.stats.requests.filter((r) => r.path.endsWith(layer.digest));
    expect(gets).toHaveLength(3);
    expect(gets.map((r) => r.range)).toEqual(['bytes=0-65535', 'bytes=100000-' + (layer.size - 1), 'bytes=100000-' + (layer.size - 1)]);
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(2 * 100_000 + layer.size);
    expect(await openStore(root).content.info(layer.digest)).toEqual({ digest: layer.digest, size: layer.size });
    expectCleanStore(root);
  });

  it('rejects a 206 whose Content-Range does not match the request', async () => {
    reg.faults.wrongContentRange = true;
    const root = freshRoot();
    await expect(pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024 })).rejects.toMatchObject({ code: 'REGISTRY_ERROR' });
    expect(await openStore(root).images.list()).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(corruptBlobs(root)).toEqual([]);
    // Both layers fail the same way; whichever fails second may have been stopped by the first's
    // failure and put away for a resume (by design), so content/ingest may hold it. The next pull
    // takes what was put away and leaves nothing behind.
    reg.faults.wrongContentRange = false;
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024 });
    expectCleanStore(root);
  });

  it('a Content-Range mismatch is retried, and the error that ends the pull carries no retry marker', async () => {
    reg.faults.wrongContentRange = true;
    const root = freshRoot();
    const e = await failure(pull(`${reg.host}/big/app:1`, { root, chunkSize: 64 * 1024 }));
    expect(e.code).toBe('REGISTRY_ERROR');
    expect(e.message).toContain('Content-Range');
    // Retried: the first range was asked for more than once (the error was known to be worth another try).
    const first = reg.stats.requests.filter((r) => r.path.endsWith(big.layers[0]!.digest) && r.range === `bytes=0-${64 * 1024 - 1}`);
    expect(first.length).toBeGreaterThan(1);
    // That knowledge stays private: nothing public of the error names it.
    const retryWord = /retr/i;
    expect(Object.keys(e.details).filter((k) => retryWord.test(k))).toEqual([]);
    expect(JSON.stringify(e.details)).not.toMatch(retryWord);
    expect(Object.keys(e.toJSON()).sort()).toEqual(['code', 'details', 'message']);
    expect(JSON.stringify(e.toJSON())).not.toMatch(retryWord);
    expect(Object.keys(e).filter((k) => retryWord.test(k))).toEqual([]);
    expect(Object.getOwnPropertySymbols(e)).toEqual([]);
    // The CLI's error event is the same object.
    const cli = await runCliAsync(['pull', '--root', freshRoot(), '--json', '--chunk-size', '64KiB', `${reg.host}/big/app:1`]);
    expect(cli.status).toBe(1);
    const event = JSON.parse(cli.stdout.trimEnd().split('\n').at(-1)!) as Record<string, unknown>;
    expect(event).toMatchObject({ type: 'error', code: 'REGISTRY_ERROR' });
    expect(Object.keys(event).sort()).toEqual(['code', 'details', 'message', 'ref', 'type']);
    expect(JSON.stringify(event)).not.toMatch(retryWord);
  });

  it('resumes a chunk whose connection dropped, asking only for the rest', async () => {
    const layer = big.layers[0]!;
    expect(layer.size).toBeGreaterThan(2 * 1024 * 1024);
    reg.faults.dropAfter = { bytes: 10_000, times: 1, path: new RegExp(layer.digest) };
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 1024 * 1024 });
    const resumed = reg.stats.requests.filter((r) => r.path.endsWith(layer.digest) && r.range === 'bytes=10000-1048575');
    expect(resumed).toHaveLength(1);
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    expectCleanStore(root);
  });

  it('waits as long as Retry-After asks on 429, then succeeds', async () => {
    const layer = big.layers[0]!;
    reg.faults.status = { path: new RegExp(layer.digest), status: 429, times: 1, headers: { 'Retry-After': '1' } };
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root });
    const hits = reg.stats.requests.filter((r) => r.path.includes(layer.digest));
    expect(hits[0]?.status).toBe(429);
    expect(hits[1]!.at - hits[0]!.at).toBeGreaterThanOrEqual(950);
    expectCleanStore(root);
  });

  it('fails at once with RATE_LIMITED when Retry-After asks for more than a minute', async () => {
    reg.faults.status = { path: /\/blobs\//, status: 429, times: 100, headers: { 'Retry-After': '3600' } };
    const root = freshRoot();
    // Sitting out the hour would outlast the test's own timeout.
    await expect(pull(`${reg.host}/big/app:1`, { root })).rejects.toMatchObject({ code: 'RATE_LIMITED', details: { retryAfter: '3600' } });
    expectCleanStore(root);
  });

  it('re-issues a stalled range on a fresh connection and completes', async () => {
    const layer = big.layers[0]!;
    // The first response for the layer sends 100 kB, then nothing, and never ends.
    reg.faults.stallAfter = { bytes: 100_000, times: 1, path: new RegExp(layer.digest) };
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 1024 * 1024, stragglerFloor: 64 * 1024, stragglerWindowMs: 300, keepBlobs: true });
    const reissued = reg.stats.requests.filter((r) => r.path.endsWith(layer.digest) && r.range === 'bytes=100000-1048575');
    expect(reissued).toHaveLength(1);
    expect(await openStore(root).content.info(layer.digest)).toEqual({ digest: layer.digest, size: layer.size });
    expectCleanStore(root);
  });

  it("re-issues a range whose body stops at once, without waiting for the floor's window", async () => {
    const layer = big.layers[0]!;
    reg.faults.stallAfter = { bytes: 100_000, times: 1, path: new RegExp(layer.digest) };
    const root = freshRoot();
    // The floor's window and the connections' idle timeout are both longer than the test's own
    // timeout: only the stall timeout can end this range before it.
    const client = new RegistryClient({ idleTimeoutMs: 600_000 });
    try {
      await pull(`${reg.host}/big/app:1`, { root, client, chunkSize: 1024 * 1024, stragglerWindowMs: 600_000, stallTimeoutMs: 300 });
    } finally {
      await client.close();
    }
    expect(reg.stats.requests.filter((r) => r.path.endsWith(layer.digest) && r.range === 'bytes=100000-1048575')).toHaveLength(1);
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    expectCleanStore(root);
  });

  it('fails a pull that receives nothing at all, counting bytes across all its ranges', async () => {
    reg.faults.stallAfter = { bytes: 0, times: 1000, path: new RegExp(big.layers[0]!.digest) };
    const root = freshRoot();
    const err = await pull(`${reg.host}/big/app:1`, { root, chunkSize: 1024 * 1024, stragglerWindowMs: 60_000, noProgressTimeoutMs: 400 }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', details: { timeoutMs: 400 } });
    expect(await openStore(root).images.list()).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
  });

  it('gives up on a manifest or config read that stalls, retrying it first', async () => {
    reg.faults.stallAfter = { bytes: 0, times: 1000, path: new RegExp(big.configDigest) };
    const client = new RegistryClient({ idleTimeoutMs: 200 });
    try {
      await expect(pull(`${reg.host}/big/app:1`, { root: freshRoot(), client })).rejects.toMatchObject({ code: 'NETWORK_ERROR' });
      expect(reg.stats.requests.filter((r) => r.path.endsWith(big.configDigest)).length).toBe(4);
    } finally {
      await client.close();
    }
  });

  it('retries a config read whose connection resets or stalls mid-body (campaign 2)', async () => {
    // Found by the network-faults campaign: the body's failure came out as SIZE_MISMATCH ("more
    // bytes than the descriptor's") and was not retried.
    const path = new RegExp(big.configDigest);
    for (const fault of ['dropAfter', 'stallAfter'] as const) {
      reg.stats.reset();
      reg.faults = { [fault]: { bytes: 10, times: 2, path } };
      const client = new RegistryClient({ idleTimeoutMs: 300 });
      try {
        const root = freshRoot();
        await pull(`${reg.host}/big/app:1`, { root, client });
        expect(
          reg.stats.requests.filter((r) => r.path.endsWith(big.configDigest)),
          fault,
        ).toHaveLength(3);
        expectCleanStore(root);
        // Every attempt cut: NETWORK_ERROR, after 4 of them.
        reg.stats.reset();
        reg.faults = { [fault]: { bytes: 10, times: 100, path } };
        const err = await pull(`${reg.host}/big/app:1`, { root: freshRoot(), client }).catch((e: unknown) => e);
        expect(err, fault).toMatchObject({ code: 'NETWORK_ERROR', details: { body: true } });
        expect(
          reg.stats.requests.filter((r) => r.path.endsWith(big.configDigest)),
          fault,
        ).toHaveLength(4);
      } finally {
        await client.close();
      }
    }
  });

  it('leaves a slow but moving range alone', async () => {
    reg.faults.bytesPerSecond = 1024 * 1024;
    const root = freshRoot();
    // About 3 windows of the floor per range, at 16 times the floor. A window in which the event
    // loop stalled is not judged (the floor's late-tick guard), so a loaded machine cannot trip it.
    await pull(`${reg.host}/big/app:1`, { root, chunkSize: 1024 * 1024, stragglerFloor: 64 * 1024, stragglerWindowMs: 300 });
    const layer = big.layers[0]!;
    // Every byte was sent exactly once: nothing was cancelled and asked for again.
    expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
    expect(reg.stats.requests.filter((r) => r.path.endsWith(layer.digest))).toHaveLength(Math.ceil(layer.size / (1024 * 1024)));
  });

  it('retries 503 and succeeds', async () => {
    reg.faults.status = { path: /\/blobs\//, status: 503, times: 2 };
    const root = freshRoot();
    await pull(`${reg.host}/big/app:1`, { root });
    expect(reg.stats.requests.filter((r) => r.status === 503)).toHaveLength(2);
    expectCleanStore(root);
  });
});

describe('verification', () => {
  let reg: LoopbackRegistry;
  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    reg.addImage('v/app', '1', image);
  });
  afterEach(() => {
    reg.faults = {};
  });
  afterAll(() => reg.close());

  it('fails with DIGEST_MISMATCH on a corrupted layer and commits nothing of it', async () => {
    const victim = image.layers[0]!;
    reg.stats.reset();
    reg.faults.corruptBlob = new Set([victim.digest]);
    const root = freshRoot();
    await expect(pull(`${reg.host}/v/app:1`, { root })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    const store = openStore(root);
    expect(await store.content.info(victim.digest)).toBeUndefined();
    expect(await store.snapshots.isCommitted(victim.diffID)).toBe(false);
    expect(await store.images.list()).toEqual([]);
    // The victim's download is gone; another layer stopped mid-download by the failure (a matter
    // of timing) keeps its part for the next pull to resume.
    expect(ls(join(root, 'content', 'ingest')).filter((id) => id.startsWith(victim.digest.slice(7, 23)))).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(corruptBlobs(root)).toEqual([]);
    reg.faults = {};
    await pull(`${reg.host}/v/app:1`, { root });
    expectCleanStore(root);
    // What the failed pull verified or half-fetched of the other layers was kept (as an ingest or a
    // snapshot): over both pulls each of them was served once; the victim twice (bad, then good).
    for (const l of image.layers) expect(reg.stats.blobBytesServed(l.digest), l.digest).toBe(l.digest === victim.digest ? 2 * l.size : l.size);
  });

  it('drops a committed blob damaged on disk, so the next pull fetches a good copy', async () => {
    const root = freshRoot();
    await pull(`${reg.host}/v/app:1`, { root, keepBlobs: true });
    const store = openStore(root);
    const victim = image.layers[0]!;
    // Keep the blobs, lose the snapshots: the next pull unpacks from the content store.
    rmSync(join(root, 'snapshots'), { recursive: true });
    const blob = readFileSync(store.content.blobPath(victim.digest));
    blob[blob.length >> 1]! ^= 0x55;
    writeFileSync(store.content.blobPath(victim.digest), blob);
    await expect(pull(`${reg.host}/v/app:1`, { root })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect(await store.content.info(victim.digest)).toBeUndefined();
    reg.stats.reset();
    await pull(`${reg.host}/v/app:1`, { root });
    expect(reg.stats.blobBytesServed(victim.digest)).toBe(victim.size);
    expectCleanStore(root);
  });

  it('fails with DIGEST_MISMATCH when Docker-Content-Digest disagrees with a tag fetch', async () => {
    reg.faults.wrongDockerContentDigest = true;
    await expect(pull(`${reg.host}/v/app:1`, { root: freshRoot() })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
  });

  it('checks a manifest fetched by digest against that digest', async () => {
    const other = Buffer.from(image.manifest.toString('utf8').replace('"schemaVersion": 2', '"schemaVersion":2 '));
    const claimed = sha256Digest(Buffer.from('something else'));
    reg.addManifest('v/app', claimed, other, image.manifestMediaType);
    await expect(pull(`${reg.host}/v/app@${claimed}`, { root: freshRoot() })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
  });

  it('fails with DIGEST_MISMATCH when a layer does not decompress to its diffID', async () => {
    // A valid blob whose config names another diffID: the blob digest matches, the diffID does not.
    const cfg = JSON.parse(image.config.toString('utf8')) as { rootfs: { diff_ids: string[] } };
    cfg.rootfs.diff_ids[0] = sha256Digest(Buffer.from('not the tar'));
    const config = Buffer.from(JSON.stringify(cfg));
    const manifest = JSON.parse(image.manifest.toString('utf8')) as { config: { digest: string; size: number } };
    manifest.config = { ...manifest.config, digest: sha256Digest(config), size: config.length };
    const mbytes = Buffer.from(JSON.stringify(manifest));
    reg.addBlob('v/app', sha256Digest(config), config);
    reg.addManifest('v/app', 'baddiff', mbytes, image.manifestMediaType);
    const root = freshRoot();
    const err = await pull(`${reg.host}/v/app:baddiff`, { root }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect((err as Error).message).toContain('diffID');
    expect((await openStore(root).snapshots.list()).map((s) => s.diffID)).not.toContain(cfg.rootfs.diff_ids[0]);
    // The failed layer's download is dropped; another layer stopped mid-download (a matter of
    // timing) keeps its part for a resume.
    expect(ls(join(root, 'content', 'ingest')).filter((id) => id.startsWith(image.layers[0]!.digest.slice(7, 23)))).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    expect(corruptBlobs(root)).toEqual([]);
  });

  it('rejects Docker schema 1 with UNSUPPORTED_MEDIA_TYPE', async () => {
    const s1 = Buffer.from(JSON.stringify({ schemaVersion: 1, name: 'v/app', tag: 'old', fsLayers: [], history: [] }));
    reg.addManifest('v/app', 'old', s1, MediaTypes.DOCKER_MANIFEST_SCHEMA1_SIGNED);
    const err = await pull(`${reg.host}/v/app:old`, { root: freshRoot() }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
    expect((err as Error).message).toMatch(/schema 1/);
  });

  it('refuses manifests over 4 MiB', async () => {
    const huge = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaTypes.OCI_MANIFEST, pad: 'x'.repeat(4 * 1024 * 1024) }));
    reg.addManifest('v/app', 'huge', huge, MediaTypes.OCI_MANIFEST);
    await expect(pull(`${reg.host}/v/app:huge`, { root: freshRoot() })).rejects.toMatchObject({ code: 'MANIFEST_TOO_LARGE' });
  });

  it('stops on abort with ABORTED, nothing visible, and the next pull resumes the downloads', async () => {
    reg.faults.bytesPerSecond = 256 * 1024;
    reg.stats.reset();
    const root = freshRoot();
    const ac = new AbortController();
    // The largest layer needs seconds at this pace: aborted once its first bytes have landed, it is
    // cut off mid-way, however slow the machine.
    const largest = [...image.layers].sort((a, b) => b.size - a.size)[0]!;
    const p = pull(`${reg.host}/v/app:1`, {
      root,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.type === 'layer' && e.digest === largest.digest && e.state === 'fetching' && e.bytes > 0) ac.abort();
      },
    });
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    const store = openStore(root);
    expect(await store.images.list()).toEqual([]);
    expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
    // The partial downloads stay, invisible, for the next pull.
    expect(ls(join(root, 'content', 'ingest')).length).toBeGreaterThan(0);
    const before = new Map(image.layers.map((l) => [l.digest, reg.stats.blobBytesServed(l.digest)]));
    expect(before.get(largest.digest)).toBeGreaterThan(0);
    expect(before.get(largest.digest)).toBeLessThan(largest.size);
    // The next pull fetches at most what the suspended downloads had not recorded, per blob.
    const bound = await resumeBound(root, image);
    expect(bound.get(largest.digest)).toBeLessThan(largest.size);
    reg.faults = {};
    await pull(`${reg.host}/v/app:1`, { root });
    for (const l of image.layers) {
      const fetched = reg.stats.blobBytesServed(l.digest) - before.get(l.digest)!;
      expect(fetched, `${l.digest}: fetched ${fetched} of ${l.size} bytes, ${bound.get(l.digest)} were missing`).toBeLessThanOrEqual(bound.get(l.digest)!);
    }
    expectCleanStore(root);
  });
});

describe('authentication', () => {
  it('follows the Bearer token flow with credentials', async () => {
    const reg = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'alice', password: 's3cret' } });
    try {
      reg.addImage('private/app', '1', image);
      const ref = `${reg.host}/private/app:1`;
      await expect(pull(ref, { root: freshRoot() })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      await expect(pull(ref, { root: freshRoot(), credentials: () => ({ username: 'alice', password: 'wrong' }) })).rejects.toMatchObject({
        code: 'UNAUTHORIZED',
      });
      const root = freshRoot();
      const { image: rec } = await pull(ref, { root, credentials: (r) => (r === reg.host ? { username: 'alice', password: 's3cret' } : undefined) });
      expect(rec.manifest.digest).toBe(image.manifestDigest);
      expect(reg.stats.tokensIssued).toBeGreaterThan(0);
      expectCleanStore(root);
    } finally {
      await reg.close();
    }
  });

  it('renews an expired token in the middle of a pull', async () => {
    const reg = await startLoopbackRegistry({ auth: { type: 'bearer', expiresIn: 1 } });
    try {
      reg.addImage('exp/app', '1', big);
      // About three seconds of download in 64 KiB ranges: the first token expires on the way.
      reg.faults.bytesPerSecond = 256 * 1024;
      const root = freshRoot();
      await pull(`${reg.host}/exp/app:1`, { root, chunkSize: 64 * 1024, maxConnections: 4 });
      expect(reg.stats.tokensIssued).toBeGreaterThanOrEqual(2);
      expect(reg.stats.requests.some((r) => r.status === 401 && r.path.includes('/blobs/'))).toBe(true);
      expectCleanStore(root);
    } finally {
      await reg.close();
    }
  });

  it('sends anonymous tokens and Basic credentials where challenged', async () => {
    const anon = await startLoopbackRegistry({ auth: { type: 'bearer' } });
    const basic = await startLoopbackRegistry({ auth: { type: 'basic', username: 'bob', password: 'pw' } });
    try {
      anon.addImage('pub/app', '1', image);
      basic.addImage('pub/app', '1', image);
      await pull(`${anon.host}/pub/app:1`, { root: freshRoot() });
      await expect(pull(`${basic.host}/pub/app:1`, { root: freshRoot() })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      await pull(`${basic.host}/pub/app:1`, { root: freshRoot(), credentials: () => ({ username: 'bob', password: 'pw' }) });
    } finally {
      await anon.close();
      await basic.close();
    }
  });

  it('never sends the Authorization header to a redirect target on another origin', async () => {
    const storage = await startLoopbackRegistry();
    const reg = await startLoopbackRegistry({ auth: { type: 'basic', username: 'carol', password: 'pw' } });
    try {
      reg.addImage('r/app', '1', big);
      storage.addImage('r/app', '1', big);
      // Another port is another origin, as much as another host is.
      reg.faults.redirectBlobsTo = storage.url;
      const root = freshRoot();
      await pull(`${reg.host}/r/app:1`, { root, chunkSize: 512 * 1024, credentials: () => ({ username: 'carol', password: 'pw' }) });
      const blobGets = storage.stats.requests.filter((r) => r.path.includes('/blobs/'));
      expect(blobGets.length).toBeGreaterThan(2);
      expect(blobGets.every((r) => !r.authorization)).toBe(true);
      expect(reg.stats.requests.filter((r) => r.path.includes('/manifests/')).some((r) => r.authorization)).toBe(true);
      expectCleanStore(root);
    } finally {
      await reg.close();
      await storage.close();
    }
  });
});
