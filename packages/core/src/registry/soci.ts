// Finding a layer's SOCI zTOC in the registry, for the parallel inflater (unpack/decompress/ztoc.ts has the format).
import { isFastpullError } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import { SOCI_INDEX_DIGEST_ANNOTATION, SOCI_INDEX_V1, SOCI_INDEX_V2, SOCI_LAYER_DIGEST_ANNOTATION, ZTOC_MEDIA_TYPE } from '../oci/soci.js';
import type { RegistryClient, ResolvedImage } from './client.js';

/** Image index entry annotation of a v2 SOCI index: the image manifest it indexes. */
export const SOCI_IMAGE_MANIFEST_ANNOTATION = 'com.amazon.soci.image-manifest-digest';

/** The SOCI index found for an image, and its zTOCs by the digest of the layer each describes. */
export interface SociZtocs {
  /** Digest of the SOCI index manifest. */
  index: Digest;
  /** Its version: 2 named by the image (manifest annotation or image index entry), 1 found as a referrer. */
  version: 1 | 2;
  /** zTOC blob descriptors by image layer digest. */
  ztocs: Map<Digest, Descriptor>;
}

/**
 * Looks for a SOCI index of the resolved image: v2 first (an entry of the image index with the
 * v2 artifact type naming this manifest, or the manifest's com.amazon.soci.index-digest
 * annotation), then v1 (a referrer of the manifest with the v1 artifact type). Returns undefined
 * when there is none. A SOCI index only speeds up unpacking, so a registry that fails to answer
 * or a malformed index is no index (undefined) rather than a failed pull; an abort still throws.
 * @example
 * const soci = await findSociZtocs(client, ref, await client.resolve(ref));
 * const ztoc = soci?.ztocs.get(layerDigest); // a descriptor to fetch with client.fetchBlobBytes
 */
export async function findSociZtocs(client: RegistryClient, ref: Reference, image: ResolvedImage, signal?: AbortSignal): Promise<SociZtocs | undefined> {
  const manifestDigest = image.manifestDescriptor.digest;
  const candidates: { digest: Digest; version: 1 | 2 }[] = [];
  const fromIndex = image.indexBytes ? v2FromIndex(image.indexBytes, manifestDigest) : undefined;
  if (fromIndex) candidates.push({ digest: fromIndex, version: 2 });
  const named = image.manifest.annotations?.[SOCI_INDEX_DIGEST_ANNOTATION];
  const namedDigest = named ? digestOrUndefined(named) : undefined;
  if (namedDigest && namedDigest !== fromIndex) candidates.push({ digest: namedDigest, version: 2 });
  for (const c of candidates) {
    const found = await ztocsOf(client, ref, c.digest, c.version, signal);
    if (found) return found;
  }
  try {
    const referrers = await client.fetchReferrers(ref, manifestDigest, SOCI_INDEX_V1, signal);
    for (const r of referrers) {
      const found = await ztocsOf(client, ref, r.digest, 1, signal);
      if (found) return found;
    }
  } catch (e) {
    if (signal?.aborted || (isFastpullError(e) && e.code === 'ABORTED')) throw e;
  }
  return undefined;
}

function digestOrUndefined(s: string): Digest | undefined {
  try {
    return parseDigest(s).digest;
  } catch {
    return undefined;
  }
}

/** The v2 SOCI index an image index lists for `manifest`, if any. */
function v2FromIndex(indexBytes: Uint8Array, manifest: Digest): Digest | undefined {
  try {
    const doc = JSON.parse(Buffer.from(indexBytes).toString('utf8')) as {
      manifests?: { artifactType?: unknown; digest?: unknown; annotations?: Record<string, unknown> }[];
    };
    for (const m of doc.manifests ?? []) {
      if (m?.artifactType === SOCI_INDEX_V2 && m.annotations?.[SOCI_IMAGE_MANIFEST_ANNOTATION] === manifest && typeof m.digest === 'string')
        return digestOrUndefined(m.digest);
    }
  } catch {
    // Not ours to judge: the resolver already accepted this index.
  }
  return undefined;
}

/** Reads a SOCI index manifest: its zTOC layers by image layer digest, or undefined when it is not one. */
async function ztocsOf(client: RegistryClient, ref: Reference, digest: Digest, version: 1 | 2, signal?: AbortSignal): Promise<SociZtocs | undefined> {
  let bytes: Buffer;
  try {
    bytes = (await client.fetchManifest(ref, digest, signal)).bytes;
  } catch (e) {
    if (signal?.aborted || (isFastpullError(e) && e.code === 'ABORTED')) throw e;
    return undefined;
  }
  let doc: { artifactType?: unknown; config?: { mediaType?: unknown }; layers?: unknown; blobs?: unknown };
  try {
    doc = JSON.parse(bytes.toString('utf8')) as typeof doc;
  } catch {
    return undefined;
  }
  const type = version === 2 ? SOCI_INDEX_V2 : SOCI_INDEX_V1;
  if (doc.artifactType !== type && doc.config?.mediaType !== type) return undefined;
  // Early v1 indexes were OCI artifact manifests, with `blobs` where image manifests have `layers`.
  const entries = Array.isArray(doc.layers) ? doc.layers : Array.isArray(doc.blobs) ? doc.blobs : undefined;
  if (!entries) return undefined;
  const ztocs = new Map<Digest, Descriptor>();
  for (const l of entries as Record<string, unknown>[]) {
    if (
      typeof l !== 'object' ||
      l === null ||
      l.mediaType !== ZTOC_MEDIA_TYPE ||
      typeof l.digest !== 'string' ||
      !Number.isSafeInteger(l.size) ||
      (l.size as number) < 0
    )
      continue;
    const annotations = l.annotations as Record<string, unknown> | undefined;
    const layer = typeof annotations?.[SOCI_LAYER_DIGEST_ANNOTATION] === 'string' ? digestOrUndefined(annotations[SOCI_LAYER_DIGEST_ANNOTATION]) : undefined;
    const z = digestOrUndefined(l.digest);
    if (layer && z) ztocs.set(layer, { mediaType: ZTOC_MEDIA_TYPE, digest: z, size: l.size as number });
  }
  return { index: digest, version, ztocs };
}
