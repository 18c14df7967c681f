// Resolution from a reference to one platform's image: an index followed to the platform's
// manifest on the real CNCF registry; content that does not match its digest refused, on the
// loopback registry that can serve it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { parseReference } from '../oci/reference.js';
import { buildImage, buildIndex, type BuiltImage, type BuiltIndex } from '../testing/builder.js';
import { findDistributionBinary, pushImage, pushIndex, startDistribution, type DistributionRegistry } from '../testing/distribution.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import { lacksRegistry } from '../testing/distribution.js';

const binary = findDistributionBinary();
if (binary === undefined) console.log('resolver.test.ts: skipping the real-registry tests: no docker-registry or registry binary found');

const file = (content: string) => [[{ type: 'file' as const, path: 'etc/arch', content }]];
let amd64: BuiltImage;
let arm64: BuiltImage;
let index: BuiltIndex;

beforeAll(async () => {
  amd64 = await buildImage({ layers: file('amd64\n') });
  arm64 = await buildImage({ layers: file('arm64\n'), platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } });
  index = buildIndex([amd64, arm64]);
});

describe.skipIf(lacksRegistry())('index to platform manifest, on the distribution registry', () => {
  let registry: DistributionRegistry;
  let client: RegistryClient;

  beforeAll(async () => {
    registry = await startDistribution();
    await pushIndex(registry.url, 'multi/app', '1', index);
    await pushImage(registry.url, 'multi/app', 'amd64-only', amd64);
    client = new RegistryClient();
  });
  afterAll(async () => {
    await client?.close();
    await registry?.stop();
  });

  it('follows the index to the manifest of the platform asked for, verified, with its config', async () => {
    const ref = parseReference(`${registry.host}/multi/app:1`);
    const image = await client.resolve(ref, { platform: { os: 'linux', architecture: 'arm64' } });
    expect(image.target).toEqual({ mediaType: MediaTypes.OCI_INDEX, digest: index.digest, size: index.index.length });
    expect(image.indexBytes?.equals(index.index)).toBe(true);
    expect(image.index?.manifests).toHaveLength(2);
    expect(image.manifestDescriptor).toMatchObject({
      digest: arm64.manifestDigest,
      size: arm64.manifest.length,
      platform: { architecture: 'arm64', variant: 'v8' },
    });
    expect(image.manifestBytes.equals(arm64.manifest)).toBe(true);
    expect(image.configBytes.equals(arm64.blobs.get(arm64.configDigest)!)).toBe(true);
    expect(image.manifest.layers.map((l) => l.digest)).toEqual(arm64.layers.map((l) => l.digest));
    expect(image.platform).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });

    const other = await client.resolve(ref, { platform: { os: 'linux', architecture: 'amd64' } });
    expect(other.manifestDescriptor.digest).toBe(amd64.manifestDigest);
  });

  it('names the platforms an index offers when the one asked for is not among them', async () => {
    const ref = parseReference(`${registry.host}/multi/app:1`);
    await expect(client.resolve(ref, { platform: { os: 'linux', architecture: 's390x' } })).rejects.toMatchObject({
      code: 'PLATFORM_NOT_FOUND',
      details: { platform: 'linux/s390x', offered: ['linux/amd64', 'linux/arm64/v8'] },
    });
    // A single manifest whose config names another platform is refused too.
    const single = parseReference(`${registry.host}/multi/app:amd64-only`);
    await expect(client.resolve(single, { platform: { os: 'linux', architecture: 'arm64' } })).rejects.toMatchObject({ code: 'PLATFORM_NOT_FOUND' });
    expect((await client.resolve(single, { platform: { os: 'linux', architecture: 'amd64' } })).index).toBeUndefined();
  });

  it('resolves a reference by digest to the same image', async () => {
    const byDigest = parseReference(`${registry.host}/multi/app@${index.digest}`);
    const image = await client.resolve(byDigest, { platform: { os: 'linux', architecture: 'amd64' } });
    expect(image.manifestDescriptor.digest).toBe(amd64.manifestDigest);
  });
});

describe('content that does not match its digest, from the loopback registry', () => {
  let reg: LoopbackRegistry;
  let client: RegistryClient;
  const platform = { os: 'linux', architecture: 'amd64' };

  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    client = new RegistryClient();
  });
  afterAll(async () => {
    await client.close();
    await reg.close();
  });

  it('refuses a manifest by tag that does not match the Docker-Content-Digest sent with it', async () => {
    reg.addImage('bad/dcd', '1', amd64);
    reg.faults.wrongDockerContentDigest = true;
    try {
      await expect(client.resolve(parseReference(`${reg.host}/bad/dcd:1`), { platform })).rejects.toMatchObject({
        code: 'DIGEST_MISMATCH',
        message: expect.stringContaining('Docker-Content-Digest'),
      });
    } finally {
      reg.faults = {};
    }
  });

  it('refuses a platform manifest whose bytes are not those of the digest the index names', async () => {
    // The index names amd64's manifest; the registry serves arm64's bytes under that digest.
    reg.addManifest('bad/child', '1', index.index, index.mediaType);
    reg.addManifest('bad/child', amd64.manifestDigest, arm64.manifest, arm64.manifestMediaType);
    await expect(client.resolve(parseReference(`${reg.host}/bad/child:1`), { platform })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
  });

  it('refuses a config whose bytes are not those of its digest, and one of another size', async () => {
    const config = amd64.blobs.get(amd64.configDigest)!;
    reg.addManifest('bad/config', '1', amd64.manifest, amd64.manifestMediaType);
    const tampered = Buffer.from(config);
    tampered[tampered.length - 2] = tampered[tampered.length - 2]! ^ 1;
    reg.addBlob('bad/config', amd64.configDigest, tampered);
    await expect(client.resolve(parseReference(`${reg.host}/bad/config:1`), { platform })).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    reg.addBlob('bad/config', amd64.configDigest, Buffer.concat([config, Buffer.from(' ')]));
    await expect(client.resolve(parseReference(`${reg.host}/bad/config:1`), { platform })).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
  });

  it('refuses a manifest by digest that hashes to something else', async () => {
    const wrong = sha256Digest(Buffer.from('another manifest'));
    reg.addManifest('bad/digest', wrong, amd64.manifest, amd64.manifestMediaType);
    await expect(client.fetchManifest(parseReference(`${reg.host}/bad/digest:1`), wrong)).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
  });
});
