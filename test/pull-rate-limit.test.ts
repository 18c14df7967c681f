// The network rate limit end to end against the real distribution registry on loopback, through the
// library, `fastpull pull --rate-limit` and fastpulld's rate_limit: a limited pull takes at least
// (bytes - burst) / rate and lands every byte verified; pulls that share a limit stay under it
// together; SIGHUP changes fastpulld's; a caller without a limit joining a limited pull lifts it.
// Only lower bounds on time: a loaded machine may be slower, never faster.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBurst, openStore, pull, RateLimiter, type ImageRecord } from '@fastpull/core';
import { buildImage, lacksRegistry, Prng, pushImage, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { runCliAsync, serveDaemon, stopDaemon, tempDir } from './helpers.js';

const work = tempDir('rate-limit');
afterAll(() => work.cleanup());

const MiB = 1024 ** 2;

/** Two layers of incompressible bytes, so the blobs are as large as their files. */
async function noiseImage(seed: number, perLayer: number): Promise<{ image: BuiltImage; files: Map<string, string> }> {
  const rng = new Prng(seed);
  const files = new Map<string, string>();
  const layers = [0, 1].map((i) => {
    const content = rng.bytes(perLayer);
    files.set(`noise${i}.bin`, createHash('sha256').update(content).digest('hex'));
    return [{ type: 'file' as const, path: `noise${i}.bin`, content }];
  });
  return { image: await buildImage({ layers }), files };
}

/** Bytes of the image's layer blobs. */
function layerBytes(image: BuiltImage): number {
  return image.layers.reduce((n, l) => n + l.blob.length, 0);
}

/** Every file of the pulled image, hashed from its snapshot, is the one built. */
function expectFiles(root: string, record: ImageRecord, files: Map<string, string>): void {
  const store = openStore(root);
  for (const [i, layer] of record.layers.entries()) {
    const path = join(store.snapshots.fsPath(layer.chainID), `noise${i}.bin`);
    expect(createHash('sha256').update(readFileSync(path)).digest('hex'), path).toBe(files.get(`noise${i}.bin`));
  }
}

type Noise = { image: BuiltImage; files: Map<string, string> };

describe.skipIf(lacksRegistry())('network rate limit', () => {
  let registry: DistributionRegistry;
  const images: Noise[] = [];
  let a: Noise;
  let b: Noise;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    for (const [i, name] of ['a', 'b', 'c', 'd', 'e'].entries()) {
      const n = await noiseImage(71 + i, 1.5 * MiB);
      await pushImage(registry.url, `rate/${name}`, '1', n.image);
      images.push(n);
    }
    [a, b] = images as [Noise, Noise];
  });
  afterAll(async () => {
    await registry?.stop();
  });

  it('takes at least (bytes - burst) / rate, in ranges, and lands every file whole and verified', async () => {
    const rate = 1 * MiB;
    const root = join(work.dir, 'one');
    const started = performance.now();
    const { image } = await pull(`${registry.host}/rate/a:1`, { root, rateLimit: rate, chunkSize: 256 * 1024 });
    const seconds = (performance.now() - started) / 1000;
    const bound = (layerBytes(a.image) - defaultBurst(rate)) / rate;
    console.log(
      `rate limit ${rate / MiB} MiB/s: ${(layerBytes(a.image) / MiB).toFixed(2)} MiB of layers in ${seconds.toFixed(2)} s (at least ${bound.toFixed(2)} s)`,
    );
    expect(seconds).toBeGreaterThanOrEqual(bound);
    expect(image.manifest.digest).toBe(a.image.manifestDigest);
    expectFiles(root, image, a.files);
  });

  it('holds pulls that share one RateLimiter to its rate together, manifests and configs counted', async () => {
    const rate = 2 * MiB;
    const link = new RateLimiter(rate);
    const started = performance.now();
    const [ra, rb] = await Promise.all([
      pull(`${registry.host}/rate/a:1`, { root: join(work.dir, 'shared-a'), rateLimit: link, chunkSize: 256 * 1024 }),
      pull(`${registry.host}/rate/b:1`, { root: join(work.dir, 'shared-b'), rateLimit: link, chunkSize: 256 * 1024, priority: 'low' }),
    ]);
    const seconds = (performance.now() - started) / 1000;
    const bytes = layerBytes(a.image) + layerBytes(b.image);
    expect(seconds).toBeGreaterThanOrEqual((bytes - link.burst) / rate);
    // Layers, and each image's manifest and config, went through the one limiter.
    const metadata = a.image.manifest.length + a.image.config.length + b.image.manifest.length + b.image.config.length;
    expect(link.bytesGranted).toBe(bytes + metadata);
    expect(link.waiting).toBe(0);
    expectFiles(join(work.dir, 'shared-a'), ra.image, a.files);
    expectFiles(join(work.dir, 'shared-b'), rb.image, b.files);
  });

  it('fastpull pull --rate-limit: at least (bytes - burst) / rate, every file verified; a bad rate is a usage error', async () => {
    const c = images[2]!;
    const rate = 1 * MiB;
    const root = join(work.dir, 'cli');
    const started = performance.now();
    const r = await runCliAsync(['pull', '--root', root, '--rate-limit', '1MiB', '--chunk-size', '256KiB', '--json', `${registry.host}/rate/c:1`]);
    const seconds = (performance.now() - started) / 1000;
    expect(r.status, r.stderr).toBe(0);
    expect(seconds).toBeGreaterThanOrEqual((layerBytes(c.image) - defaultBurst(rate)) / rate);
    const done = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { type: string; image: ImageRecord };
    expect(done.type).toBe('done');
    expectFiles(root, done.image, c.files);
    for (const bad of ['fast', '-5MiB', '10 parsecs']) {
      const u = await runCliAsync(['pull', '--root', join(work.dir, 'bad'), '--rate-limit', bad, `${registry.host}/rate/c:1`]);
      expect(u.status, bad).toBe(2);
      expect(u.stderr).toContain(`--rate-limit ${JSON.stringify(bad)}: want bytes per second such as 50MiB, 1.5GB or 800KiB (0 or none: no limit)`);
      expect(u.stderr).toContain('(INVALID_ARGUMENT)');
    }
  });

  it('fastpulld rate_limit: one budget for its pulls together; SIGHUP changes it; a pull may ask for less', async () => {
    const [, , , d, e] = images as [Noise, Noise, Noise, Noise, Noise];
    const config = join(work.dir, 'fastpulld.toml');
    const body = `root = "${join(work.dir, 'daemon-root')}"\nsnapshotter_socket = ""\nchunk_size = "256KiB"\n`;
    writeFileSync(config, `${body}rate_limit = "2MiB"\n`);
    const socket = join(work.dir, 'rate.sock');
    const daemon = await serveDaemon(['--config', config, '--socket', socket]);
    const client = new FastpullClient(socket);
    try {
      expect(daemon.logs.find((l) => l.msg === 'fastpulld serving')).toMatchObject({ rateLimit: 2 * MiB });
      // Two pulls at once share the 2 MiB/s.
      let rate = 2 * MiB;
      let started = performance.now();
      const [ra, rb] = await Promise.all([client.pull(`${registry.host}/rate/a:1`), client.pull(`${registry.host}/rate/b:1`, { priority: 'low' })]);
      let seconds = (performance.now() - started) / 1000;
      expect(seconds).toBeGreaterThanOrEqual((layerBytes(a.image) + layerBytes(b.image) - defaultBurst(rate)) / rate);
      expectFiles(ra.root, ra.image, a.files);
      expectFiles(rb.root, rb.image, b.files);

      // Halved on SIGHUP: a pull alone now takes as long as the two did together.
      writeFileSync(config, `${body}rate_limit = "1MiB"\n`);
      daemon.proc.kill('SIGHUP');
      await daemon.waitLog((l) => l.msg === 'configuration reloaded' && l.rateLimit === 1 * MiB);
      rate = 1 * MiB;
      started = performance.now();
      const rd = await client.pull(`${registry.host}/rate/d:1`);
      seconds = (performance.now() - started) / 1000;
      expect(seconds).toBeGreaterThanOrEqual((layerBytes(d.image) - defaultBurst(rate)) / rate);
      expectFiles(rd.root, rd.image, d.files);

      // Lifted; a pull through the CLI asks for 1 MiB/s of its own (rate_limit_bytes_per_second).
      writeFileSync(config, body);
      daemon.proc.kill('SIGHUP');
      await daemon.waitLog((l) => l.msg === 'configuration reloaded' && l.rateLimit === 0);
      started = performance.now();
      const r = await runCliAsync(['pull', '--address', socket, '--rate-limit', '1MiB', '--json', `${registry.host}/rate/e:1`]);
      seconds = (performance.now() - started) / 1000;
      expect(r.status, r.stderr).toBe(0);
      expect(seconds).toBeGreaterThanOrEqual((layerBytes(e.image) - defaultBurst(rate)) / rate);
      const done = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { image: ImageRecord; root: string };
      expectFiles(done.root, done.image, e.files);

      // A bad value keeps the running budget.
      writeFileSync(config, `${body}rate_limit = "lots"\n`);
      daemon.proc.kill('SIGHUP');
      const failed = await daemon.waitLog((l) => l.msg === 'reload failed; keeping the running configuration');
      expect(failed.err).toContain('rate_limit "lots": want bytes per second');
    } finally {
      await client.close();
      await stopDaemon(daemon);
    }
  });
  it("a caller without a limit that joins a pull lifts its first caller's limit: the shared pull reads as fast as its loosest caller allows", async () => {
    const c = images[2]!;
    const ref = `${registry.host}/rate/c:1`;
    const socket = join(work.dir, 'join.sock');
    const daemon = await serveDaemon(['--socket', socket, '--root', join(work.dir, 'join-root'), '--snapshotter-socket', '', '--chunk-size', '256KiB']);
    const slow = new FastpullClient(socket);
    const fast = new FastpullClient(socket);
    try {
      // At 1 KiB/s the first caller's pull would take most of an hour past its burst.
      let fetching!: () => void;
      const started = new Promise<void>((r) => (fetching = r));
      const first = slow.pull(ref, { rateLimit: 1024, onProgress: (e) => e.type === 'layer' && e.state === 'fetching' && fetching() });
      await started;
      expect(layerBytes(c.image)).toBeGreaterThan(10 * defaultBurst(1024));
      const second = await fast.pull(ref);
      const line = await daemon.waitLog((l) => l.event === 'pull' && l.image === ref);
      expect(line).toMatchObject({ result: 'ok', callers: 2 });
      const r = await first;
      expect(r.image.manifest.digest).toBe(second.image.manifest.digest);
      expectFiles(r.root, r.image, c.files);
    } finally {
      await slow.close();
      await fast.close();
      await stopDaemon(daemon);
    }
  });
});
