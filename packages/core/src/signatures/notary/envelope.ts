// Notary Project signature envelopes, JWS (application/jose+json) and COSE (application/cose), parsed
// into one shape and checked for integrity: the signature verifies with the leaf certificate's key under
// the algorithm that key implies, the signed attributes the specification requires are present and
// marked critical, and no critical attribute is one this verifier does not understand.
import { constants, createHash, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { checkCodeSigningChain, keyAlgorithm, MAX_CHAIN_CERTIFICATES, parseCertificate, type ChainCertificate, type SignatureAlgorithm } from './chain.js';
import type { ParsedEnvelope } from './parsed.js';
import { parseJws } from './jws.js';

export const JWS_MEDIA_TYPE = 'application/jose+json';
export const COSE_MEDIA_TYPE = 'application/cose';
/** The payload type both envelopes must declare. */
export const PAYLOAD_CONTENT_TYPE = 'application/vnd.cncf.notary.payload.v1+json';
/** Largest envelope read: a few certificates and a descriptor are a few KiB. */
export const MAX_ENVELOPE_BYTES = 256 * 1024;

/** Signed attributes this verifier understands; any other marked critical fails integrity. */
export const KNOWN_ATTRIBUTES = new Set([
  'io.cncf.notary.signingScheme',
  'io.cncf.notary.signingTime',
  'io.cncf.notary.authenticSigningTime',
  'io.cncf.notary.expiry',
]);

/** An envelope whose integrity checked out. */
export interface VerifiedEnvelope extends ParsedEnvelope {
  readonly chain: readonly ChainCertificate[];
  readonly target: { mediaType?: unknown; digest?: unknown; size?: unknown };
}

/** The COSE parser and its CBOR library, loaded at the first COSE envelope (notation signs JWS by default). */
let cose: Promise<typeof import('./cose.js')> | undefined;

export async function parseEnvelope(mediaType: string, bytes: Uint8Array): Promise<ParsedEnvelope> {
  if (bytes.length > MAX_ENVELOPE_BYTES) throw new Error(`the envelope is ${bytes.length} bytes, more than ${MAX_ENVELOPE_BYTES}`);
  if (mediaType === JWS_MEDIA_TYPE) return parseJws(bytes);
  if (mediaType === COSE_MEDIA_TYPE) return (await (cose ??= import('./cose.js'))).parseCose(bytes);
  throw new Error(`envelope media type ${JSON.stringify(mediaType)} is neither ${JWS_MEDIA_TYPE} nor ${COSE_MEDIA_TYPE}`);
}

function hashOf(alg: SignatureAlgorithm): string {
  return `sha${alg.slice(2)}`;
}

function verifySignature(alg: SignatureAlgorithm, key: KeyObject, input: Uint8Array, signature: Uint8Array): boolean {
  if (alg.startsWith('PS')) {
    const saltLength = Number(alg.slice(2)) / 8;
    return cryptoVerify(hashOf(alg), input, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength }, signature);
  }
  return cryptoVerify(hashOf(alg), input, { key, dsaEncoding: 'ieee-p1363' }, signature);
}

/** Checks the attributes the signing scheme requires and that every critical one is understood. */
function checkAttributes(env: ParsedEnvelope): string | undefined {
  if (env.contentType !== PAYLOAD_CONTENT_TYPE) return `payload content type ${JSON.stringify(env.contentType)} is not ${PAYLOAD_CONTENT_TYPE}`;
  const mustBeCritical = ['io.cncf.notary.signingScheme'];
  if (env.scheme === 'notary.x509.signingAuthority') mustBeCritical.push('io.cncf.notary.authenticSigningTime');
  if (env.expiry) mustBeCritical.push('io.cncf.notary.expiry');
  const notCritical = mustBeCritical.filter((a) => !env.critical.includes(a));
  if (notCritical.length > 0) return `required attributes not marked critical: ${notCritical.join(', ')}`;
  for (const name of env.critical) {
    if (!env.present.has(name)) return `attribute ${name} is marked critical but not present`;
    if (!KNOWN_ATTRIBUTES.has(name)) return `critical attribute ${name} is not understood by this verifier`;
  }
  if (env.expiry && env.expiry <= env.signingTime) return 'the expiry is not after the signing time';
  return undefined;
}

/**
 * The integrity validation: parses, checks the signature with the leaf key and the attributes, and
 * that the chain meets the certificate requirements. Returns the envelope, or the reason it fails.
 */
export async function checkIntegrity(mediaType: string, bytes: Uint8Array): Promise<VerifiedEnvelope | string> {
  let env: ParsedEnvelope;
  let chain: ChainCertificate[];
  try {
    env = await parseEnvelope(mediaType, bytes);
    if (env.certificates.length === 0) return 'the envelope carries no certificate chain';
    if (env.certificates.length > MAX_CHAIN_CERTIFICATES)
      return `the envelope carries ${env.certificates.length} certificates, more than ${MAX_CHAIN_CERTIFICATES}`;
    chain = env.certificates.map(parseCertificate);
  } catch (e) {
    return `the envelope cannot be parsed: ${(e as Error).message}`;
  }
  const keyAlg = keyAlgorithm(chain[0]!.x509.publicKey);
  if (keyAlg === undefined) return `the signing certificate's key is not one the specification allows`;
  if (keyAlg !== env.algorithm) return `the envelope says ${env.algorithm} but the signing certificate's key calls for ${keyAlg}`;
  if (!verifySignature(env.algorithm, chain[0]!.x509.publicKey, env.signingInput, env.signature))
    return 'the signature does not verify with the signing certificate';
  const attrs = checkAttributes(env);
  if (attrs) return attrs;
  const chainProblem = checkCodeSigningChain(chain);
  if (chainProblem) return `the certificate chain is invalid: ${chainProblem}`;
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(env.payload).toString('utf8'));
  } catch {
    return 'the payload is not JSON';
  }
  const target = (payload as { targetArtifact?: unknown } | null)?.targetArtifact;
  if (typeof target !== 'object' || target === null) return 'the payload names no targetArtifact';
  return { ...env, chain, target: target };
}

/** The SHA-256 fingerprint of a certificate, for messages. */
export function fingerprint(der: Uint8Array): string {
  return createHash('sha256').update(der).digest('hex');
}
