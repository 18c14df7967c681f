// Which hosts a request goes to: hosts.toml mirrors with the capability it needs, in file order,
// then the upstream; demoted hosts last; and the same order seen by real loopback registries.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReference } from '../oci/reference.js';
import { sampleImage } from '../testing/sample.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import { discard } from './response.js';
import { Endpoints } from './endpoints.js';

const work = mkdtempSync(join(tmpdir(), 'fastpull-endpoints-'));
const pool = new Agent();
let n = 0;

/** A hosts directory holding `toml` as the hosts.toml of `registry`. */
function hostsDir(registry: string, toml: string): string {
  const dir = join(work, `hosts${n++}`);
  mkdirSync(join(dir, registry), { recursive: true });
  writeFileSync(join(dir, registry, 'hosts.toml'), toml);
  return dir;
}

const endpoints = (dir: string | undefined) => new Endpoints({ dispatcher: pool, plainHttp: false, hostsDir: dir });

afterAll(async () => {
  await pool.close();
  rmSync(work, { recursive: true, force: true });
});

describe('Endpoints', () => {
  const ref = parseReference('registry.example/team/app:1');

  it('is the upstream alone without a hosts directory, or without a directory for the registry', async () => {
    expect(await endpoints(undefined).for(ref, 'resolve')).toMatchObject([
      { origin: 'https://registry.example', prefix: '/v2', query: '', credentialsFor: 'registry.example' },
    ]);
    const other = hostsDir('elsewhere.example', '[host."https://m"]\n');
    expect((await endpoints(other).for(ref, 'pull')).map((e) => e.origin)).toEqual(['https://registry.example']);
    expect(endpoints(undefined).upstream(parseReference('docker.io/library/ubuntu')).origin).toBe('https://registry-1.docker.io');
  });

  it('puts the mirrors with the capability first, in file order, then the server', async () => {
    const dir = hostsDir(
      'registry.example',
      [
        'server = "https://upstream.example"',
        '[host."https://digests-only.example"]',
        '  capabilities = ["pull"]',
        '[host."https://push-only.example"]',
        '  capabilities = ["push"]',
        '[host."http://both.example:5000/cache"]',
        '  capabilities = ["pull", "resolve"]',
        '  override_path = true',
        '  [host."http://both.example:5000/cache".header]',
        '    X-Tenant = ["a", "b"]',
      ].join('\n'),
    );
    const eps = endpoints(dir);
    expect((await eps.for(ref, 'resolve')).map((e) => e.origin)).toEqual(['http://both.example:5000', 'https://upstream.example']);
    const pull = await eps.for(ref, 'pull');
    expect(pull.map((e) => e.origin)).toEqual(['https://digests-only.example', 'http://both.example:5000', 'https://upstream.example']);
    // A mirror learns the upstream from ?ns= and is asked for its own credentials; its path and headers are its own.
    expect(pull[1]).toMatchObject({ prefix: '/cache', query: '?ns=registry.example', credentialsFor: 'both.example:5000', headers: { 'x-tenant': 'a, b' } });
    expect(pull[2]).toMatchObject({ prefix: '/v2', query: '', credentialsFor: 'registry.example', headers: {} });
    // Hosts without TLS settings of their own share the client's pool.
    expect(pull.every((e) => e.dispatcher === pool)).toBe(true);
  });

  it('refuses a configuration that leaves no host for an operation, and reads it again once fixed', async () => {
    const dir = hostsDir('registry.example', 'server = "https://upstream.example"\ncapabilities = ["pull"]\n');
    const eps = endpoints(dir);
    await expect(eps.for(ref, 'resolve')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('no host that can resolve') });
    expect((await eps.for(ref, 'pull')).map((e) => e.origin)).toEqual(['https://upstream.example']);
    writeFileSync(join(dir, 'registry.example', 'hosts.toml'), 'server = "https://upstream.example"\n');
    expect((await eps.for(ref, 'resolve')).map((e) => e.origin)).toEqual(['https://upstream.example']);
  });

  it('names a TLS file that hosts.toml gives but cannot be read', async () => {
    const dir = hostsDir('registry.example', '[host."https://m.example"]\n  ca = "missing-ca.pem"\n');
    await expect(endpoints(dir).for(ref, 'pull')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(join(dir, 'registry.example', 'missing-ca.pem')),
    });
  });

  it('moves a demoted host behind the others, for that registry only', async () => {
    const dir = hostsDir('registry.example', '[host."https://a.example"]\n[host."https://b.example"]\n');
    const eps = endpoints(dir);
    eps.demote(ref, 'https://a.example');
    expect((await eps.for(ref, 'pull')).map((e) => e.origin)).toEqual(['https://b.example', 'https://registry.example', 'https://a.example']);
    const same = parseReference('registry.example/other:1');
    expect((await eps.for(same, 'pull')).at(-1)!.origin).toBe('https://a.example');
  });
});

describe('the order requests take, seen by the registries', () => {
  let upstream: LoopbackRegistry;
  let mirror: LoopbackRegistry;

  beforeAll(async () => {
    const image = await sampleImage(5, { layers: 1 });
    upstream = await startLoopbackRegistry();
    mirror = await startLoopbackRegistry();
    upstream.addImage('m/app', '1', image);
    mirror.addImage('m/app', '1', image);
  });
  afterAll(async () => {
    await upstream.close();
    await mirror.close();
  });

  it('asks a mirror without resolve only for content by digest, and falls through a mirror that lacks it', async () => {
    const dir = hostsDir(upstream.host, `server = "${upstream.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull"]\n`);
    const client = new RegistryClient({ hostsDir: dir });
    try {
      const ref = parseReference(`${upstream.host}/m/app:1`);
      const tried: string[] = [];
      const top = await client.fetchManifest(ref, '1');
      expect(mirror.stats.requests).toHaveLength(0);
      const res = await client.request(ref, `manifests/${top.digest}`, { onEndpoint: (o) => tried.push(o) });
      await discard(res);
      expect(res.statusCode).toBe(200);
      expect(tried).toEqual([mirror.url]);
      expect(mirror.stats.requests.map((r) => r.path)).toEqual([`/v2/m/app/manifests/${top.digest}?ns=${encodeURIComponent(upstream.host)}`]);
      // A digest the mirror does not hold: its 404 falls through to the upstream.
      tried.length = 0;
      const missing = `sha256:${'0'.repeat(64)}`;
      const res404 = await client.request(ref, `blobs/${missing}`, { onEndpoint: (o) => tried.push(o) });
      await discard(res404);
      expect(tried).toEqual([mirror.url, upstream.url]);
      expect(res404.statusCode).toBe(404);
    } finally {
      await client.close();
    }
  });
});
