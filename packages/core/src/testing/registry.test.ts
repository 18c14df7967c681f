// Tests of the loopback registry: content, ranges, errors, basic and bearer auth, each fault.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Digest, type Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { buildImage, buildIndex, type BuiltImage } from './builder.js';
import { startLoopbackRegistry, type LoopbackRegistry, type LoopbackRegistryOptions } from './registry.js';

const open: LoopbackRegistry[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

async function start(options?: LoopbackRegistryOptions): Promise<LoopbackRegistry> {
  const r = await startLoopbackRegistry(options);
  open.push(r);
  return r;
}

let cached: BuiltImage | undefined;
async function image(): Promise<BuiltImage> {
  cached ??= await buildImage({
    layers: [
      [{ type: 'file', path: 'data/blob', content: Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7) % 251)) }],
      [{ type: 'file', path: 'data/more', content: 'more' }],
    ],
  });
  return cached;
}

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') {
  const res = await request(url, { method, headers });
  const body = Buffer.from(await res.body.arrayBuffer());
  const h = (name: string): string | undefined => {
    const v = res.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  return { status: res.statusCode, body, header: h };
}

describe('loopback registry: content', () => {
  it('answers /v2/ and serves manifests by tag and digest, GET and HEAD, under nested names', async () => {
    const r = await start();
    const im = await image();
    r.addImage('team/sub/app', 'v1', im);
    expect(r.url).toBe(`http://${r.host}`);
    expect((await get(`${r.url}/v2/`)).status).toBe(200);

    for (const ref of ['v1', im.manifestDigest]) {
      const res = await get(`${r.url}/v2/team/sub/app/manifests/${ref}`);
      expect(res.status).toBe(200);
      expect(res.body.equals(im.manifest)).toBe(true);
      expect(res.header('content-type')).toBe(MediaTypes.OCI_MANIFEST);
      expect(res.header('docker-content-digest')).toBe(im.manifestDigest);
      expect(res.header('content-length')).toBe(String(im.manifest.byteLength));
    }
    const head = await get(`${r.url}/v2/team/sub/app/manifests/v1`, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body.byteLength).toBe(0);
    expect(head.header('content-length')).toBe(String(im.manifest.byteLength));
    expect(head.header('docker-content-digest')).toBe(im.manifestDigest);
  });

  it('serves blobs whole and by range, and 416 for unsatisfiable ranges', async () => {
    const r = await start();
    const im = await image();
    r.addImage('app', 'v1', im);
    const layer = im.layers[0]!;
    const url = `${r.url}/v2/app/blobs/${layer.digest}`;
    const total = layer.size;

    const whole = await get(url);
    expect(whole.status).toBe(200);
    expect(whole.body.equals(layer.blob)).toBe(true);
    expect(whole.header('accept-ranges')).toBe('bytes');
    expect(whole.header('docker-content-digest')).toBe(layer.digest);

    const mid = await get(url, { range: 'bytes=10-19' });
    expect(mid.status).toBe(206);
    expect(mid.header('content-range')).toBe(`bytes 10-19/${total}`);
    expect(mid.header('content-length')).toBe('10');
    expect(mid.body.equals(layer.blob.subarray(10, 20))).toBe(true);

    const open_ = await get(url, { range: 'bytes=100-' });
    expect(open_.status).toBe(206);
    expect(open_.header('content-range')).toBe(`bytes 100-${total - 1}/${total}`);
    expect(open_.body.equals(layer.blob.subarray(100))).toBe(true);

    const pastEnd = await get(url, { range: `bytes=${total - 5}-${total + 100}` });
    expect(pastEnd.status).toBe(206);
    expect(pastEnd.header('content-range')).toBe(`bytes ${total - 5}-${total - 1}/${total}`);
    expect(pastEnd.header('content-length')).toBe('5');
    expect(pastEnd.body.equals(layer.blob.subarray(total - 5))).toBe(true);

    const suffix = await get(url, { range: 'bytes=-7' });
    expect(suffix.status).toBe(206);
    expect(suffix.body.equals(layer.blob.subarray(total - 7))).toBe(true);

    const bad = await get(url, { range: `bytes=${total}-` });
    expect(bad.status).toBe(416);
    expect(bad.header('content-range')).toBe(`bytes */${total}`);

    const head = await get(url, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.header('content-length')).toBe(String(total));
    expect(head.body.byteLength).toBe(0);

    expect(r.stats.blobBytesServed(layer.digest)).toBe(total + 10 + (total - 100) + 5 + 7);
    const logged = r.stats.requests.filter((q) => q.path.endsWith(layer.digest));
    expect(logged.map((q) => [q.method, q.range, q.status])).toEqual([
      ['GET', undefined, 200],
      ['GET', 'bytes=10-19', 206],
      ['GET', 'bytes=100-', 206],
      ['GET', `bytes=${total - 5}-${total + 100}`, 206],
      ['GET', 'bytes=-7', 206],
      ['GET', `bytes=${total}-`, 416],
      ['HEAD', undefined, 200],
    ]);
    expect(logged[1]?.bytesSent).toBe(10);
  });

  it('answers unknown names, manifests and blobs with 404 and the distribution error codes', async () => {
    const r = await start();
    r.addImage('app', 'v1', await image());
    const cases: [string, string][] = [
      [`/v2/nope/manifests/v1`, 'NAME_UNKNOWN'],
      [`/v2/app/manifests/v2`, 'MANIFEST_UNKNOWN'],
      [`/v2/app/blobs/${sha256Digest('absent')}`, 'BLOB_UNKNOWN'],
    ];
    for (const [path, code] of cases) {
      const res = await get(`${r.url}${path}`);
      expect(res.status, path).toBe(404);
      const body = JSON.parse(res.body.toString()) as { errors: { code: string }[] };
      expect(body.errors[0]?.code).toBe(code);
    }
  });

  it('serves an index and the manifests and blobs of its images', async () => {
    const r = await start();
    const amd = await image();
    const arm = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: 'arm' }]], platform: { os: 'linux', architecture: 'arm64' } });
    const index = buildIndex([amd, arm]);
    r.addIndex('multi', 'latest', index);
    const top = await get(`${r.url}/v2/multi/manifests/latest`);
    expect(top.header('content-type')).toBe(MediaTypes.OCI_INDEX);
    expect(top.header('docker-content-digest')).toBe(index.digest);
    const armManifest = await get(`${r.url}/v2/multi/manifests/${arm.manifestDigest}`);
    expect(armManifest.body.equals(arm.manifest)).toBe(true);
    expect((await get(`${r.url}/v2/multi/blobs/${arm.configDigest}`)).body.equals(arm.config)).toBe(true);
  });
});

describe('loopback registry: auth', () => {
  it('basic: 401 with a Basic challenge without or with wrong credentials, 200 with the right ones', async () => {
    const r = await start({ auth: { type: 'basic', username: 'u', password: 'p' } });
    r.addImage('app', 'v1', await image());
    const path = `${r.url}/v2/app/manifests/v1`;
    const none = await get(path);
    expect(none.status).toBe(401);
    expect(none.header('www-authenticate')).toBe('Basic realm="fastpull-test"');
    const wrong = await get(path, { authorization: `Basic ${Buffer.from('u:x').toString('base64')}` });
    expect(wrong.status).toBe(401);
    const right = await get(path, { authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
    expect(right.status).toBe(200);
    expect(r.stats.requests.map((q) => q.authorization)).toEqual([false, true, true]);
  });

  it('bearer: challenge, token endpoint with credentials, and tokens valid only for their scope', async () => {
    const r = await start({ auth: { type: 'bearer', username: 'u', password: 'p', repositories: ['app', 'other'] } });
    const im = await image();
    r.addImage('app', 'v1', im);
    r.addImage('other', 'v1', im);
    r.addImage('secret', 'v1', im);

    const first = await get(`${r.url}/v2/app/manifests/v1`);
    expect(first.status).toBe(401);
    const challenge = first.header('www-authenticate');
    expect(challenge).toBe(`Bearer realm="${r.url}/token",service="fastpull-test",scope="repository:app:pull"`);
    const v2 = await get(`${r.url}/v2/`);
    expect(v2.header('www-authenticate')).toBe(`Bearer realm="${r.url}/token",service="fastpull-test"`);

    const tokenUrl = `${r.url}/token?service=fastpull-test&scope=${encodeURIComponent('repository:app:pull')}&scope=${encodeURIComponent('repository:secret:pull')}`;
    expect((await get(tokenUrl)).status).toBe(401);
    expect((await get(tokenUrl, { authorization: `Basic ${Buffer.from('u:wrong').toString('base64')}` })).status).toBe(401);
    const tokenRes = await get(tokenUrl, { authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
    expect(tokenRes.status).toBe(200);
    const body = JSON.parse(tokenRes.body.toString()) as { token: string; access_token: string; expires_in: number };
    expect(body.access_token).toBe(body.token);
    expect(body.expires_in).toBe(300);
    expect(r.stats.tokensIssued).toBe(1);

    const bearer = { authorization: `Bearer ${body.token}` };
    expect((await get(`${r.url}/v2/app/manifests/v1`, bearer)).status).toBe(200);
    expect((await get(`${r.url}/v2/app/blobs/${im.configDigest}`, bearer)).body.equals(im.config)).toBe(true);
    expect((await get(`${r.url}/v2/`, bearer)).status).toBe(200);
    // Not in the requested scope.
    const other = await get(`${r.url}/v2/other/manifests/v1`, bearer);
    expect(other.status).toBe(401);
    expect(other.header('www-authenticate')).toContain('error="insufficient_scope"');
    // Requested, but the account may not pull it.
    expect((await get(`${r.url}/v2/secret/manifests/v1`, bearer)).status).toBe(401);
    expect((await get(`${r.url}/v2/app/manifests/v1`, { authorization: 'Bearer made-up' })).status).toBe(401);
  });

  it('bearer: anonymous tokens when no credentials are configured, refused after they expire', async () => {
    const r = await start({ auth: { type: 'bearer', expiresIn: 0 } });
    r.addImage('app', 'v1', await image());
    const tokenRes = await get(`${r.url}/token?service=fastpull-test&scope=repository:app:pull`);
    expect(tokenRes.status).toBe(200);
    const { token } = JSON.parse(tokenRes.body.toString()) as { token: string };
    expect((await get(`${r.url}/v2/app/manifests/v1`, { authorization: `Bearer ${token}` })).status).toBe(401);
  });
});

describe('loopback registry: faults', () => {
  it('corrupts the middle byte of a blob, consistently across ranges', async () => {
    const r = await start();
    const im = await image();
    r.addImage('app', 'v1', im);
    const layer = im.layers[0]!;
    const url = `${r.url}/v2/app/blobs/${layer.digest}`;
    r.faults.corruptBlob = new Set<Digest>([layer.digest]);
    const whole = await get(url);
    expect(whole.body.byteLength).toBe(layer.size);
    expect(sha256Digest(whole.body)).not.toBe(layer.digest);
    const mid = layer.size >> 1;
    const diff = [...whole.body].flatMap((b, i) => (b === layer.blob[i] ? [] : [i]));
    expect(diff).toEqual([mid]);
    const ranged = await get(url, { range: `bytes=${mid - 1}-${mid + 1}` });
    expect(ranged.body.equals(whole.body.subarray(mid - 1, mid + 2))).toBe(true);
    r.faults.corruptBlob = undefined;
    expect((await get(url)).body.equals(layer.blob)).toBe(true);
  });

  it('corrupts a blob for ranged GETs only when told, and logs who asked', async () => {
    const r = await start();
    const im = await image();
    r.addImage('app', 'v1', im);
    const layer = im.layers[0]!;
    const url = `${r.url}/v2/app/blobs/${layer.digest}`;
    r.faults.corruptRangedBlob = new Set<Digest>([layer.digest]);
    const mid = layer.size >> 1;
    const ranged = await get(url, { range: `bytes=0-${layer.size - 1}`, 'user-agent': 'ranged-puller/1' });
    expect(ranged.status).toBe(206);
    expect([...ranged.body].flatMap((b, i) => (b === layer.blob[i] ? [] : [i]))).toEqual([mid]);
    const whole = await get(url, { 'user-agent': 'whole-puller/1' });
    expect(whole.body.equals(layer.blob)).toBe(true);
    const blobGets = r.stats.requests.filter((q) => q.path.includes('/blobs/'));
    expect(blobGets.map((q) => [q.userAgent, q.range])).toEqual([
      ['ranged-puller/1', `bytes=0-${layer.size - 1}`],
      ['whole-puller/1', undefined],
    ]);
  });

  it('ignores ranges or answers the wrong one when told', async () => {
    const r = await start();
    const im = await image();
    r.addImage('app', 'v1', im);
    const layer = im.layers[0]!;
    const url = `${r.url}/v2/app/blobs/${layer.digest}`;
    r.faults.ignoreRange = true;
    const ignored = await get(url, { range: 'bytes=10-19' });
    expect(ignored.status).toBe(200);
    expect(ignored.body.equals(layer.blob)).toBe(true);
    r.faults.ignoreRange = false;
    r.faults.wrongContentRange = true;
    const wrong = await get(url, { range: 'bytes=10-19' });
    expect(wrong.status).toBe(206);
    expect(wrong.header('content-range')).not.toBe(`bytes 10-19/${layer.size}`);
    expect(wrong.body.equals(layer.blob.subarray(10, 20))).toBe(false);
  });

  it('injects a status for a bounded number of matching requests', async () => {
    const r = await start();
    r.addImage('app', 'v1', await image());
    r.faults.status = { path: /\/manifests\//, status: 503, times: 2, headers: { 'Retry-After': '1' } };
    const a = await get(`${r.url}/v2/app/manifests/v1`);
    expect(a.status).toBe(503);
    expect(a.header('retry-after')).toBe('1');
    expect((await get(`${r.url}/v2/`)).status).toBe(200);
    expect((await get(`${r.url}/v2/app/manifests/v1`)).status).toBe(503);
    expect((await get(`${r.url}/v2/app/manifests/v1`)).status).toBe(200);
    expect(r.faults.status.times).toBe(0);
  });

  it('redirects blob GETs to another origin, and logs whether Authorization came along', async () => {
    const a = await start({ auth: { type: 'basic', username: 'u', password: 'p' } });
    const b = await start();
    const im = await image();
    a.addImage('app', 'v1', im);
    b.addImage('app', 'v1', im);
    a.faults.redirectBlobsTo = b.url;
    const layer = im.layers[0]!;
    const auth = { authorization: `Basic ${Buffer.from('u:p').toString('base64')}` };
    const res = await request(`${a.url}/v2/app/blobs/${layer.digest}?x=1`, { headers: auth });
    await res.body.dump();
    expect(res.statusCode).toBe(307);
    expect(res.headers.location).toBe(`${b.url}/v2/app/blobs/${layer.digest}?x=1`);
    // HEAD is answered directly.
    expect((await get(`${a.url}/v2/app/blobs/${layer.digest}`, auth, 'HEAD')).status).toBe(200);

    const followed = await get(String(res.headers.location));
    expect(followed.body.equals(layer.blob)).toBe(true);
    expect(a.stats.requests.map((q) => q.authorization)).toEqual([true, true]);
    expect(b.stats.requests.map((q) => [q.path, q.authorization])).toEqual([[`/v2/app/blobs/${layer.digest}?x=1`, false]]);
    expect(a.stats.blobBytesServed(layer.digest)).toBe(0);
    expect(b.stats.blobBytesServed(layer.digest)).toBe(layer.size);
  });

  it('drops or stalls a blob body after some bytes, and throttles', async () => {
    const r = await start();
    const big = Buffer.alloc(300_000, 7);
    const digest = sha256Digest(big);
    r.addBlob('app', digest, big);
    const url = `${r.url}/v2/app/blobs/${digest}`;

    r.faults.dropAfter = { bytes: 1000, times: 1 };
    const dropped = await request(url);
    expect(dropped.statusCode).toBe(200);
    await expect(dropped.body.arrayBuffer()).rejects.toThrow();
    expect(r.stats.blobBytesServed(digest)).toBe(1000);
    expect((await get(url)).body.equals(big)).toBe(true);

    r.faults.stallAfter = { bytes: 2000, times: 1 };
    const stalled = await request(url, { bodyTimeout: 300 });
    await expect(stalled.body.arrayBuffer()).rejects.toThrow();
    expect(r.stats.requests.at(-1)?.bytesSent).toBe(2000);

    r.faults.bytesPerSecond = 1_000_000;
    const t0 = performance.now();
    expect((await get(url)).body.equals(big)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThan(200);
  });

  it('holds matching requests until the gate opens, and answers the others at once', async () => {
    const r = await start();
    const im = await image();
    r.addImage('app', 'v1', im);
    let open!: () => void;
    r.faults.hold = { path: /\/manifests\//, until: new Promise<void>((resolve) => (open = resolve)) };
    let answered = false;
    const held = get(`${r.url}/v2/app/manifests/v1`).then((res) => ((answered = true), res));
    expect((await get(`${r.url}/v2/app/blobs/${im.configDigest}`)).body.equals(im.config)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(answered).toBe(false);
    open();
    expect((await held).body.equals(im.manifest)).toBe(true);
    expect((await get(`${r.url}/v2/app/manifests/v1`)).body.equals(im.manifest)).toBe(true);
  });

  it('lies in Docker-Content-Digest when told, and keeps the request log bounded', async () => {
    const r = await start({ maxLogEntries: 3 });
    const im = await image();
    r.addImage('app', 'v1', im);
    r.faults.wrongDockerContentDigest = true;
    const res = await get(`${r.url}/v2/app/manifests/v1`);
    expect(res.body.equals(im.manifest)).toBe(true);
    expect(res.header('docker-content-digest')).not.toBe(im.manifestDigest);
    for (let i = 0; i < 5; i++) await get(`${r.url}/v2/?n=${i}`);
    expect(r.stats.requests.map((q) => q.path)).toEqual(['/v2/?n=2', '/v2/?n=3', '/v2/?n=4']);
    r.stats.reset();
    expect(r.stats.requests).toEqual([]);
  });

  it('serves the referrers API when asked: manifests whose subject names the digest, filtered by artifactType', async () => {
    const im = await image();
    const referrer = (artifactType: string) =>
      Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: MediaTypes.OCI_MANIFEST,
          artifactType,
          subject: im.manifestDescriptor,
          config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: sha256Digest(Buffer.from('{}')), size: 2 },
          layers: [],
          annotations: { a: artifactType },
        }),
      );
    const sig = referrer('application/vnd.example.sig');
    const sbom = referrer('application/vnd.example.sbom');
    const without = await start();
    without.addImage('app', 'v1', im);
    expect((await get(`${without.url}/v2/app/referrers/${im.manifestDigest}`)).status).toBe(404);

    const r = await start({ referrers: true });
    r.addImage('app', 'v1', im);
    r.addManifest('app', 'sig', sig, MediaTypes.OCI_MANIFEST);
    r.addManifest('app', sha256Digest(sbom), sbom, MediaTypes.OCI_MANIFEST);
    const all = await get(`${r.url}/v2/app/referrers/${im.manifestDigest}`);
    expect(all.status).toBe(200);
    expect(all.header('content-type')).toBe(MediaTypes.OCI_INDEX);
    expect(all.header('oci-filters-applied')).toBeUndefined();
    const list = JSON.parse(all.body.toString()) as {
      mediaType: string;
      manifests: { digest: string; size: number; artifactType: string; annotations: object }[];
    };
    expect(list.mediaType).toBe(MediaTypes.OCI_INDEX);
    // The referrer added under a tag is listed once, not once more for its digest.
    expect(list.manifests.map((m) => [m.digest, m.size, m.artifactType])).toEqual([
      [sha256Digest(sig), sig.length, 'application/vnd.example.sig'],
      [sha256Digest(sbom), sbom.length, 'application/vnd.example.sbom'],
    ]);
    expect(list.manifests[0]!.annotations).toEqual({ a: 'application/vnd.example.sig' });
    const filtered = await get(`${r.url}/v2/app/referrers/${im.manifestDigest}?artifactType=${encodeURIComponent('application/vnd.example.sbom')}`);
    expect(filtered.header('oci-filters-applied')).toBe('artifactType');
    expect((JSON.parse(filtered.body.toString()) as { manifests: { digest: string }[] }).manifests.map((m) => m.digest)).toEqual([sha256Digest(sbom)]);
    expect((JSON.parse((await get(`${r.url}/v2/app/referrers/${sha256Digest(sig)}`)).body.toString()) as { manifests: unknown[] }).manifests).toEqual([]);
    expect((await get(`${r.url}/v2/app/referrers/latest`)).status).toBe(400);
  });
});
