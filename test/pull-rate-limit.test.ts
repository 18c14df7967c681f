// The network rate limit end to end against the real distribution registry on loopback: a limited
// pull takes at least (bytes - burst) / rate and lands every byte verified; pulls that share a limit
// stay under it together. Only lower bounds on time: a loaded machine may be slower, never faster.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBurst, openStore, pull, RateLimiter, type ImageRecord } from '@fastpull/core';
import { buildImage, lacksRegistry, Prng, pushImage, startDistribution, type BuiltImage, type DistributionRegistry } from '@fastpull/core/testing';
import { tempDir } from './helpers.js';

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

describe.skipIf(lacksRegistry())('PullOptions.rateLimit', () => {
  let registry: DistributionRegistry;
  let a: { image: BuiltImage; files: Map<string, string> };
  let b: { image: BuiltImage; files: Map<string, string> };

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    a = await noiseImage(71, 1.5 * MiB);
    b = await noiseImage(72, 1.5 * MiB);
    await pushImage(registry.url, 'rate/a', '1', a.image);
    await pushImage(registry.url, 'rate/b', '1', b.image);
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
    console.log(`rate limit ${rate / MiB} MiB/s: ${(layerBytes(a.image) / MiB).toFixed(2)} MiB of layers in ${seconds.toFixed(2)} s (at least ${bound.toFixed(2)} s)`);
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
});
