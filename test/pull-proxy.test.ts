// Pulls through a real HTTP proxy (Debian's tinyproxy) on loopback, from the real distribution
// registry: plain HTTP in absolute form, HTTPS through CONNECT tunnels (manifests, tokens and the
// range client's own connections alike), NO_PROXY, proxy credentials, and a proxy that refuses.
//
// The registry is on loopback, and loopback is never proxied (as containerd): the library's pulls
// here ask for it with `proxyLoopback`, which no environment variable sets; the binaries' tests
// check the product rule itself, and reach the proxy with a registry name that is not loopback.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFastpullError, openStore, parseReference, pull, type ProxySettings } from '@fastpull/core';
import { RegistryClient } from '@fastpull/core/registry';
import {
  lacksRegistry,
  lacksTinyproxy,
  pushImage,
  sampleImage,
  startDistribution,
  startTinyproxy,
  type BuiltImage,
  type Tinyproxy,
} from '@fastpull/core/testing';
import { corruptBlobs, failure, runCli, runCliAsync, serveDaemon, stopDaemon, tempDir } from './helpers.js';

const CHUNK = 64 * 1024;

describe.skipIf(lacksRegistry() || lacksTinyproxy())('pulls through an HTTP proxy', () => {
  const work = tempDir('proxy');
  let image: BuiltImage;
  let plain: Awaited<ReturnType<typeof startDistribution>>;
  let secure: Awaited<ReturnType<typeof startDistribution>>;
  let proxy: Tinyproxy;
  /** hosts.toml that trusts the TLS registry's certificate. */
  let hostsDir: string;
  let n = 0;

  beforeAll(async () => {
    const tls = join(work.dir, 'tls');
    mkdirSync(tls);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(tls, 'key.pem'),
        '-out',
        join(tls, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    image = await sampleImage(45, { layers: 2 });
    [plain, secure, proxy] = await Promise.all([
      startDistribution({ dir: join(work.dir, 'plain') }),
      startDistribution({ dir: join(work.dir, 'secure'), tls: { certificate: join(tls, 'cert.pem'), key: join(tls, 'key.pem') } }),
      startTinyproxy(),
    ]);
    await pushImage(plain.url, 'p/app', '1', image);
    await pushImage(secure.url, 'p/app', '1', image, { ca: readFileSync(join(tls, 'cert.pem')) });
    hostsDir = join(work.dir, 'hosts');
    mkdirSync(join(hostsDir, secure.host), { recursive: true });
    writeFileSync(join(hostsDir, secure.host, 'hosts.toml'), `server = "${secure.url}"\nca = "${join(tls, 'cert.pem')}"\n`);
  });
  afterAll(async () => {
    await Promise.all([plain?.stop(), secure?.stop(), proxy?.stop()]);
    work.cleanup();
  });

  /** What the proxy logged while `run` ran. */
  async function logged(run: () => Promise<unknown>, by: Tinyproxy = proxy): Promise<string[]> {
    const before = by.requests().length;
    await run();
    return by.requests().slice(before);
  }

  it('pulls over plain HTTP through the proxy, each range an absolute-form GET', async () => {
    const root = join(work.dir, `root${n++}`);
    const settings: ProxySettings = { httpProxy: proxy.url, proxyLoopback: true };
    const lines = await logged(() => pull(`${plain.host}/p/app:1`, { root, plainHttp: true, proxy: settings, chunkSize: CHUNK }));
    expect(lines).toContain(`GET http://${plain.host}/v2/p/app/manifests/1 HTTP/1.1`);
    for (const layer of image.layers) {
      const gets = lines.filter((l) => l === `GET http://${plain.host}/v2/p/app/blobs/${layer.digest} HTTP/1.1`);
      // One GET per range: the layer came through the proxy in ranges, not in one piece.
      expect(gets.length).toBe(Math.ceil(layer.size / CHUNK));
    }
    expect(lines.every((l) => !l.startsWith('CONNECT'))).toBe(true);
    expect(await openStore(root).images.list()).toHaveLength(1);
    expect(corruptBlobs(root)).toEqual([]);
  });

  it('pulls over HTTPS through CONNECT tunnels, the TLS inside them checked against the registry', async () => {
    const root = join(work.dir, `root${n++}`);
    const lines = await logged(() =>
      pull(`${secure.host}/p/app:1`, { root, hostsDir, proxy: { httpsProxy: proxy.url, proxyLoopback: true }, chunkSize: CHUNK }),
    );
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((l) => l === `CONNECT ${secure.host} HTTP/1.1`)).toBe(true);
    expect(await openStore(root).images.list()).toHaveLength(1);
    expect(corruptBlobs(root)).toEqual([]);
  });

  /** Reads the first range of a layer through `client`'s range client: whether its body came off the socket in place, and its bytes. */
  async function readRange(client: RegistryClient, registry: string): Promise<{ direct: boolean; received: number }> {
    const layer = image.layers[0]!;
    const res = await client.request(parseReference(`${registry}/p/app:1`), `blobs/${layer.digest}`, {
      headers: { range: `bytes=0-${CHUNK - 1}` },
      blob: true,
    });
    expect(res.statusCode).toBe(206);
    let received = 0;
    await res.direct?.consume((chunk) => {
      received += chunk.length;
      return undefined;
    });
    return { direct: res.direct !== undefined, received };
  }

  it('reads blob ranges on the range client through a tunnel, and in absolute form over plain HTTP', async () => {
    const secureClient = new RegistryClient({ hostsDir, proxy: { httpsProxy: proxy.url, proxyLoopback: true } });
    const plainClient = new RegistryClient({ plainHttp: true, proxy: { httpProxy: proxy.url, proxyLoopback: true } });
    try {
      let got: { direct: boolean; received: number } | undefined;
      let lines = await logged(async () => (got = await readRange(secureClient, secure.host)));
      // `direct`: the body was read off the socket in place, by the range client, not node:http.
      expect(got).toEqual({ direct: true, received: CHUNK });
      expect(lines).toEqual([`CONNECT ${secure.host} HTTP/1.1`]);
      lines = await logged(async () => (got = await readRange(plainClient, plain.host)));
      expect(got).toEqual({ direct: true, received: CHUNK });
      expect(lines).toEqual([`GET http://${plain.host}/v2/p/app/blobs/${image.layers[0]!.digest} HTTP/1.1`]);
    } finally {
      await Promise.all([secureClient.close(), plainClient.close()]);
    }
  });

  it('fails a range whose tunnel the proxy refuses with the stable error, and the range client takes the next request', async () => {
    const strict = await startTinyproxy({ connectPorts: [443] });
    const client = new RegistryClient({ hostsDir, proxy: { httpsProxy: `http://puller:s3cret-word@127.0.0.1:${strict.port}`, proxyLoopback: true } });
    try {
      for (let i = 0; i < 2; i++) {
        let error: unknown;
        await readRange(client, secure.host).catch((e: unknown) => (error = e));
        expect(isFastpullError(error) && error.code).toBe('NETWORK_ERROR');
        expect(isFastpullError(error) && error.details).toMatchObject({ proxy: strict.url, proxyStatus: 403 });
        expect((error as Error).message).not.toContain('s3cret');
      }
      expect(strict.requests().filter((l) => l === `CONNECT ${secure.host} HTTP/1.1`)).toHaveLength(2);
    } finally {
      await client.close();
      await strict.stop();
    }
  });

  it('goes direct to a host NO_PROXY names', async () => {
    const root = join(work.dir, `root${n++}`);
    const settings: ProxySettings = {
      httpsProxy: proxy.url,
      httpProxy: proxy.url,
      noProxy: `other.example,127.0.0.1:${secure.host.split(':')[1]}`,
      proxyLoopback: true,
    };
    const lines = await logged(() => pull(`${secure.host}/p/app:1`, { root, hostsDir, proxy: settings }));
    expect(lines).toEqual([]);
    expect(await openStore(root).images.list()).toHaveLength(1);
  });

  it('never proxies a loopback registry for the CLI, whatever HTTP_PROXY and HTTPS_PROXY say', async () => {
    const root = join(work.dir, `root${n++}`);
    let r: ReturnType<typeof runCli> | undefined;
    const lines = await logged(async () => {
      r = runCli(['pull', '--root', root, '-q', `${plain.host}/p/app:1`], { HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: '' });
    });
    expect(r!.stderr).toBe('');
    expect(r!.status).toBe(0);
    expect(lines).toEqual([]);
  });

  it('sends the credentials of the proxy URL, and names the proxy without them when they are refused', async () => {
    const guarded = await startTinyproxy({ basicAuth: { user: 'puller', password: 's3cret-word' } });
    try {
      const ref = `${secure.host}/p/app:1`;
      const via = (url: string): ProxySettings => ({ httpsProxy: url, proxyLoopback: true });
      const root = join(work.dir, `root${n++}`);
      const lines = await logged(
        () => pull(ref, { root, hostsDir, proxy: via(`http://puller:s3cret-word@127.0.0.1:${guarded.port}`), chunkSize: CHUNK }),
        guarded,
      );
      expect(lines.length).toBeGreaterThan(0);
      expect(await openStore(root).images.list()).toHaveLength(1);

      for (const url of [`http://puller:wrong-s3cret@127.0.0.1:${guarded.port}`, guarded.url]) {
        const e = await failure(pull(ref, { root: join(work.dir, `root${n++}`), hostsDir, proxy: via(url) }));
        expect(e.code).toBe('NETWORK_ERROR');
        // tinyproxy answers a CONNECT without good credentials 401, where RFC 9110 says 407.
        expect(e.details).toMatchObject({ proxy: guarded.url });
        expect([401, 407]).toContain(e.details.proxyStatus);
        expect(e.message).toContain(`the proxy ${guarded.url} refused CONNECT ${secure.host}: ${e.details.proxyStatus as number}`);
        expect(e.message).toContain(url === guarded.url ? 'it wants credentials' : 'the credentials in the proxy URL were refused');
        expect(JSON.stringify(e)).not.toContain('s3cret');
        expect(e.message).not.toContain('s3cret');
      }
    } finally {
      await guarded.stop();
    }
  });

  it('fails a pull whose proxy refuses CONNECT with a stable error, from the CLI and from fastpulld, the password in no output', async () => {
    const strict = await startTinyproxy({ connectPorts: [443] });
    const env = { HTTPS_PROXY: `http://puller:s3cret-word@127.0.0.1:${strict.port}`, NO_PROXY: '' };
    // A registry name that is not loopback, so the product's own rule sends it to the proxy; the
    // proxy refuses its port before it resolves the name, so nothing leaves the machine.
    const ref = 'registry.example:5000/p/app:1';
    const root = join(work.dir, `root${n++}`);
    let daemon: Awaited<ReturnType<typeof serveDaemon>> | undefined;
    try {
      let cli: ReturnType<typeof runCli> | undefined;
      const lines = await logged(async () => {
        cli = runCli(['pull', '--root', root, '--json', ref], env);
      }, strict);
      expect(cli!.status).toBe(1);
      expect(lines).toContain('CONNECT registry.example:5000 HTTP/1.1');
      const error = JSON.parse(cli!.stdout.trim().split('\n').at(-1)!) as { type: string; code: string; details: Record<string, unknown> };
      expect(error).toMatchObject({ type: 'error', code: 'NETWORK_ERROR', details: { proxy: strict.url, proxyStatus: 403 } });
      expect(cli!.stdout + cli!.stderr).toContain(`the proxy ${strict.url} refused CONNECT registry.example:5000: 403`);
      expect(cli!.stdout + cli!.stderr).not.toContain('s3cret');

      // fastpull verify reads the registry through the same proxy as a pull.
      const policy = join(work.dir, `policy${n++}.json`);
      writeFileSync(policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
      let verify: ReturnType<typeof runCli> | undefined;
      const verifyLines = await logged(async () => {
        verify = runCli(['verify', '--signature-policy', policy, ref], env);
      }, strict);
      expect(verify!.status).toBe(1);
      expect(verifyLines).toContain('CONNECT registry.example:5000 HTTP/1.1');
      expect(verify!.stderr).toContain(`the proxy ${strict.url} refused CONNECT registry.example:5000: 403`);
      expect(verify!.stdout + verify!.stderr).not.toContain('s3cret');

      const socket = join(work.dir, 'fastpulld.sock');
      daemon = await serveDaemon(['--socket', socket, '--root', join(work.dir, `root${n++}`), '--log-level', 'debug'], { env });
      const viaDaemon = await runCliAsync(['pull', ref], { FASTPULL_ADDRESS: socket, HTTPS_PROXY: '' });
      expect(viaDaemon.status).toBe(1);
      expect(viaDaemon.stderr).toContain(`the proxy ${strict.url} refused CONNECT registry.example:5000: 403`);
      expect(strict.requests().filter((l) => l === 'CONNECT registry.example:5000 HTTP/1.1').length).toBeGreaterThan(
        lines.filter((l) => l.startsWith('CONNECT')).length,
      );
      await stopDaemon(daemon);
      expect(JSON.stringify(daemon.logs) + daemon.stderr() + viaDaemon.stdout + viaDaemon.stderr).not.toContain('s3cret');
    } finally {
      await stopDaemon(daemon);
      await strict.stop();
    }
  });
});
