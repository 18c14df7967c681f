// The referrers API of the loopback registry (OCI distribution spec 1.1, "Listing Referrers"):
// the manifests of a repository whose `subject` names a digest, as an image index.
import { isDigest, type Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';

/** A manifest as the registry stores it. */
export interface StoredManifestLike {
  /** Its bytes. */
  readonly bytes: Buffer;
  /** Its media type. */
  readonly mediaType: string;
  /** The digest of `bytes`. */
  readonly digest: Digest;
}

/** A referrers response: 200 with the index, or 400 for a subject that is not a digest. */
export interface ReferrersAnswer {
  /** The HTTP status. */
  readonly status: 200 | 400;
  /** An OCI image index listing the referrers, or a distribution error body. */
  readonly body: Buffer;
  /** Content-Type, and OCI-Filters-Applied when the list was filtered by artifactType. */
  readonly headers: Record<string, string>;
}

/**
 * The answer to `GET /v2/<name>/referrers/<subject>`: one descriptor per manifest whose
 * `subject.digest` is `subject`, with the spec's artifactType (the manifest's own, else its
 * config's media type) and its annotations; only those of `artifactType` when it is given.
 */
export function referrersAnswer(manifests: Iterable<StoredManifestLike>, subject: string, artifactType?: string): ReferrersAnswer {
  if (!isDigest(subject)) {
    const body = Buffer.from(JSON.stringify({ errors: [{ code: 'DIGEST_INVALID', message: 'invalid digest', detail: { digest: subject } }] }));
    return { status: 400, body, headers: { 'Content-Type': 'application/json' } };
  }
  const seen = new Set<Digest>();
  const entries: object[] = [];
  for (const m of manifests) {
    if (seen.has(m.digest)) continue; // a manifest stored under a tag and its digest is listed once
    seen.add(m.digest);
    let doc: { subject?: { digest?: unknown }; artifactType?: unknown; config?: { mediaType?: unknown }; annotations?: unknown };
    try {
      doc = JSON.parse(m.bytes.toString('utf8')) as typeof doc;
    } catch {
      continue;
    }
    if (doc?.subject?.digest !== subject) continue;
    const type = typeof doc.artifactType === 'string' ? doc.artifactType : typeof doc.config?.mediaType === 'string' ? doc.config.mediaType : undefined;
    if (artifactType !== undefined && type !== artifactType) continue;
    const annotations = typeof doc.annotations === 'object' && doc.annotations !== null ? doc.annotations : undefined;
    entries.push({
      mediaType: m.mediaType,
      digest: m.digest,
      size: m.bytes.byteLength,
      ...(type ? { artifactType: type } : {}),
      ...(annotations ? { annotations } : {}),
    });
  }
  const body = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: entries }));
  return {
    status: 200,
    body,
    headers: { 'Content-Type': MediaTypes.OCI_INDEX, ...(artifactType !== undefined ? { 'OCI-Filters-Applied': 'artifactType' } : {}) },
  };
}
