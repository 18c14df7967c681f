// cosign's tag-scheme signatures: each layer of the `sha256-<hex>.sig` manifest is a simple-signing
// payload (JSON naming the manifest digest and the reference signed), its signature in the layer's
// `dev.cosignproject.cosign/signature` annotation. Checks here are pure; fetching is the caller's.
import { verify as verifySignature, type KeyObject } from 'node:crypto';

/** Layer annotation holding the base64 signature of the payload. */
export const COSIGN_SIGNATURE_ANNOTATION = 'dev.cosignproject.cosign/signature';
/** Layer annotation of a keyless signature's certificate (PEM). */
export const COSIGN_CERTIFICATE_ANNOTATION = 'dev.sigstore.cosign/certificate';
/** Layer annotation holding the Rekor entry the signature was logged as. */
export const COSIGN_BUNDLE_ANNOTATION = 'dev.sigstore.cosign/bundle';
/** The `critical.type` every cosign container image signature carries. */
export const COSIGN_SIGNATURE_TYPE = 'cosign container image signature';

/** What a payload claims. */
export interface SimpleSigningClaims {
  readonly manifestDigest: string;
  readonly dockerReference: string;
}

/**
 * The claims of a simple-signing payload, or a reason it has none: JSON with
 * `critical.type` = "cosign container image signature", `critical.image.docker-manifest-digest` and
 * `critical.identity.docker-reference` strings.
 */
export function parseSimpleSigning(payload: Buffer): SimpleSigningClaims | string {
  let doc: unknown;
  try {
    doc = JSON.parse(payload.toString('utf8'));
  } catch {
    return 'the payload is not JSON';
  }
  const critical = (
    doc as { critical?: { type?: unknown; image?: { 'docker-manifest-digest'?: unknown }; identity?: { 'docker-reference'?: unknown } } } | null
  )?.critical;
  if (typeof critical !== 'object' || critical === null) return 'the payload has no critical section';
  if (critical.type !== COSIGN_SIGNATURE_TYPE)
    return `the payload's critical.type is ${JSON.stringify(critical.type)}, not ${JSON.stringify(COSIGN_SIGNATURE_TYPE)}`;
  const digest = critical.image?.['docker-manifest-digest'];
  const reference = critical.identity?.['docker-reference'];
  if (typeof digest !== 'string') return 'the payload names no critical.image.docker-manifest-digest';
  if (typeof reference !== 'string') return 'the payload names no critical.identity.docker-reference';
  return { manifestDigest: digest, dockerReference: reference };
}

/**
 * Whether `signature` over `payload` verifies with `key`, with the hash cosign signs with: SHA-256
 * for ECDSA and RSA (PKCS#1 v1.5), none for Ed25519.
 */
export function verifiesWith(key: KeyObject, payload: Buffer, signature: Buffer): boolean {
  const hash = key.asymmetricKeyType === 'ed25519' || key.asymmetricKeyType === 'ed448' ? null : 'sha256';
  try {
    return verifySignature(hash, payload, key, signature);
  } catch {
    // A signature that is not even well-formed for the key's algorithm does not verify.
    return false;
  }
}

/** Base64 as cosign writes it, or undefined for anything else. */
export function decodeBase64(text: string | undefined): Buffer | undefined {
  if (text === undefined || text.length === 0 || text.length > 16384 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text.trim())) return undefined;
  return Buffer.from(text, 'base64');
}
