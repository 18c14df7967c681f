// Finding an image's SOCI index: v2 named by the image (index entry or manifest annotation), v1 as
// a referrer through the referrers API (loopback registry, which serves it) or the referrers tag
// schema (the real CNCF registry, which lacks the API); registry failures and malformed indexes
// are no index, an abort is an abort.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Digest, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { parseReference } from '../oci/reference.js';
import { buildImage, type BuiltImage } from '../testing/builder.js';
import { findDistributionBinary, pushImage, startDistribution, type DistributionRegistry } from '../testing/distribution.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { SOCI_INDEX_DIGEST_ANNOTATION, SOCI_INDEX_V1, SOCI_INDEX_V2, SOCI_LAYER_DIGEST_ANNOTATION, ZTOC_MEDIA_TYPE } from '../oci/soci.js';
import { RegistryClient } from './client.js';
import { findSociZtocs, SOCI_IMAGE_MANIFEST_ANNOTATION } from './soci.js';
import { lacksRegistry } from '../testing/distribution.js';

const binary = findDistributionBinary();
if (binary === undefined) console.log('soci.test.ts: skipping the real-registry test: no docker-registry or registry binary found');

/** A manifest and the blobs it names, to add to a registry. */
interface Artifact {
  readonly bytes: Buffer;
  readonly digest: Digest;
  readonly mediaType: string;
  readonly blobs: ReadonlyMap<Digest, Buffer>;
}

function artifact(doc: object, mediaType: string, blobs: Buffer[] = []): Artifact {
  const bytes = Buffer.from(JSON.stringify(doc));
  return { bytes, digest: sha256Digest(bytes), mediaType, blobs: new Map(blobs.map((b) => [sha256Digest(b), b])) };
}

/** A SOCI index manifest with one zTOC per layer of `image` (the zTOC bytes are only fetched, never parsed, here). */
function sociIndex(image: BuiltImage, version: 1 | 2, extra: object = {}): { index: Artifact; ztocs: Map<Digest, Buffer> } {
  const type = version === 2 ? SOCI_INDEX_V2 : SOCI_INDEX_V1;
  const config = Buffer.from('{}');
  const ztocs = new Map(image.layers.map((l) => [l.digest, Buffer.from(`ztoc of ${l.digest} (v${version})`)]));
  const layers = [...ztocs].map(([layer, z]) => ({
    mediaType: ZTOC_MEDIA_TYPE,
    digest: sha256Digest(z),
    size: z.length,
    annotations: { [SOCI_LAYER_DIGEST_ANNOTATION]: layer },
  }));
  const doc = {
    schemaVersion: 2,
    mediaType: MediaTypes.OCI_MANIFEST,
    ...(version === 1 ? { artifactType: type, subject: image.manifestDescriptor } : {}),
    config: { mediaType: type, digest: sha256Digest(config), size: config.length },
    layers,
    ...extra,
  };
  return { index: artifact(doc, MediaTypes.OCI_MANIFEST, [config, ...ztocs.values()]), ztocs };
}

/** The referrers list a registry without the API keeps under the tag `<alg>-<hex>`. */
function referrersList(...entries: (Descriptor & { artifactType: string })[]): Artifact {
  return artifact({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: entries }, MediaTypes.OCI_INDEX);
}

const entry = (a: Artifact, artifactType: string) => ({ mediaType: a.mediaType, digest: a.digest, size: a.bytes.length, artifactType });

function add(reg: LoopbackRegistry, repository: string, reference: string, a: Artifact): void {
  for (const [d, b] of a.blobs) reg.addBlob(repository, d, b);
  reg.addManifest(repository, reference, a.bytes, a.mediaType);
}

const layers = (n: number) => [
  [{ type: 'file' as const, path: `f${n}`, content: `layer ${n}\n` }],
  [{ type: 'file' as const, path: 'g', content: 'second\n' }],
];

describe('SOCI indexes on a registry with the referrers API', () => {
  let reg: LoopbackRegistry;
  let client: RegistryClient;
  let image: BuiltImage;

  beforeAll(async () => {
    reg = await startLoopbackRegistry({ referrers: true });
    client = new RegistryClient();
    image = await buildImage({ layers: layers(1) });
  });
  afterAll(async () => {
    await client.close();
    await reg.close();
  });

  it('finds a v1 index as a referrer of the manifest, through the API, and its zTOCs can be fetched', async () => {
    reg.addImage('v1/app', '1', image);
    const { index, ztocs } = sociIndex(image, 1);
    add(reg, 'v1/app', index.digest, index);
    // Another referrer of the manifest, of another kind, is passed over.
    add(
      reg,
      'v1/app',
      'sig',
      artifact(
        {
          schemaVersion: 2,
          mediaType: MediaTypes.OCI_MANIFEST,
          artifactType: 'application/vnd.example.signature',
          subject: image.manifestDescriptor,
          config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: sha256Digest(Buffer.from('{}')), size: 2 },
          layers: [],
        },
        MediaTypes.OCI_MANIFEST,
        [Buffer.from('{}')],
      ),
    );
    const ref = parseReference(`${reg.host}/v1/app:1`);
    const resolved = await client.resolve(ref);
    reg.stats.reset();
    const soci = await findSociZtocs(client, ref, resolved);
    expect(soci).toMatchObject({ index: index.digest, version: 1 });
    expect([...soci!.ztocs.keys()]).toEqual(image.layers.map((l) => l.digest));
    const paths = reg.stats.requests.map((r) => r.path);
    expect(paths[0]).toBe(`/v2/v1/app/referrers/${image.manifestDigest}?artifactType=${encodeURIComponent(SOCI_INDEX_V1)}`);
    expect(paths.some((p) => p.includes(image.manifestDigest.replace(':', '-')))).toBe(false);
    const layer = image.layers[1]!.digest;
    expect((await client.fetchBlobBytes(ref, soci!.ztocs.get(layer)!, 1024)).equals(ztocs.get(layer)!)).toBe(true);
    // The referrers list keeps each entry's artifact type.
    const all = await client.fetchReferrers(ref, image.manifestDigest);
    expect(all.map((r) => r.artifactType).sort()).toEqual(['application/vnd.amazon.soci.index.v1+json', 'application/vnd.example.signature']);
  });

  it('finds a v2 index that the image index lists for the manifest', async () => {
    const { index } = sociIndex(image, 2);
    const other = sociIndex(await buildImage({ layers: layers(2) }), 2).index;
    const top = artifact(
      {
        schemaVersion: 2,
        mediaType: MediaTypes.OCI_INDEX,
        manifests: [
          image.manifestDescriptor,
          // A v2 index of another manifest comes first: only the one naming this manifest counts.
          { ...entry(other, SOCI_INDEX_V2), annotations: { [SOCI_IMAGE_MANIFEST_ANNOTATION]: sha256Digest(Buffer.from('x')) } },
          { ...entry(index, SOCI_INDEX_V2), annotations: { [SOCI_IMAGE_MANIFEST_ANNOTATION]: image.manifestDigest } },
        ],
      },
      MediaTypes.OCI_INDEX,
    );
    reg.addImage('v2/app', 'plain', image);
    add(reg, 'v2/app', index.digest, index);
    add(reg, 'v2/app', other.digest, other);
    add(reg, 'v2/app', '1', top);
    const ref = parseReference(`${reg.host}/v2/app:1`);
    reg.stats.reset();
    const soci = await findSociZtocs(client, ref, await client.resolve(ref));
    expect(soci).toMatchObject({ index: index.digest, version: 2 });
    expect(soci!.ztocs.size).toBe(2);
    expect(reg.stats.requests.some((r) => r.path.includes('/referrers/'))).toBe(false);
  });

  it('finds a v2 index that the manifest names, and falls back to v1 when the one named is missing', async () => {
    const v2 = sociIndex(image, 2).index;
    const named = await buildImage({ layers: layers(1), annotations: { [SOCI_INDEX_DIGEST_ANNOTATION]: v2.digest } });
    reg.addImage('named/app', '1', named);
    add(reg, 'named/app', v2.digest, v2);
    const ref = parseReference(`${reg.host}/named/app:1`);
    expect(await findSociZtocs(client, ref, await client.resolve(ref))).toMatchObject({ index: v2.digest, version: 2 });

    const missing = await buildImage({ layers: layers(1), annotations: { [SOCI_INDEX_DIGEST_ANNOTATION]: sha256Digest(Buffer.from('gone')) } });
    const v1 = sociIndex(missing, 1).index;
    reg.addImage('fallback/app', '1', missing);
    add(reg, 'fallback/app', v1.digest, v1);
    const ref1 = parseReference(`${reg.host}/fallback/app:1`);
    expect(await findSociZtocs(client, ref1, await client.resolve(ref1))).toMatchObject({ index: v1.digest, version: 1 });
  });

  it('is no index when the registry refuses, or the index is not a SOCI index; an abort still throws', async () => {
    reg.addImage('err/app', '1', image);
    const ref = parseReference(`${reg.host}/err/app:1`);
    const resolved = await client.resolve(ref);
    reg.faults.status = { path: /\/referrers\//, status: 403, times: 2 };
    await expect(client.fetchReferrers(ref, image.manifestDigest, SOCI_INDEX_V1)).rejects.toMatchObject({ code: 'DENIED' });
    expect(await findSociZtocs(client, ref, resolved)).toBeUndefined();
    expect(reg.faults.status.times).toBe(0);
    reg.faults = {};

    // Referrers listed as v1 SOCI indexes (here by the referrers tag, the API answering 404) whose
    // manifests are not JSON, or say they are something else, are no index.
    const notJson: Artifact = {
      bytes: Buffer.from('not json'),
      digest: sha256Digest(Buffer.from('not json')),
      mediaType: MediaTypes.OCI_MANIFEST,
      blobs: new Map(),
    };
    const other = { mediaType: 'application/vnd.example.other', digest: sha256Digest(Buffer.from('{}')), size: 2 };
    const wrongType = sociIndex(image, 1, { artifactType: other.mediaType, config: other }).index;
    add(reg, 'err/app', notJson.digest, notJson);
    add(reg, 'err/app', wrongType.digest, wrongType);
    add(reg, 'err/app', image.manifestDigest.replace(':', '-'), referrersList(entry(notJson, SOCI_INDEX_V1), entry(wrongType, SOCI_INDEX_V1)));
    reg.faults.status = { path: /\/referrers\//, status: 404, times: 10 };
    reg.stats.reset();
    expect(await findSociZtocs(client, ref, resolved)).toBeUndefined();
    expect(reg.stats.requests.filter((r) => r.path.includes('/manifests/sha256:')).map((r) => r.status)).toEqual([200, 200]);
    reg.faults = {};

    await expect(findSociZtocs(client, ref, resolved, AbortSignal.abort())).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('reads the referrers tag when the API answers 405, and refuses a list that is not an index', async () => {
    reg.addImage('tag/app', '1', image);
    const { index } = sociIndex(image, 1);
    add(reg, 'tag/app', index.digest, index);
    add(reg, 'tag/app', image.manifestDigest.replace(':', '-'), referrersList(entry(index, SOCI_INDEX_V1)));
    const ref = parseReference(`${reg.host}/tag/app:1`);
    reg.faults.status = { path: /\/referrers\//, status: 405, times: 1 };
    expect((await client.fetchReferrers(ref, image.manifestDigest, SOCI_INDEX_V1)).map((r) => r.digest)).toEqual([index.digest]);
    reg.faults.status = { path: /\/referrers\//, status: 405, times: 1 };
    add(reg, 'tag/app', image.manifestDigest.replace(':', '-'), artifact({ schemaVersion: 2, layers: [] }, MediaTypes.OCI_INDEX));
    await expect(client.fetchReferrers(ref, image.manifestDigest)).rejects.toMatchObject({ code: 'INVALID_MANIFEST' });
  });
});

describe.skipIf(lacksRegistry())('SOCI indexes on the distribution registry (no referrers API)', () => {
  let registry: DistributionRegistry;
  let client: RegistryClient;

  beforeAll(async () => {
    registry = await startDistribution();
    client = new RegistryClient();
  });
  afterAll(async () => {
    await client?.close();
    await registry?.stop();
  });

  it('finds a v1 index through the referrers tag schema, and none where there is no tag', async () => {
    const image = await buildImage({ layers: layers(3) });
    await pushImage(registry.url, 'soci/app', '1', image);
    const { index, ztocs } = sociIndex(image, 1);
    const push = (tag: string, a: Artifact) =>
      pushImage(registry.url, 'soci/app', tag, {
        manifest: a.bytes,
        manifestDigest: a.digest,
        manifestMediaType: a.mediaType,
        blobs: a.blobs,
      } as unknown as BuiltImage);
    const ref = parseReference(`${registry.host}/soci/app:1`);
    const resolved = await client.resolve(ref);
    expect(await findSociZtocs(client, ref, resolved)).toBeUndefined();

    await push(index.digest, index);
    await push(image.manifestDigest.replace(':', '-'), referrersList(entry(index, SOCI_INDEX_V1)));
    const soci = await findSociZtocs(client, ref, resolved);
    expect(soci).toMatchObject({ index: index.digest, version: 1 });
    const layer = image.layers[0]!.digest;
    expect((await client.fetchBlobBytes(ref, soci!.ztocs.get(layer)!, 1024)).equals(ztocs.get(layer)!)).toBe(true);
  });
});
