// The frame every kind of image signature plugs into: what a verifier is given (the image's manifest
// as the subject, the signature artifacts found for it, bounded fetches of their content) and what it
// answers (a verdict with one entry per check). Types only; discovery is discover.ts, the gate that
// runs the verifiers beside a pull is gate.ts.
//
// Words: a *signature* is one artifact that may sign the subject (a referrer of its manifest, or
// cosign's `sha256-<hex>.sig` tag); a *verifier* is one kind of policy (Notary Project trust policy,
// containers policy.json's sigstoreSigned) loaded from the user's files; a *verdict* is what one
// verifier decided about one image; the *image verdict* joins every verifier's.
import type { Digest } from '../oci/digest.js';
import type { Descriptor } from '../oci/manifest.js';
import type { Reference } from '../oci/reference.js';

/** The kinds of signature fastpull verifies. */
export type SignatureKind = 'notation' | 'sigstore';

/**
 * How strictly a verdict is enforced, as the Notary Project's trust policy names it. Sigstore
 * policies (policy.json) have no levels: their requirements are always `strict`.
 * - strict: every check must pass, else the pull is refused;
 * - permissive: integrity and authenticity must pass; a failed identity, expiry or revocation
 *   check is logged;
 * - audit: nothing refuses the pull; failures are logged;
 * - skip: no verification at all.
 */
export type SignatureLevel = 'strict' | 'permissive' | 'audit' | 'skip';

/**
 * What a verifier decided:
 * - verified: a signature passed every check its level enforces;
 * - skipped: the policy says not to verify this image (level skip, or no scope of it covers it);
 * - logged: checks failed where the level only logs them (audit, permissive); the pull goes on;
 * - missing: no signature of this kind was found for the image, and the level requires one;
 * - invalid: signatures were found but none passed (details say which check failed for which).
 * Only `missing` (SIGNATURE_MISSING) and `invalid` (SIGNATURE_INVALID) refuse a pull.
 */
export type SignatureOutcome = 'verified' | 'skipped' | 'logged' | 'missing' | 'invalid';

/** The image a signature must sign: its manifest (the platform's, as pulled) and the name it was pulled by. */
export interface SignatureSubject {
  /** The reference the image was asked for by (registry, repository, tag and/or digest). */
  readonly reference: Reference;
  /** Digest of the manifest the signature must name. */
  readonly digest: Digest;
  /** Its media type. */
  readonly mediaType: string;
  /** Its size in bytes. */
  readonly size: number;
}

/** How a signature artifact was found. */
export type SignatureSource = 'referrers' | 'cosign-tag';

/** A signature artifact's manifest, fetched, verified against its descriptor and parsed. */
export interface SignatureManifest {
  /** The manifest's bytes (at most the manifest size limit). */
  readonly bytes: Buffer;
  /** Its artifactType, else its config's media type. */
  readonly artifactType: string | undefined;
  /** Its config descriptor. */
  readonly config: Descriptor | undefined;
  /** Its layers (`blobs` of early OCI artifact manifests), each with its annotations. */
  readonly layers: readonly Descriptor[];
  /** The manifest it names as its subject, if any. */
  readonly subject: Descriptor | undefined;
  /** Its annotations. */
  readonly annotations: Readonly<Record<string, string>>;
}

/**
 * One signature artifact found for the subject. Its content is fetched only when a verifier asks,
 * through the bounded reads here (the registry client's auth, mirrors and retries; digests and
 * sizes checked; the pull's signal and the verification's deadline observed).
 */
export interface DiscoveredSignature {
  /** How it was found. */
  readonly source: SignatureSource;
  /** Its manifest's descriptor as the referrers list (or the tag) gave it. */
  readonly descriptor: Descriptor;
  /** The artifact type the referrers list gave; for a cosign tag, `application/vnd.dev.cosign.simplesigning.v1+json`. */
  readonly artifactType: string | undefined;
  /** Its manifest (fetched once; later calls share the answer). */
  manifest(): Promise<SignatureManifest>;
  /** One of its blobs, verified, refused (SIGNATURE_INVALID) when over `limit` bytes. */
  blob(descriptor: Descriptor, limit: number): Promise<Buffer>;
}

/** Limits that keep what a registry can make verification spend bounded. */
export interface SignatureLimits {
  /** Signature artifacts of each kind read per image; more are left unread (and said so). */
  readonly maxSignatures: number;
  /** Bytes of one signature manifest, envelope, bundle or payload. */
  readonly maxArtifactBytes: number;
  /** Milliseconds the whole verification of an image may take (discovery included). */
  readonly timeoutMs: number;
}

/** What a verifier is handed beside the subject and the signatures. */
export interface VerifyContext {
  /** Fires when the pull stops or the verification's time is up. */
  readonly signal: AbortSignal;
  /** The time the verification treats as now (certificate validity, expiry). */
  readonly now: Date;
  /** The limits in force. */
  readonly limits: SignatureLimits;
  /** How many signature artifacts discovery found but did not hand over (over maxSignatures). */
  readonly unread: number;
}

/** One check of one signature (or of the policy, when `signature` is absent). */
export interface SignatureCheck {
  /** The signature artifact's manifest digest; absent for checks of the image as a whole. */
  readonly signature?: Digest;
  /**
   * Which check: e.g. `discovery`, `policy`, `integrity` (the payload names this manifest),
   * `authenticity` (key, chain, trust store), `identity` (signedIdentity, trusted identities),
   * `expiry`, `revocation`, `transparency` (Rekor inclusion).
   */
  readonly check: string;
  /** Whether it passed. */
  readonly ok: boolean;
  /** What was found, in words. */
  readonly message: string;
}

/** What one verifier decided about one image. */
export interface SignatureVerdict {
  /** The verifier's kind. */
  readonly kind: SignatureKind;
  /** The level the policy applied to this image. */
  readonly level: SignatureLevel;
  /** The decision. */
  readonly outcome: SignatureOutcome;
  /** The policy scope that applied (a trust policy's name, a policy.json scope); absent: default. */
  readonly scope?: string;
  /** The signature that verified, when one did. */
  readonly signature?: Digest;
  /** Every check made, failed ones first where the outcome is not `verified`. */
  readonly checks: readonly SignatureCheck[];
}

/**
 * One kind of signature policy, loaded from the user's files. The gate asks `covers` first and calls
 * `verify` only for images it covers; `verify` never throws for a bad signature (that is an
 * `invalid` verdict), only for an abort or a bug.
 */
export interface SignatureVerifier {
  /** The kind of signature it verifies. */
  readonly kind: SignatureKind;
  /** Whether its policy says anything about images of `reference` (other than "accept anything"). */
  covers(reference: Reference): boolean;
  /** Decides about the subject from the signatures found (those of other kinds included: it picks its own). */
  verify(subject: SignatureSubject, signatures: readonly DiscoveredSignature[], context: VerifyContext): Promise<SignatureVerdict>;
}

/**
 * What was decided about an image, kept with its record (`fastpull inspect`, `images --json`,
 * fastpulld's Image message). Absent from a record: no policy covered the image.
 */
export interface ImageSignatures {
  /** `verified` when every verifier verified; otherwise the weakest of them that let the pull go on. */
  readonly outcome: 'verified' | 'logged' | 'skipped';
  /** Each verifier's verdict. */
  readonly verdicts: readonly SignatureVerdict[];
  /** When the verdict was made (ISO 8601). */
  readonly verifiedAt: string;
}
