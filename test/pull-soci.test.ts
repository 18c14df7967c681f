// SOCI zTOCs from a real CNCF distribution registry: with the parallel inflater, a pull finds the
// image's SOCI index (v2: named by the manifest's annotation; v1: a referrer, through the referrers
// tag schema since this registry has no referrers API), fetches the layer's zTOC and starts chunks at
// its checkpoints; a wrong zTOC costs nothing but speed.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pull } from '@fastpull/core';
import { parseZtoc } from '@fastpull/core/unpack';
import { FileSnapshotter } from '@fastpull/core/snapshots';
import {
  buildGzipCheckpoints,
  buildImage,
  type BuiltImage,
  encodeZtoc,
  lacksRegistry,
  type LayerEntry,
  Prng,
  pushImage,
  readTree,
  startDistribution,
} from '@fastpull/core/testing';
import { tempDir } from './helpers.js';

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';

const sha256 = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}` as const;

/** Files like a model layer's: text, weights (random) and low-entropy tensors. */
function entries(seed: number): LayerEntry[] {
  const rng = new Prng(seed);
  const words = Array.from({ length: 400 }, (_, i) => `w${(i * 2654435761) >>> 0}`);
  const text = Array.from({ length: 120_000 }, () => rng.pick(words)).join(' ');
  return [
    { type: 'dir', path: 'model' },
    { type: 'file', path: 'model/vocab.txt', content: text },
    { type: 'file', path: 'model/weights.bin', content: rng.bytes(1_500_000) },
    { type: 'file', path: 'model/tensor.bin', content: Uint8Array.from({ length: 1_500_000 }, (_, i) => (i * 7 + (i >> 10)) & 0xff) },
  ];
}

/** A blob-only image whose manifest is `manifest` (for pushing SOCI index manifests and referrer lists). */
function artifact(manifest: object, mediaType: string, blobs: [string, Buffer][]): BuiltImage {
  const bytes = Buffer.from(JSON.stringify(manifest));
  return { manifest: bytes, manifestDigest: sha256(bytes), manifestMediaType: mediaType, blobs: new Map(blobs) } as unknown as BuiltImage;
}

function sociIndex(image: BuiltImage, ztocs: Map<string, Buffer>, version: 1 | 2): { built: BuiltImage; digest: string } {
  const type = version === 2 ? 'application/vnd.amazon.soci.index.v2+json' : 'application/vnd.amazon.soci.index.v1+json';
  const config = Buffer.from('{}');
  const layers = [...ztocs].map(([layer, z]) => ({
    mediaType: 'application/octet-stream',
    digest: sha256(z),
    size: z.length,
    annotations: { 'com.amazon.soci.image-layer-digest': layer, 'com.amazon.soci.image-layer-mediaType': 'application/vnd.oci.image.layer.v1.tar+gzip' },
  }));
  const doc = {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    ...(version === 1
      ? { artifactType: type, subject: { mediaType: image.manifestMediaType, digest: image.manifestDigest, size: image.manifest.length } }
      : {}),
    config: { mediaType: type, digest: sha256(config), size: config.length },
    layers,
    annotations: { 'com.amazon.soci.build-tool-identifier': 'fastpull test' },
  };
  const built = artifact(doc, OCI_MANIFEST, [[sha256(config), config], ...[...ztocs.values()].map((z): [string, Buffer] => [sha256(z), z])]);
  return { built, digest: built.manifestDigest };
}

describe.skipIf(lacksRegistry())('SOCI zTOCs from the distribution registry', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  const work = tempDir('soci');
  const layers = [[{ type: 'file', path: 'etc/os-release', content: 'ID=test\n' }] as LayerEntry[], entries(3)];
  let plain: BuiltImage;
  let ztocs: Map<string, Buffer>;
  let checkpointCount = 0;

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    plain = await buildImage({ layers });
    const big = plain.layers[1]!;
    const gz = plain.blobs.get(big.digest)!;
    const cps = buildGzipCheckpoints(gz, 256 * 1024);
    checkpointCount = cps.length;
    ztocs = new Map([[big.digest, Buffer.from(encodeZtoc({ checkpoints: cps, compressedSize: gz.length, version: '0.9' }))]]);
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  async function pullAndCheck(tag: string, image: BuiltImage, inflater: 'parallel' | 'zlib' = 'parallel') {
    const root = join(work.dir, `store-${tag}-${inflater}`);
    const { image: rec, timings } = await pull(`${registry.host}/soci/app:${tag}`, { root, inflater });
    expect(rec.manifest.digest).toBe(image.manifestDigest);
    const snaps = new FileSnapshotter(root);
    const tree = await readTree(snaps.fsPath(rec.layers[1]!.chainID));
    expect(tree.get('model/weights.bin')).toMatchObject({ type: 'file' });
    for (const e of entries(3)) {
      if (e.type === 'file') expect(Buffer.compare((tree.get(e.path) as { content: Buffer }).content, Buffer.from(e.content))).toBe(0);
    }
    return timings.layers[1]!;
  }

  it('v2: the manifest names its SOCI index, and the parallel inflater starts at every checkpoint', async () => {
    expect(checkpointCount).toBeGreaterThan(8);
    const soci = sociIndex(plain, ztocs, 2);
    await pushImage(registry.url, 'soci/app', soci.digest, soci.built);
    const image = await buildImage({ layers, annotations: { 'com.amazon.soci.index-digest': soci.digest } });
    expect(image.layers.map((l) => l.digest)).toEqual(plain.layers.map((l) => l.digest));
    await pushImage(registry.url, 'soci/app', 'v2', image);
    const layer = await pullAndCheck('v2', image);
    expect(layer.ztocCheckpoints).toBe(checkpointCount - 1);
    // Other inflaters do not look for it.
    expect((await pullAndCheck('v2', image, 'zlib')).ztocCheckpoints).toBeUndefined();
  });

  it('v1: a referrer of the manifest, found through the referrers tag schema', async () => {
    await pushImage(registry.url, 'soci/app', 'v1', plain);
    const soci = sociIndex(plain, ztocs, 1);
    await pushImage(registry.url, 'soci/app', soci.digest, soci.built);
    const list = artifact(
      {
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          { mediaType: OCI_MANIFEST, digest: soci.digest, size: soci.built.manifest.length, artifactType: 'application/vnd.amazon.soci.index.v1+json' },
        ],
      },
      OCI_INDEX,
      [],
    );
    await pushImage(registry.url, 'soci/app', plain.manifestDigest.replace(':', '-'), list);
    const layer = await pullAndCheck('v1', plain);
    expect(layer.ztocCheckpoints).toBe(checkpointCount - 1);
  });

  it('a zTOC that does not fit the layer is verified away: same tree, no checkpoint used', async () => {
    // Checkpoints of another layer's gzip, under this layer's digest.
    const other = await buildImage({ layers: [entries(4)] });
    const gz = other.blobs.get(other.layers[0]!.digest)!;
    const wrong = new Map([[plain.layers[1]!.digest, Buffer.from(encodeZtoc({ checkpoints: buildGzipCheckpoints(gz, 256 * 1024) }))]]);
    expect(parseZtoc(wrong.values().next().value!).checkpoints.length).toBeGreaterThan(3);
    const soci = sociIndex(plain, wrong, 2);
    await pushImage(registry.url, 'soci/app', soci.digest, soci.built);
    const image = await buildImage({ layers, annotations: { 'com.amazon.soci.index-digest': soci.digest } });
    await pushImage(registry.url, 'soci/app', 'wrong', image);
    expect((await pullAndCheck('wrong', image)).ztocCheckpoints).toBe(0);
    // And garbage where the zTOC should be: ignored.
    const junk = new Map([[plain.layers[1]!.digest, Buffer.from('not a ztoc at all')]]);
    const soci2 = sociIndex(plain, junk, 2);
    await pushImage(registry.url, 'soci/app', soci2.digest, soci2.built);
    const image2 = await buildImage({ layers, annotations: { 'com.amazon.soci.index-digest': soci2.digest } });
    await pushImage(registry.url, 'soci/app', 'junk', image2);
    expect((await pullAndCheck('junk', image2)).ztocCheckpoints).toBeUndefined();
  });
});
