// Finding the signatures of a manifest: its referrers (OCI referrers API, or the referrers tag schema
// where the registry lacks it) of the signature artifact types, and cosign's `sha256-<hex>.sig` tag.
// Bounded: at most `maxSignatures` artifacts of each type are handed on, every manifest and blob
// read is capped at `maxArtifactBytes`, and the caller's signal carries the time limit.
import { FastpullError, isFastpullError } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import { parseJSONDocument } from '../oci/json.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Referrer } from '../registry/referrers.js';
import type { FetchedManifest } from '../registry/resolver.js';
import type { Reference } from '../oci/reference.js';
import type { DiscoveredSignature, SignatureLimits, SignatureManifest, SignatureSource, SignatureSubject } from './types.js';

/** Media type of a cosign simple-signing payload layer (the tag scheme). */
export const COSIGN_SIMPLESIGNING = 'application/vnd.dev.cosign.simplesigning.v1+json';
/** Artifact type of a Sigstore bundle stored as a referrer. */
export const SIGSTORE_BUNDLE_V03 = 'application/vnd.dev.sigstore.bundle.v0.3+json';
/** Artifact type of a Notary Project signature. */
export const NOTARY_SIGNATURE = 'application/vnd.cncf.notary.signature';
/** The referrer artifact types that are signatures; other referrers (SBOMs, SOCI indexes) are not read. */
export const SIGNATURE_ARTIFACT_TYPES: readonly string[] = [NOTARY_SIGNATURE, SIGSTORE_BUNDLE_V03];

/** The part of the registry client discovery uses. */
export interface SignatureRegistry {
  fetchReferrers(ref: Reference, digest: Digest, artifactType?: string, signal?: AbortSignal): Promise<Referrer[]>;
  fetchManifest(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest>;
  fetchBlobBytes(ref: Reference, desc: Descriptor, limit: number, signal?: AbortSignal): Promise<Buffer>;
}

/** What discovery found, and how many it left unread over the limit. */
export interface Discovery {
  readonly signatures: readonly DiscoveredSignature[];
  /** Signature referrers beyond `maxSignatures` of their type, not handed on. */
  readonly unread: number;
}

/** Where to look: the referrers (Notary signatures, Sigstore bundles) and/or cosign's tag. */
export interface DiscoverWhere {
  readonly referrers: boolean;
  readonly cosignTag: boolean;
}

/**
 * The signature artifacts of `subject`'s manifest. A referrer that names the subject itself (a loop)
 * and entries beyond the limit are left out. Registry failures other than "not found" reject (a
 * signature that cannot be looked for is not a missing one).
 */
export async function discoverSignatures(
  registry: SignatureRegistry,
  subject: SignatureSubject,
  where: DiscoverWhere,
  limits: SignatureLimits,
  signal: AbortSignal,
): Promise<Discovery> {
  const ref = subject.reference;
  const found: DiscoveredSignature[] = [];
  let unread = 0;
  const [referrers, tag] = await Promise.all([
    where.referrers ? registry.fetchReferrers(ref, subject.digest, undefined, signal) : Promise.resolve([]),
    where.cosignTag ? cosignTagManifest(registry, subject, limits, signal) : Promise.resolve(undefined),
  ]);
  const perType = new Map<string, number>();
  for (const r of referrers) {
    const type = r.artifactType;
    if (type === undefined || !SIGNATURE_ARTIFACT_TYPES.includes(type) || r.digest === subject.digest) continue;
    const n = perType.get(type) ?? 0;
    if (n >= limits.maxSignatures) {
      unread++;
      continue;
    }
    perType.set(type, n + 1);
    found.push(artifact(registry, ref, 'referrers', r, type, limits, signal));
  }
  if (tag) found.push(tag);
  return { signatures: found, unread };
}

/** cosign's signature tag of the subject, `<alg>-<hex>.sig`, or undefined when the registry has none. */
async function cosignTagManifest(
  registry: SignatureRegistry,
  subject: SignatureSubject,
  limits: SignatureLimits,
  signal: AbortSignal,
): Promise<DiscoveredSignature | undefined> {
  let fetched: FetchedManifest;
  try {
    fetched = await registry.fetchManifest(subject.reference, `${subject.digest.replace(':', '-')}.sig`, signal);
  } catch (e) {
    if (isFastpullError(e) && e.code === 'NOT_FOUND') return undefined;
    throw e;
  }
  const descriptor: Descriptor = {
    mediaType: fetched.mediaType ?? 'application/vnd.oci.image.manifest.v1+json',
    digest: fetched.digest,
    size: fetched.bytes.length,
  };
  const sig = artifact(registry, subject.reference, 'cosign-tag', descriptor, COSIGN_SIMPLESIGNING, limits, signal);
  const parsed = parseSignatureManifest(fetched.bytes, `cosign signature tag of ${subject.digest}`, limits);
  return { ...sig, manifest: () => Promise.resolve(parsed) };
}

/** A discovered artifact whose manifest and blobs are read on demand, each once at most for the manifest. */
function artifact(
  registry: SignatureRegistry,
  ref: Reference,
  source: SignatureSource,
  descriptor: Descriptor,
  artifactType: string,
  limits: SignatureLimits,
  signal: AbortSignal,
): DiscoveredSignature {
  let manifest: Promise<SignatureManifest> | undefined;
  const what = `signature ${descriptor.digest} of ${ref.registry}/${ref.repository}`;
  return {
    source,
    descriptor,
    artifactType,
    manifest() {
      manifest ??= (async () => {
        if (descriptor.size > limits.maxArtifactBytes) throw tooLarge(what, descriptor.size, limits.maxArtifactBytes);
        const fetched = await registry.fetchManifest(ref, descriptor.digest, signal);
        if (fetched.bytes.length !== descriptor.size)
          throw new FastpullError('SIZE_MISMATCH', `${what}: manifest is ${fetched.bytes.length} bytes, its descriptor says ${descriptor.size}`);
        return parseSignatureManifest(fetched.bytes, what, limits);
      })();
      return manifest;
    },
    async blob(desc, limit) {
      const cap = Math.min(limit, limits.maxArtifactBytes);
      if (desc.size > cap) throw tooLarge(`${what}: blob ${desc.digest}`, desc.size, cap);
      return registry.fetchBlobBytes(ref, desc, cap, signal);
    },
  };
}

function tooLarge(what: string, size: number, limit: number): FastpullError {
  return new FastpullError('SIGNATURE_INVALID', `${what}: ${size} bytes, over the ${limit}-byte limit for signature artifacts`, { details: { size, limit } });
}

/** A signature artifact's manifest: an OCI image manifest (or an early artifact manifest, with `blobs`). */
export function parseSignatureManifest(bytes: Buffer, what: string, limits: SignatureLimits): SignatureManifest {
  if (bytes.length > limits.maxArtifactBytes) throw tooLarge(what, bytes.length, limits.maxArtifactBytes);
  const doc = parseJSONDocument(bytes, `${what}: manifest`, 'SIGNATURE_INVALID') as Record<string, unknown>;
  if (typeof doc !== 'object' || doc === null) throw new FastpullError('SIGNATURE_INVALID', `${what}: manifest is not an object`);
  const config = descriptorOf(doc.config);
  const list = Array.isArray(doc.layers) ? doc.layers : Array.isArray(doc.blobs) ? doc.blobs : [];
  const layers = (list as unknown[]).map(descriptorOf).filter((d): d is Descriptor => d !== undefined);
  const artifactType = typeof doc.artifactType === 'string' ? doc.artifactType : config?.mediaType;
  return { bytes, artifactType, config, layers, subject: descriptorOf(doc.subject), annotations: stringMap(doc.annotations) };
}

function descriptorOf(v: unknown): Descriptor | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const d = v as Record<string, unknown>;
  if (typeof d.mediaType !== 'string' || typeof d.digest !== 'string' || !Number.isSafeInteger(d.size) || (d.size as number) < 0) return undefined;
  let digest: Digest;
  try {
    digest = parseDigest(d.digest).digest;
  } catch {
    return undefined;
  }
  const annotations = stringMap(d.annotations);
  return { mediaType: d.mediaType, digest, size: d.size as number, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) };
}

function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof v !== 'object' || v === null) return out;
  for (const [k, s] of Object.entries(v)) if (typeof s === 'string') out[k] = s;
  return out;
}
