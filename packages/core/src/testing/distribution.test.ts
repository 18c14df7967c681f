// Tests against the real distribution registry: start, push, fetch back, corrupt on disk.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { MANIFEST_ACCEPT, MediaTypes } from '../oci/mediatypes.js';
import { buildImage, buildIndex } from './builder.js';
import { blobDataPath, findDistributionBinary, pushImage, pushIndex, startDistribution } from './distribution.js';
import { sampleImage } from './sample.js';
import { lacksRegistry } from './distribution.js';

const binary = findDistributionBinary();
if (binary === undefined) console.log('distribution.test.ts: skipping the real-registry tests: no docker-registry or registry binary found');

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers });
  const body = Buffer.from(await res.body.arrayBuffer());
  const h = (name: string): string | undefined => {
    const v = res.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  return { status: res.statusCode, body, header: h };
}

describe('real distribution registry', () => {
  it('finds the binary or says there is none', () => {
    const found = findDistributionBinary();
    if (found !== undefined) expect(found).toMatch(/(docker-registry|registry)$/);
    expect(blobDataPath('/s', `sha256:${'ab'.repeat(32)}`)).toBe(`/s/docker/registry/v2/blobs/sha256/ab/${'ab'.repeat(32)}/data`);
  });

  it('fails clearly when the binary does not run', async () => {
    await expect(startDistribution({ binary: '/nonexistent/registry' })).rejects.toThrow(/exited|ENOENT/);
  });

  it.skipIf(lacksRegistry())('round trip: push an image, fetch it back by tag, by digest and by range, corrupt it on disk', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fastpull-dist-test-'));
    const registry = await startDistribution({ dir });
    try {
      expect(registry.url).toBe(`http://${registry.host}`);
      const image = await sampleImage(31, { layers: 3 });
      const digest = await pushImage(registry.url, 'fastpull/sample', 'v1', image);
      expect(digest).toBe(image.manifestDigest);
      // Pushing again skips the blobs that exist and succeeds.
      await pushImage(registry.url, 'fastpull/sample', 'v1', image);

      for (const ref of ['v1', image.manifestDigest]) {
        const res = await get(`${registry.url}/v2/fastpull/sample/manifests/${ref}`, { accept: MANIFEST_ACCEPT });
        expect(res.status, ref).toBe(200);
        expect(res.body.equals(image.manifest)).toBe(true);
        expect(res.header('content-type')).toBe(MediaTypes.OCI_MANIFEST);
        expect(res.header('docker-content-digest')).toBe(image.manifestDigest);
      }

      // distribution 2.8 hides an OCI manifest from a client whose Accept does not name OCI types.
      const noAccept = await get(`${registry.url}/v2/fastpull/sample/manifests/v1`);
      expect(noAccept.status).toBe(404);
      expect(noAccept.body.toString()).toContain('MANIFEST_UNKNOWN');

      const layer = image.layers[0]!;
      const blobUrl = `${registry.url}/v2/fastpull/sample/blobs/${layer.digest}`;
      const ranged = await get(blobUrl, { range: 'bytes=1000-1999' });
      expect(ranged.status).toBe(206);
      expect(ranged.header('content-range')).toBe(`bytes 1000-1999/${layer.size}`);
      expect(ranged.body.equals(layer.blob.subarray(1000, 2000))).toBe(true);

      // Its 416 carries the blob's Content-Length with a short text body: a client must not trust it.
      const unsatisfiable = await request(blobUrl, { headers: { range: `bytes=${layer.size}-` } });
      expect(unsatisfiable.statusCode).toBe(416);
      expect(unsatisfiable.headers['content-range']).toBe(`bytes */${layer.size}`);
      await unsatisfiable.body.dump().catch(() => undefined);

      const onDisk = blobDataPath(registry.storageDir, layer.digest);
      expect((await readFile(onDisk)).equals(layer.blob)).toBe(true);
      const corrupted = Buffer.from(layer.blob);
      corrupted[5] = (corrupted[5] as number) ^ 0xff;
      await writeFile(onDisk, corrupted);
      const served = await get(blobUrl);
      expect(served.status).toBe(200);
      expect(sha256Digest(served.body)).not.toBe(layer.digest);
    } finally {
      await registry.stop();
    }
    // The directory was the caller's, so it stays.
    expect((await stat(join(dir, 'config.yml'))).isFile()).toBe(true);
    await rm(dir, { recursive: true, force: true });
  });

  it.skipIf(lacksRegistry())('pushes a Docker-format multi-platform index and serves it back; stop() removes its own temporary directory', async () => {
    const registry = await startDistribution();
    try {
      const amd = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: 'amd64' }]], format: 'docker' });
      const arm = await buildImage({
        layers: [[{ type: 'file', path: 'arch', content: 'arm64' }]],
        format: 'docker',
        platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
      });
      const index = buildIndex([amd, arm], { format: 'docker' });
      expect(await pushIndex(registry.url, 'multi', 'latest', index)).toBe(index.digest);
      const res = await get(`${registry.url}/v2/multi/manifests/latest`, { accept: MANIFEST_ACCEPT });
      expect(res.status).toBe(200);
      expect(res.header('content-type')).toBe(MediaTypes.DOCKER_MANIFEST_LIST);
      expect(res.body.equals(index.index)).toBe(true);
      const armRes = await get(`${registry.url}/v2/multi/manifests/${arm.manifestDigest}`, { accept: MANIFEST_ACCEPT });
      expect(armRes.body.equals(arm.manifest)).toBe(true);
    } finally {
      await registry.stop();
    }
    await expect(stat(registry.storageDir)).rejects.toThrow(/ENOENT/);
  });
});
