// The referrers of a manifest (OCI distribution spec 1.1): through the referrers API, or the
// referrers tag schema on registries that lack it.
import { FastpullError, isFastpullError } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { parseJSONDocument } from '../oci/json.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';
import { MANIFEST_SIZE_LIMIT } from './defaults.js';
import { discard, readBody, responseError } from './response.js';
import type { Resolver } from './resolver.js';
import type { Requester } from './transport.js';

/** An entry of a referrers list: a descriptor with the artifact type of what it names. */
export interface Referrer extends Descriptor {
  /** The referring manifest's artifact type (or its config's media type). */
  readonly artifactType?: string;
}

/**
 * The referrers of the manifest `digest`: the index that GET /v2/<name>/referrers/<digest>
 * returns, or, where the registry lacks that API (404, 400, 405), the index tagged `<alg>-<hex>`
 * (the referrers tag schema); an empty list when neither exists. Each entry's `artifactType` is
 * kept; `artifactType` filters on it (also where the registry does not filter itself). Entries
 * that are not descriptors are skipped; a list that is not an index is INVALID_MANIFEST.
 */
export async function fetchReferrers(
  transport: Requester,
  resolver: Pick<Resolver, 'fetchManifest' | 'throttle'>,
  ref: Reference,
  digest: Digest,
  artifactType?: string,
  signal?: AbortSignal,
): Promise<Referrer[]> {
  const what = `referrers of ${digest} in ${ref.registry}/${ref.repository}`;
  const query = artifactType ? `?artifactType=${encodeURIComponent(artifactType)}` : '';
  const res = await transport.requestWithRetry(ref, `referrers/${digest}${query}`, { op: 'pull', headers: { accept: MediaTypes.OCI_INDEX }, signal });
  let bytes: Buffer;
  if (res.statusCode === 200) {
    bytes = await readBody(res, MANIFEST_SIZE_LIMIT, what, 'MANIFEST_TOO_LARGE', signal, resolver.throttle);
  } else if (res.statusCode === 404 || res.statusCode === 400 || res.statusCode === 405) {
    await discard(res);
    try {
      bytes = (await resolver.fetchManifest(ref, digest.replace(':', '-'), signal)).bytes;
    } catch (e) {
      if (isFastpullError(e) && e.code === 'NOT_FOUND') return [];
      throw e;
    }
  } else {
    throw await responseError(res, what);
  }
  return parseReferrers(bytes, what, artifactType);
}

/** The descriptors of a referrers index, those of `artifactType` only when it is given. */
function parseReferrers(bytes: Buffer, what: string, artifactType: string | undefined): Referrer[] {
  const doc = parseJSONDocument(bytes, what);
  const manifests = (doc as { manifests?: unknown } | null)?.manifests;
  if (!Array.isArray(manifests)) throw new FastpullError('INVALID_MANIFEST', `${what}: no manifests list`);
  const out: Referrer[] = [];
  for (const m of manifests as Record<string, unknown>[]) {
    if (typeof m !== 'object' || m === null || typeof m.digest !== 'string' || typeof m.mediaType !== 'string' || !Number.isSafeInteger(m.size)) continue;
    const type = typeof m.artifactType === 'string' ? m.artifactType : undefined;
    if (artifactType && type !== artifactType) continue;
    let d: Digest;
    try {
      d = parseDigest(m.digest).digest;
    } catch {
      continue;
    }
    const annotations = typeof m.annotations === 'object' && m.annotations !== null ? (m.annotations as Record<string, string>) : undefined;
    out.push({ mediaType: m.mediaType, digest: d, size: m.size as number, ...(type ? { artifactType: type } : {}), ...(annotations ? { annotations } : {}) });
  }
  return out;
}
