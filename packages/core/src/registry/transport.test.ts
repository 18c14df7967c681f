// The transport against the loopback registry's faults: a 401 challenge answered with a token or
// Basic credentials, redirects (no Authorization to another origin), Retry-After, and a 200 to a
// ranged request.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Digest } from '../oci/digest.js';
import { parseReference, type Reference } from '../oci/reference.js';
import { buildImage, type BuiltImage } from '../testing/builder.js';
import { Prng } from '../testing/prng.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import type { RandomAccessSink } from './fetch-context.js';
import { fetchBlob } from './fetch.js';
import { discard } from './response.js';

let image: BuiltImage;
/** The image's one layer: 1 MiB of random bytes, stored uncompressed so its size is known. */
let layer: { digest: Digest; size: number; bytes: Buffer };

beforeAll(async () => {
  image = await buildImage({ layers: [[{ type: 'file', path: 'data.bin', content: new Prng(7).bytes(1024 * 1024) }]], compression: 'none' });
  const l = image.layers[0]!;
  layer = { digest: l.digest, size: l.size, bytes: image.blobs.get(l.digest)! };
});

const registries: LoopbackRegistry[] = [];
const clients: RegistryClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(registries.splice(0).map((r) => r.close()));
});

async function registry(options: Parameters<typeof startLoopbackRegistry>[0] = {}): Promise<{ reg: LoopbackRegistry; ref: Reference }> {
  const reg = await startLoopbackRegistry(options);
  registries.push(reg);
  reg.addImage('t/app', '1', image);
  return { reg, ref: parseReference(`${reg.host}/t/app:1`) };
}

function client(options: ConstructorParameters<typeof RegistryClient>[0] = {}): RegistryClient {
  const c = new RegistryClient(options);
  clients.push(c);
  return c;
}

/** A sink that keeps what is written in memory. */
function memorySink(size: number): RandomAccessSink & { bytes: Buffer; writes: number } {
  const sink = {
    bytes: Buffer.alloc(size),
    writes: 0,
    async write(data: Uint8Array, position: number) {
      sink.writes++;
      sink.bytes.set(data, position);
    },
  };
  return sink;
}

describe('authorization', () => {
  it('answers a 401 Bearer challenge with a token, then reuses it', async () => {
    const { reg, ref } = await registry({ auth: { type: 'bearer' } });
    const c = client();
    const first = await c.request(ref, 'manifests/1');
    await discard(first);
    expect(first.statusCode).toBe(200);
    expect(reg.stats.requests.map((r) => [r.path, r.status, r.authorization])).toEqual([
      ['/v2/t/app/manifests/1', 401, false],
      [expect.stringMatching(/^\/token\?service=fastpull-test&scope=repository%3At%2Fapp%3Apull$/), 200, false],
      ['/v2/t/app/manifests/1', 200, true],
    ]);
    reg.stats.reset();
    await discard(await c.request(ref, `blobs/${image.configDigest}`));
    expect(reg.stats.requests.map((r) => [r.status, r.authorization])).toEqual([[200, true]]);
    expect(reg.stats.tokensIssued).toBe(0);
  });

  it('answers a Basic challenge with the credentials for the registry, and fails UNAUTHORIZED without them', async () => {
    const { reg, ref } = await registry({ auth: { type: 'basic', username: 'u', password: 'p' } });
    const asked: string[] = [];
    const c = client({ credentials: (r) => (asked.push(r), { username: 'u', password: 'p' }) });
    const res = await c.request(ref, 'manifests/1');
    await discard(res);
    expect(res.statusCode).toBe(200);
    expect(asked.every((r) => r === reg.host)).toBe(true);
    expect(reg.stats.requests.map((r) => r.status)).toEqual([401, 200]);
    await expect(client().request(ref, 'manifests/1')).rejects.toMatchObject({ code: 'UNAUTHORIZED', details: { status: 401, host: reg.host } });
  });

  it('gives a second 401 to the caller instead of asking again', async () => {
    // Credentials the registry refuses: one challenge, one retry, then the 401 is the answer.
    const { reg, ref } = await registry({ auth: { type: 'basic', username: 'u', password: 'p' } });
    const res = await client({ credentials: () => ({ username: 'u', password: 'wrong' }) }).request(ref, 'manifests/1');
    await discard(res);
    expect(res.statusCode).toBe(401);
    expect(reg.stats.requests.map((r) => [r.status, r.authorization])).toEqual([
      [401, false],
      [401, true],
    ]);
  });
});

describe('redirects', () => {
  it('follows a redirect to another origin without the Authorization header', async () => {
    const { reg: storage } = await registry();
    const { reg, ref } = await registry({ auth: { type: 'bearer' }, faults: { redirectBlobsTo: storage.url } });
    const sink = memorySink(layer.size);
    await fetchBlob(client(), ref, { mediaType: 'application/octet-stream', digest: layer.digest, size: layer.size }, sink);
    expect(sink.bytes.equals(layer.bytes)).toBe(true);
    const blobAsks = reg.stats.requests.filter((r) => r.path.includes('/blobs/'));
    expect(blobAsks.map((r) => [r.status, r.authorization])).toEqual([
      [401, false],
      [307, true],
    ]);
    expect(storage.stats.requests.map((r) => [r.path, r.status, r.authorization])).toEqual([[`/v2/t/app/blobs/${layer.digest}`, 200, false]]);
  });

  it('keeps the Authorization header on the same origin, and stops a redirect loop', async () => {
    const { reg, ref } = await registry({ auth: { type: 'basic', username: 'u', password: 'p' } });
    reg.faults.redirectBlobsTo = reg.url;
    const c = client({ credentials: () => ({ username: 'u', password: 'p' }) });
    await expect(c.request(ref, `blobs/${layer.digest}`)).rejects.toMatchObject({
      code: 'REGISTRY_ERROR',
      message: expect.stringContaining('more than 5 redirects'),
    });
    const asks = reg.stats.requests;
    expect(asks.map((r) => r.status)).toEqual([401, 307, 307, 307, 307, 307, 307]);
    expect(asks.slice(1).every((r) => r.authorization)).toBe(true);
  });
});

describe('retries', () => {
  it('waits the Retry-After a server asks for before trying again', async () => {
    const { reg, ref } = await registry({ faults: { status: { path: /\/manifests\//, status: 503, times: 1, headers: { 'Retry-After': '1' } } } });
    const res = await client().requestWithRetry(ref, 'manifests/1');
    await discard(res);
    expect(res.statusCode).toBe(200);
    const [refused, served] = reg.stats.requests;
    expect([refused?.status, served?.status]).toEqual([503, 200]);
    // The back-off alone waits 100-300 ms before the first retry; a second is the server's.
    expect(served!.at - refused!.at).toBeGreaterThanOrEqual(990);
  });

  it('answers at once with the response when Retry-After asks for more than a minute', async () => {
    const { reg, ref } = await registry({ faults: { status: { path: /\/manifests\//, status: 429, times: 5, headers: { 'Retry-After': '120' } } } });
    const res = await client().requestWithRetry(ref, 'manifests/1');
    await discard(res);
    expect(res.statusCode).toBe(429);
    expect(reg.stats.requests).toHaveLength(1);
    await expect(client().fetchManifest(ref, '1')).rejects.toMatchObject({ code: 'RATE_LIMITED', details: { status: 429, retryAfter: '120' } });
  });

  it('gives the last answer after the attempts run out', async () => {
    const { reg, ref } = await registry({ faults: { status: { path: /\/manifests\//, status: 500, times: 10 } } });
    const res = await client().requestWithRetry(ref, 'manifests/1', {}, 2);
    await discard(res);
    expect(res.statusCode).toBe(500);
    expect(reg.stats.requests.map((r) => r.status)).toEqual([500, 500]);
  });
});

describe('a 200 to a ranged request', () => {
  const chunkSize = 256 * 1024;
  const desc = () => ({ mediaType: 'application/octet-stream', digest: layer.digest, size: layer.size });

  it('is used as the whole blob when it answers the first range', async () => {
    const { reg, ref } = await registry({ faults: { ignoreRange: true } });
    const sink = memorySink(layer.size);
    await fetchBlob(client(), ref, desc(), sink, { chunkSize });
    expect(sink.bytes.equals(layer.bytes)).toBe(true);
    const asks = reg.stats.requests.filter((r) => r.path.includes('/blobs/'));
    expect(asks.map((r) => [r.range, r.status])).toEqual([[`bytes=0-${chunkSize - 1}`, 200]]);
  });

  it('is used as the whole blob, from offset 0, when it answers a resumed download', async () => {
    const { reg, ref } = await registry({ faults: { ignoreRange: true } });
    const sink = memorySink(layer.size);
    layer.bytes.copy(sink.bytes, 0, 0, 100_000);
    await fetchBlob(client(), ref, desc(), sink, { chunkSize, have: [[0, 100_000]] });
    expect(sink.bytes.equals(layer.bytes)).toBe(true);
    expect(reg.stats.requests.filter((r) => r.path.includes('/blobs/')).map((r) => [r.range, r.status])).toEqual([
      [`bytes=100000-${100_000 + chunkSize - 1}`, 200],
    ]);
  });

  it('fails REGISTRY_ERROR when it answers a range running beside others', async () => {
    const { reg, ref } = await registry();
    const sink = memorySink(layer.size);
    // The first range shows that the server honours Range; then it stops.
    const err = await fetchBlob(client(), ref, desc(), sink, { chunkSize, onBytes: () => void (reg.faults.ignoreRange = true) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'REGISTRY_ERROR', message: expect.stringContaining('server ignored the Range request') });
    const statuses = reg.stats.requests.filter((r) => r.path.includes('/blobs/')).map((r) => r.status);
    expect(statuses[0]).toBe(206);
    expect(statuses.slice(1)).toContain(200);
  });
});
