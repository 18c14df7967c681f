// Registry mirrors from containerd-style hosts.toml: tried in order, failures fall through to the
// upstream, a mirror without `resolve` serves only content addressed by digest.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, pull } from '@fastpull/core';
import { RegistryConnections } from '@fastpull/core/registry';
import { sampleImage, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import { corruptBlobs, tempDir } from './helpers.js';

const work = tempDir('mirrors');
let image: BuiltImage;
let upstream: LoopbackRegistry;
let mirror: LoopbackRegistry;
let n = 0;

/** Writes `<dir>/<upstream host>/hosts.toml` and returns dir. */
function hostsDir(toml: string): string {
  const dir = join(work.dir, `hosts${n++}`);
  mkdirSync(join(dir, upstream.host), { recursive: true });
  writeFileSync(join(dir, upstream.host, 'hosts.toml'), toml);
  return dir;
}

/** A key and a self-signed certificate for 127.0.0.1, made by openssl in `<work>/<name>`. */
function selfSigned(name: string): { key: Buffer; cert: Buffer; certPath: string } {
  const dir = join(work.dir, name);
  mkdirSync(dir);
  const [keyPath, certPath] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
  const subject = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '1', ...subject], {
    stdio: 'ignore',
  });
  return { key: readFileSync(keyPath), cert: readFileSync(certPath), certPath };
}

beforeAll(async () => {
  image = await sampleImage(8, { layers: 3 });
  upstream = await startLoopbackRegistry();
  mirror = await startLoopbackRegistry();
  upstream.addImage('m/app', '1', image);
  mirror.addImage('m/app', '1', image);
});
afterAll(async () => {
  await upstream.close();
  await mirror.close();
  work.cleanup();
});

const blobBytes = (r: LoopbackRegistry) => image.layers.reduce((s, l) => s + r.stats.blobBytesServed(l.digest), 0);

describe('mirrors from hosts.toml', () => {
  it('fetches from the mirror with its headers and ?ns=, leaving the upstream untouched', async () => {
    upstream.stats.reset();
    mirror.stats.reset();
    const dir = hostsDir(
      `server = "${upstream.url}"\n\n[host."${mirror.url}"]\n  capabilities = ["pull", "resolve"]\n  [host."${mirror.url}".header]\n    X-Mirror-Test = "yes"\n`,
    );
    const root = join(work.dir, `root${n++}`);
    await pull(`${upstream.host}/m/app:1`, { root, hostsDir: dir });
    expect(upstream.stats.requests).toHaveLength(0);
    expect(blobBytes(mirror)).toBe(image.layers.reduce((s, l) => s + l.size, 0));
    expect(mirror.stats.requests.every((r) => r.path.includes(`?ns=${encodeURIComponent(upstream.host)}`))).toBe(true);
    expect(corruptBlobs(root)).toEqual([]);
  });

  it('falls through to the upstream when the mirror fails or lacks the content', async () => {
    upstream.stats.reset();
    mirror.stats.reset();
    mirror.faults.status = { path: /\/blobs\//, status: 503, times: 1000 };
    try {
      const dir = hostsDir(`server = "${upstream.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull", "resolve"]\n`);
      const root = join(work.dir, `root${n++}`);
      const { image: rec } = await pull(`${upstream.host}/m/app:1`, { root, hostsDir: dir });
      expect(rec.manifest.digest).toBe(image.manifestDigest);
      expect(mirror.stats.requests.some((r) => r.path.includes('/manifests/'))).toBe(true);
      expect(blobBytes(upstream)).toBe(image.layers.reduce((s, l) => s + l.size, 0));
    } finally {
      mirror.faults = {};
    }
    // A mirror that is not listening at all.
    const dead = hostsDir(`server = "${upstream.url}"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n  dial_timeout = "200ms"\n`);
    upstream.stats.reset();
    const { image: viaUpstream } = await pull(`${upstream.host}/m/app:1`, { root: join(work.dir, `root${n++}`), hostsDir: dead });
    expect(viaUpstream.manifest.digest).toBe(image.manifestDigest);
    // Everything came from the upstream: the manifest, and every layer whole.
    expect(upstream.stats.requests.some((r) => r.path.includes('/manifests/'))).toBe(true);
    expect(blobBytes(upstream)).toBe(image.layers.reduce((s, l) => s + l.size, 0));
  });

  it('falls back to the upstream when the mirror is slow', async () => {
    upstream.stats.reset();
    mirror.stats.reset();
    mirror.faults.bytesPerSecond = 8 * 1024;
    try {
      const dir = hostsDir(`server = "${upstream.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull", "resolve"]\n`);
      const root = join(work.dir, `root${n++}`);
      await pull(`${upstream.host}/m/app:1`, { root, hostsDir: dir, stragglerFloor: 64 * 1024, stragglerWindowMs: 300 });
      expect(blobBytes(upstream)).toBeGreaterThan(0);
      expect(corruptBlobs(root)).toEqual([]);
    } finally {
      mirror.faults = {};
    }
  });

  it('asks a mirror without resolve only for content by digest', async () => {
    upstream.stats.reset();
    mirror.stats.reset();
    const dir = hostsDir(`server = "${upstream.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull"]\n`);
    const root = join(work.dir, `root${n++}`);
    await pull(`${upstream.host}/m/app:1`, { root, hostsDir: dir });
    const tagRequests = (r: LoopbackRegistry) => r.stats.requests.filter((q) => q.path.includes('/manifests/1'));
    expect(tagRequests(mirror)).toHaveLength(0);
    expect(tagRequests(upstream).length).toBeGreaterThan(0);
    expect(blobBytes(mirror)).toBe(image.layers.reduce((s, l) => s + l.size, 0));
    expect(blobBytes(upstream)).toBe(0);
    expect(await openStore(root).images.list()).toHaveLength(1);
  });

  it('talks TLS to a host with the CA or skip_verify that hosts.toml gives', async () => {
    const tls = selfSigned('tls');
    const secure = await startLoopbackRegistry({ tls: { key: tls.key, cert: tls.cert } });
    try {
      secure.addImage('m/app', '1', image);
      const ref = `${upstream.host}/m/app:1`;
      const only = (toml: string) => hostsDir(`server = "${secure.url}"\n${toml}`);
      // Without the CA the certificate is unknown: nothing is fetched.
      await expect(pull(ref, { root: join(work.dir, `root${n++}`), hostsDir: only('') })).rejects.toMatchObject({ code: 'NETWORK_ERROR' });
      await pull(ref, { root: join(work.dir, `root${n++}`), hostsDir: only(`ca = "${tls.certPath}"\n`) });
      await pull(ref, { root: join(work.dir, `root${n++}`), hostsDir: only('skip_verify = true\n') });
      expect(image.layers.every((l) => secure.stats.blobBytesServed(l.digest) === 2 * l.size)).toBe(true);
    } finally {
      await secure.close();
    }
  });

  it('asks a host with its own CA for tokens through that CA, and a long-lived puller keeps its pool', async () => {
    const tls = selfSigned('tls-token');
    // The token realm is on the registry itself, so only the CA of hosts.toml can vouch for it.
    const secure = await startLoopbackRegistry({
      tls: { key: tls.key, cert: tls.cert },
      auth: { type: 'bearer' },
    });
    const connections = new RegistryConnections();
    try {
      secure.addImage('m/app', '1', image);
      secure.addImage('m/app', '2', image);
      const dir = hostsDir(`server = "${secure.url}"\nca = "${tls.certPath}"\n`);
      await pull(`${upstream.host}/m/app:1`, { root: join(work.dir, `root${n++}`), hostsDir: dir, engine: { connections } });
      expect(secure.stats.tokensIssued).toBe(1);
      await pull(`${upstream.host}/m/app:2`, { root: join(work.dir, `root${n++}`), hostsDir: dir, engine: { connections } });
      // The second pull found the host's pool (same CA bytes), whose token it reused.
      expect(secure.stats.tokensIssued).toBe(1);
    } finally {
      await connections.close();
      await secure.close();
    }
  });

  it('gives a mirror only its own credentials', async () => {
    const guarded = await startLoopbackRegistry({ auth: { type: 'basic', username: 'up', password: 'up-pass' } });
    try {
      guarded.addImage('m/app', '1', image);
      mirror.stats.reset();
      const dir = join(work.dir, `hosts${n++}`);
      mkdirSync(join(dir, guarded.host), { recursive: true });
      writeFileSync(join(dir, guarded.host, 'hosts.toml'), `server = "${guarded.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull", "resolve"]\n`);
      const asked: string[] = [];
      await pull(`${guarded.host}/m/app:1`, {
        root: join(work.dir, `root${n++}`),
        hostsDir: dir,
        credentials: (host) => {
          asked.push(host);
          return host === guarded.host ? { username: 'up', password: 'up-pass' } : undefined;
        },
      });
      // The open mirror served everything; the upstream's password was never sent to it.
      expect(mirror.stats.requests.length).toBeGreaterThan(0);
      expect(mirror.stats.requests.every((r) => !r.authorization)).toBe(true);
      expect(asked).not.toContain(guarded.host);
    } finally {
      await guarded.close();
    }
  });
});
