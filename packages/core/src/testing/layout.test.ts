// Tests of writeOciLayout: the files of the layout, their digests, refusals, and umoci reading it.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MediaTypes } from '../oci/mediatypes.js';
import { buildImage, type BuiltImage, type LayerEntry } from './builder.js';
import { OCI_REF_NAME_ANNOTATION, writeOciLayout } from './layout.js';
import { lacks } from './needs.js';

function hasUmoci(): boolean {
  try {
    execFileSync('umoci', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

const shared: LayerEntry[] = [{ type: 'file', path: 'etc/os-release', content: 'ID=test\n' }];

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fastpull-layout-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function sha256Hex(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

async function twoImages(): Promise<[BuiltImage, BuiltImage]> {
  const a = await buildImage({ layers: [shared, [{ type: 'file', path: 'app/a', content: 'a\n' }]] });
  const b = await buildImage({
    layers: [shared, [{ type: 'file', path: 'app/b', content: 'b\n' }]],
    compression: 'none',
    platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
  });
  return [a, b];
}

describe('writeOciLayout', () => {
  it('writes oci-layout, index.json with ref names, and each blob once under its digest', async () => {
    const [a, b] = await twoImages();
    const layout = join(dir, 'layout');
    await writeOciLayout(layout, [
      { tag: 'latest', image: a },
      { tag: 'arm64-v1.0', image: b },
    ]);

    expect(readdirSync(layout).sort()).toEqual(['blobs', 'index.json', 'oci-layout']);
    expect(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { schemaVersion: number; mediaType: string; manifests: unknown[] };
    expect(index.schemaVersion).toBe(2);
    expect(index.mediaType).toBe(MediaTypes.OCI_INDEX);
    expect(index.manifests).toEqual([
      {
        mediaType: MediaTypes.OCI_MANIFEST,
        digest: a.manifestDigest,
        size: a.manifest.length,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { [OCI_REF_NAME_ANNOTATION]: 'latest' },
      },
      {
        mediaType: MediaTypes.OCI_MANIFEST,
        digest: b.manifestDigest,
        size: b.manifest.length,
        platform: { architecture: 'arm64', os: 'linux', variant: 'v8' },
        annotations: { [OCI_REF_NAME_ANNOTATION]: 'arm64-v1.0' },
      },
    ]);

    // Every file is named by the sha256 of its bytes; together they are the manifests and all their blobs.
    expect(readdirSync(join(layout, 'blobs'))).toEqual(['sha256']);
    const files = readdirSync(join(layout, 'blobs', 'sha256')).sort();
    for (const hex of files) expect(sha256Hex(readFileSync(join(layout, 'blobs', 'sha256', hex)))).toBe(hex);
    const want = new Set([a.manifestDigest, b.manifestDigest, ...a.blobs.keys(), ...b.blobs.keys()].map((d) => d.slice('sha256:'.length)));
    expect(files).toEqual([...want].sort());
    // 2 manifests + 2 configs + 4 layers: the base tar is a gzip blob in one image, a plain one in the other.
    expect(a.layers[0]!.diffID).toBe(b.layers[0]!.diffID);
    expect(files).toHaveLength(2 + 2 + 4);
  });

  it('writes a blob two images share once', async () => {
    const a = await buildImage({ layers: [shared, [{ type: 'file', path: 'x', content: 'x' }]] });
    const b = await buildImage({ layers: [shared, [{ type: 'file', path: 'y', content: 'y' }]] });
    expect(a.layers[0]!.digest).toBe(b.layers[0]!.digest);
    await writeOciLayout(dir, [
      { tag: 'a', image: a },
      { tag: 'b', image: b },
    ]);
    // 2 manifests + 2 configs + 1 shared layer + 2 own layers.
    expect(readdirSync(join(dir, 'blobs', 'sha256'))).toHaveLength(7);
  });

  it('refuses Docker-format images, naming the media type, and writes nothing', async () => {
    const docker = await buildImage({ layers: [shared], format: 'docker' });
    const layout = join(dir, 'layout');
    const err = await writeOciLayout(layout, [{ tag: 'latest', image: docker }]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
    expect((err as Error).message).toContain(MediaTypes.DOCKER_MANIFEST);
    expect(existsSync(layout)).toBe(false);
  });

  it('refuses an OCI manifest with a Docker layer', async () => {
    const image = await buildImage({ layers: [shared] });
    const manifest = JSON.parse(image.manifest.toString()) as { layers: { mediaType: string }[] };
    manifest.layers[0]!.mediaType = MediaTypes.DOCKER_LAYER_GZIP;
    const bytes = Buffer.from(JSON.stringify(manifest));
    const edited = { ...image, manifest: bytes, manifestDescriptor: { ...image.manifestDescriptor, size: bytes.length } };
    await expect(writeOciLayout(dir, [{ tag: 'x', image: edited }])).rejects.toMatchObject({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: expect.stringContaining('layer 0'),
    });
  });

  it('refuses bad and repeated tags, missing blobs and a non-empty directory', async () => {
    const [a] = await twoImages();
    for (const tag of ['', 'Has Space', '-lead', 'a//b', 'trail.']) {
      await expect(writeOciLayout(dir, [{ tag, image: a }]), JSON.stringify(tag)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    await expect(
      writeOciLayout(dir, [
        { tag: 'v1', image: a },
        { tag: 'v1', image: a },
      ]),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('twice') });
    const blobs = new Map(a.blobs);
    blobs.delete(a.layers[1]!.digest);
    await expect(writeOciLayout(dir, [{ tag: 'v1', image: { ...a, blobs } }])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(a.layers[1]!.digest),
    });
    expect(readdirSync(dir)).toEqual([]);

    await mkdir(join(dir, 'full'));
    await writeFile(join(dir, 'full', 'index.json'), '{}');
    await expect(writeOciLayout(join(dir, 'full'), [{ tag: 'v1', image: a }])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('not empty'),
    });
  });

  it.skipIf(lacks('umoci', hasUmoci() ? undefined : 'umoci is not installed'))('is a layout umoci lists and checks', async () => {
    const [a, b] = await twoImages();
    await writeOciLayout(dir, [
      { tag: 'latest', image: a },
      { tag: 'other', image: b },
    ]);
    expect(execFileSync('umoci', ['ls', '--layout', dir], { encoding: 'utf8' }).trim().split('\n').sort()).toEqual(['latest', 'other']);
    // `umoci stat` reads the manifest and config blobs and checks their digests.
    expect(execFileSync('umoci', ['stat', '--image', `${dir}:latest`, '--json'], { encoding: 'utf8' })).toContain('"history"');
  });
});
