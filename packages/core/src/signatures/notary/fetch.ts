// Reads a manifest's Notary Project signatures from its registry: the referrers of artifact type
// application/vnd.cncf.notary.signature (referrers API, or the referrers tag schema), each signature
// manifest's one envelope blob. Bounded: at most MAX_SIGNATURES_EVALUATED referrers are read, and an
// envelope whose descriptor is larger than MAX_ENVELOPE_BYTES is not fetched at all.
import type { Digest } from '../../oci/digest.js';
import type { Reference } from '../../oci/reference.js';
import type { RegistryClient } from '../../registry/client.js';
import { COSE_MEDIA_TYPE, JWS_MEDIA_TYPE, MAX_ENVELOPE_BYTES } from './envelope.js';
import type { NotarySignature } from './types.js';
import { MAX_SIGNATURES_EVALUATED } from './verify.js';

export const NOTARY_ARTIFACT_TYPE = 'application/vnd.cncf.notary.signature';

/** A signature manifest that could not be used, and why (it counts as a signature that failed integrity). */
export interface UnreadableSignature {
  readonly digest: string;
  readonly reason: string;
}

/**
 * The Notary Project signatures of `digest` in `ref`'s repository, and those whose manifest or
 * envelope could not be read within the bounds.
 */
export async function fetchNotarySignatures(
  client: Pick<RegistryClient, 'fetchReferrers' | 'fetchManifest' | 'fetchBlobBytes'>,
  ref: Reference,
  digest: Digest,
  signal?: AbortSignal,
): Promise<{ signatures: NotarySignature[]; unreadable: UnreadableSignature[] }> {
  const referrers = (await client.fetchReferrers(ref, digest, NOTARY_ARTIFACT_TYPE, signal)).slice(0, MAX_SIGNATURES_EVALUATED);
  const signatures: NotarySignature[] = [];
  const unreadable: UnreadableSignature[] = [];
  for (const referrer of referrers) {
    // A referrer that names the manifest itself would make the signature sign itself.
    if (referrer.digest === digest) {
      unreadable.push({ digest: referrer.digest, reason: 'the referrer is the signed manifest itself' });
      continue;
    }
    const manifest = await client.fetchManifest(ref, referrer.digest, signal);
    let layers: unknown;
    try {
      layers = (JSON.parse(manifest.bytes.toString('utf8')) as { layers?: unknown; blobs?: unknown }).layers;
    } catch {
      layers = undefined;
    }
    const blob = Array.isArray(layers) && layers.length === 1 ? (layers[0] as { mediaType?: unknown; digest?: unknown; size?: unknown }) : undefined;
    if (
      !blob ||
      (blob.mediaType !== JWS_MEDIA_TYPE && blob.mediaType !== COSE_MEDIA_TYPE) ||
      typeof blob.digest !== 'string' ||
      typeof blob.size !== 'number'
    ) {
      unreadable.push({ digest: referrer.digest, reason: `the signature manifest does not hold exactly one ${JWS_MEDIA_TYPE} or ${COSE_MEDIA_TYPE} blob` });
      continue;
    }
    if (blob.size > MAX_ENVELOPE_BYTES) {
      unreadable.push({ digest: referrer.digest, reason: `the envelope is ${blob.size} bytes, more than ${MAX_ENVELOPE_BYTES}` });
      continue;
    }
    const envelope = await client.fetchBlobBytes(
      ref,
      { mediaType: blob.mediaType, digest: blob.digest as Digest, size: blob.size },
      MAX_ENVELOPE_BYTES,
      signal,
    );
    signatures.push({ digest: referrer.digest, mediaType: blob.mediaType, envelope });
  }
  return { signatures, unreadable };
}
