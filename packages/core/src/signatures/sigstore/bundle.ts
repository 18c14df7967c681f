// Sigstore bundles (`application/vnd.dev.sigstore.bundle.v0.3+json` referrers, what cosign 3 writes
// by default): the bundle's own format, its signature, its transparency log entries and its
// certificate are checked by Sigstore's JS libraries; what is fastpull's to decide is which keys,
// CAs and Rekor keys the policy trusts, and whether the signed in-toto statement names this image.
// cosign's `.sig` tag signatures under a Fulcio CA or Rekor keys are checked here too, their layer
// annotations read as the parts of a message-signature bundle. Loaded only when first needed.
import { createHash, X509Certificate, type KeyObject } from 'node:crypto';
import { assertBundle, bundleFromJSON, type Bundle } from '@sigstore/bundle';
import { X509Certificate as SigstoreCertificate } from '@sigstore/core';
import { PolicyError, toSignedEntity, VerificationError, Verifier, type TrustMaterial, type VerificationPolicy } from '@sigstore/verify';
import type { Digest } from '../../oci/digest.js';
import type { SigstoreRequirement } from '../policy.js';
import type { SignatureCheck, SignatureSubject } from '../types.js';
import { matchUnnamedIdentity } from './identity.js';

/** The in-toto predicate type of a `cosign sign` signature (attestations carry others). */
export const COSIGN_SIGN_PREDICATE = 'https://sigstore.dev/cosign/sign/v1';
const IN_TOTO_PAYLOAD = 'application/vnd.in-toto+json';
const IN_TOTO_STATEMENTS = ['https://in-toto.io/Statement/v1', 'https://in-toto.io/Statement/v0.1'];
/** Validity given to what the policy names: policy.json carries no time bounds for its keys and CAs. */
const ALWAYS = { start: new Date(0), end: new Date(8640000000000000) };

/**
 * Every check of one bundle under `req`: `authenticity` (the signature verifies with a policy key,
 * or with a certificate that chains to the policy's CA, valid when the log says it signed),
 * `transparency` (its Rekor entry verifies with a policy Rekor key and matches the signature; only
 * where the policy names Rekor keys), `integrity` (the signed statement names the image's digest),
 * `identity` (the certificate's OIDC issuer and email; then signedIdentity).
 */
export function verifyBundle(req: SigstoreRequirement, subject: SignatureSubject, bytes: Buffer, signature: Digest): SignatureCheck[] {
  const fail = (check: string, message: string): SignatureCheck[] => [{ signature, check, ok: false, message }];
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON(JSON.parse(bytes.toString('utf8')));
    assertBundle(bundle);
  } catch (e) {
    const fields = (e as { fields?: unknown }).fields;
    const which = Array.isArray(fields) && fields.length > 0 ? ` (${fields.slice(0, 5).join(', ')})` : '';
    return fail('authenticity', `not a Sigstore bundle: ${(e as Error).message}${which}`);
  }
  if (bundle.content.$case !== 'dsseEnvelope')
    return fail('integrity', 'a message-signature bundle signs a blob, not an image (cosign signs images with a DSSE envelope)');
  const checks: SignatureCheck[] = [];
  const proved = verifyEntity(req, bundle, signature);
  checks.push(...proved);
  if (proved.some((c) => !c.ok)) return checks;
  const named = statementDigest(bundle.content.dsseEnvelope.payloadType, bundle.content.dsseEnvelope.payload, subject.digest);
  checks.push({ signature, check: 'integrity', ok: named === undefined, message: named ?? `the signed statement names ${subject.digest}` });
  if (named !== undefined) return checks;
  const identity = matchUnnamedIdentity(req.signedIdentity);
  checks.push({ signature, check: 'identity', ok: identity.ok, message: identity.message });
  return checks;
}

/**
 * Authenticity, transparency and certificate identity of a `.sig` tag signature, for policies that
 * name a Fulcio CA or Rekor keys: cosign's layer annotations (the signature, the certificate, the
 * Rekor entry it was logged as) are the parts of a message-signature bundle, checked as one. The
 * payload's claims (integrity, signedIdentity) are the caller's.
 */
export function verifyTagSignature(
  req: SigstoreRequirement,
  payload: Buffer,
  raw: Buffer,
  certificate: string | undefined,
  rekorBundle: string | undefined,
  signature: Digest,
): SignatureCheck[] {
  const fail = (check: string, message: string): SignatureCheck[] => [{ signature, check, ok: false, message }];
  let der: Buffer | undefined;
  if (certificate !== undefined) {
    try {
      der = new X509Certificate(certificate).raw;
    } catch (e) {
      return fail('authenticity', `the signature's certificate does not parse: ${(e as Error).message}`);
    }
  }
  const entries: unknown[] = [];
  if (rekorBundle !== undefined) {
    const entry = rekorEntry(rekorBundle);
    if (typeof entry === 'string') return fail('transparency', entry);
    entries.push(entry);
  }
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON({
      mediaType: 'application/vnd.dev.sigstore.bundle+json;version=0.1',
      verificationMaterial: {
        ...(der ? { x509CertificateChain: { certificates: [{ rawBytes: der.toString('base64') }] } } : { publicKey: { hint: '' } }),
        tlogEntries: entries,
      },
      messageSignature: {
        messageDigest: { algorithm: 'SHA2_256', digest: createHash('sha256').update(payload).digest('base64') },
        signature: raw.toString('base64'),
      },
    });
    assertBundle(bundle);
  } catch (e) {
    return fail('transparency', `the signature's Rekor entry is not one: ${(e as Error).message}`);
  }
  return verifyEntity(req, bundle, signature, payload);
}

/** cosign's `dev.sigstore.cosign/bundle` annotation as a bundle's log entry (serialized), or why it is not one. */
function rekorEntry(text: string): object | string {
  const bad = 'the dev.sigstore.cosign/bundle annotation is not a Rekor entry';
  let doc: { SignedEntryTimestamp?: unknown; Payload?: { body?: unknown; integratedTime?: unknown; logIndex?: unknown; logID?: unknown } };
  try {
    doc = JSON.parse(text) as typeof doc;
  } catch {
    return bad;
  }
  const p = doc?.Payload;
  if (
    typeof doc?.SignedEntryTimestamp !== 'string' ||
    typeof p?.body !== 'string' ||
    !Number.isSafeInteger(p.integratedTime) ||
    !Number.isSafeInteger(p.logIndex) ||
    typeof p.logID !== 'string' ||
    !/^[0-9a-f]{64}$/.test(p.logID)
  )
    return bad;
  let body: { kind?: unknown; apiVersion?: unknown };
  try {
    body = JSON.parse(Buffer.from(p.body, 'base64').toString('utf8')) as typeof body;
  } catch {
    return bad;
  }
  if (typeof body?.kind !== 'string' || typeof body.apiVersion !== 'string') return bad;
  return {
    logIndex: String(p.logIndex),
    logId: { keyId: Buffer.from(p.logID, 'hex').toString('base64') },
    kindVersion: { kind: body.kind, version: body.apiVersion },
    integratedTime: String(p.integratedTime),
    inclusionPromise: { signedEntryTimestamp: doc.SignedEntryTimestamp },
    canonicalizedBody: p.body,
  };
}

/** Authenticity, transparency and (keyless) certificate identity, by @sigstore/verify; one try per policy key. */
function verifyEntity(req: SigstoreRequirement, bundle: Bundle, signature: Digest, artifact?: Buffer): SignatureCheck[] {
  const entity = toSignedEntity(bundle, artifact);
  const keyless = req.fulcio !== undefined;
  if (keyless && entity.key.$case !== 'certificate')
    return [{ signature, check: 'authenticity', ok: false, message: 'the bundle is signed with a key; the policy names a Fulcio CA' }];
  if (!keyless && entity.key.$case !== 'public-key')
    return [{ signature, check: 'authenticity', ok: false, message: 'the bundle is signed with a certificate; the policy names keys' }];
  const rekor = req.rekorKeys.length > 0;
  const options = { tlogThreshold: rekor ? 1 : 0, ctlogThreshold: 0, timestampThreshold: keyless ? 1 : 0 };
  const policy: VerificationPolicy | undefined = req.fulcio
    ? { subjectAlternativeName: req.fulcio.subjectEmail, extensions: { issuer: req.fulcio.oidcIssuer } }
    : undefined;
  const names = checkpointNames(bundle);
  const materials = keyless ? [trustMaterial(req, undefined, names)] : req.keys.map((k) => trustMaterial(req, k, names));
  let failure: SignatureCheck | undefined;
  for (const material of materials) {
    try {
      new Verifier(material, options).verify(entity, policy);
    } catch (e) {
      const f = explain(e, keyless, materials.length);
      // A failure other than "not this key" is the same for every key: keep the most telling one.
      if (!failure || failure.check === 'authenticity') failure = { signature, ...f };
      continue;
    }
    const out: SignatureCheck[] = [
      {
        signature,
        check: 'authenticity',
        ok: true,
        message: keyless ? `the certificate chains to the policy's Fulcio CA and made the signature` : 'signed by a policy key',
      },
    ];
    if (rekor)
      out.push({
        signature,
        check: 'transparency',
        ok: true,
        message: `its Rekor entry (integrated ${integrated(bundle)}) verifies with the policy's Rekor key and matches the signature`,
      });
    if (req.fulcio)
      out.push({ signature, check: 'identity', ok: true, message: `certificate of ${req.fulcio.subjectEmail} issued on ${req.fulcio.oidcIssuer}` });
    return out;
  }
  return [failure!];
}

/** What the libraries' error means as one of fastpull's checks. */
function explain(e: unknown, keyless: boolean, keys: number): { check: string; ok: false; message: string } {
  if (e instanceof PolicyError) return { check: 'identity', ok: false, message: `the certificate's identity is not the policy's: ${e.message}` };
  if (!(e instanceof VerificationError)) return { check: 'authenticity', ok: false, message: `the bundle does not verify: ${(e as Error).message}` };
  const why = e.cause instanceof Error ? `${e.message}: ${e.cause.message}` : e.message;
  switch (e.code) {
    case 'TLOG_ERROR':
    case 'TLOG_BODY_ERROR':
    case 'TLOG_INCLUSION_PROMISE_ERROR':
    case 'TLOG_INCLUSION_PROOF_ERROR':
    case 'TLOG_MISSING_INCLUSION_ERROR':
      return { check: 'transparency', ok: false, message: `the Rekor entry does not prove the signature with the policy's Rekor key: ${why}` };
    case 'TIMESTAMP_ERROR':
      return { check: 'transparency', ok: false, message: `no verified time of signing (a Rekor entry with a signed entry timestamp): ${why}` };
    case 'CERTIFICATE_ERROR':
      return { check: 'authenticity', ok: false, message: `the certificate does not chain to the policy's Fulcio CA at the logged time of signing: ${why}` };
    default:
      return {
        check: 'authenticity',
        ok: false,
        message: keyless
          ? `the signature does not verify with its certificate: ${why}`
          : `the signature does not verify with ${keys === 1 ? 'the policy key' : `any of the ${keys} policy keys`}`,
      };
  }
}

/**
 * The trust material of one policy key (the bundle's key hint is not trusted to pick it), or of the
 * Fulcio CA. policy.json trusts a Rekor key whatever the log calls itself, so each Rekor key is
 * offered under every name the bundle's checkpoints are signed by (the library matches that name
 * against the log's URL; the key still has to verify the signature).
 */
function trustMaterial(req: SigstoreRequirement, key: KeyObject | undefined, names: readonly string[]): TrustMaterial {
  const logs = req.rekorKeys.map((k) => ({
    key: k,
    logID: createHash('sha256')
      .update(k.export({ type: 'spki', format: 'der' }))
      .digest(),
  }));
  return {
    certificateAuthorities: req.fulcio ? [{ certChain: req.fulcio.ca.map((c) => SigstoreCertificate.parse(c.raw)), validFor: ALWAYS }] : [],
    timestampAuthorities: [],
    tlogs: logs.flatMap(({ key: publicKey, logID }) => names.map((baseURL) => ({ logID, baseURL, publicKey, validFor: ALWAYS }))),
    ctlogs: [],
    publicKey: () => {
      if (!key) throw new VerificationError({ code: 'PUBLIC_KEY_ERROR', message: 'the policy names a Fulcio CA, not keys; the bundle is signed with a key' });
      return { publicKey: key, validFor: () => true };
    },
  };
}

/**
 * The signer names of the bundle's checkpoints, at most a few, and '' for entries without one. The
 * library searches the log's URL for the name as a pattern: a name searches itself out (one with
 * pattern characters that do not match themselves fails, which refuses rather than accepts).
 */
function checkpointNames(bundle: Bundle): string[] {
  const names = new Set<string>(['']);
  for (const e of bundle.verificationMaterial.tlogEntries) {
    for (const m of (e.inclusionProof?.checkpoint?.envelope ?? '').matchAll(/\u2014 (\S+) /g)) if (names.size < 8) names.add(m[1]!);
  }
  return [...names];
}

function integrated(bundle: Bundle): string {
  const t = bundle.verificationMaterial.tlogEntries.find((e) => e.integratedTime !== '0')?.integratedTime;
  return t === undefined ? 'at an unknown time' : new Date(Number(t) * 1000).toISOString();
}

/** Undefined when the DSSE payload is an in-toto statement of cosign's signature predicate naming `digest`; else why not. */
function statementDigest(payloadType: string, payload: Buffer, digest: Digest): string | undefined {
  if (payloadType !== IN_TOTO_PAYLOAD) return `the envelope's payload type is ${JSON.stringify(payloadType.slice(0, 100))}, not ${IN_TOTO_PAYLOAD}`;
  let doc: { _type?: unknown; subject?: unknown; predicateType?: unknown };
  try {
    doc = JSON.parse(payload.toString('utf8')) as typeof doc;
  } catch {
    return 'the signed statement is not JSON';
  }
  if (typeof doc !== 'object' || doc === null || !IN_TOTO_STATEMENTS.includes(doc._type as string)) return 'the signed payload is not an in-toto statement';
  if (doc.predicateType !== COSIGN_SIGN_PREDICATE)
    return `the statement is an attestation (predicate ${JSON.stringify(String(doc.predicateType).slice(0, 100))}), not a cosign signature`;
  const [alg, hex] = digest.split(':') as [string, string];
  const subjects = Array.isArray(doc.subject) ? (doc.subject as { digest?: Record<string, unknown> }[]) : [];
  if (subjects.some((s) => s?.digest?.[alg] === hex)) return undefined;
  const named = subjects.flatMap((s) => Object.entries(s?.digest ?? {}).map(([a, h]) => `${a}:${String(h)}`));
  return `the statement signs ${named.length > 0 ? named.slice(0, 3).join(', ') : 'no digest'}, not ${digest}`;
}
