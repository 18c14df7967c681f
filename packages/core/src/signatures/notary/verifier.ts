// The Notary Project verifier as the signature gate sees it: covers the repositories a trust policy
// statement (other than skip) covers, reads the envelopes of the notary signatures discovery found,
// within the gate's limits and its own, and turns verifyNotary's verdict into the gate's.
import { isFastpullError } from '../../errors.js';
import type { Digest } from '../../oci/digest.js';
import type { Reference } from '../../oci/reference.js';
import type { DiscoveredSignature, SignatureCheck, SignatureSubject, SignatureVerdict, SignatureVerifier, VerifyContext } from '../types.js';
import { COSE_MEDIA_TYPE, JWS_MEDIA_TYPE, MAX_ENVELOPE_BYTES } from './envelope.js';
import { NOTARY_ARTIFACT_TYPE, type UnreadableSignature } from './fetch.js';
import { applicablePolicy, loadNotaryConfig } from './policy.js';
import type { NotaryConfig, NotarySignature, NotaryVerdict } from './types.js';
import { MAX_SIGNATURES_EVALUATED, verifyNotary } from './verify.js';

/** The repository as trust policy scopes name it: `HOST/PATH`. */
function scopeOf(reference: Reference): string {
  return `${reference.registry}/${reference.repository}`;
}

async function readEnvelope(sig: DiscoveredSignature, limit: number): Promise<NotarySignature | UnreadableSignature> {
  const digest = sig.descriptor.digest;
  try {
    const manifest = await sig.manifest();
    const layer = manifest.layers.length === 1 ? manifest.layers[0] : undefined;
    if (!layer || (layer.mediaType !== JWS_MEDIA_TYPE && layer.mediaType !== COSE_MEDIA_TYPE)) {
      return { digest, reason: `the signature manifest does not hold exactly one ${JWS_MEDIA_TYPE} or ${COSE_MEDIA_TYPE} blob` };
    }
    if (layer.size > limit) return { digest, reason: `the envelope is ${layer.size} bytes, more than ${limit}` };
    return { digest, mediaType: layer.mediaType, envelope: await sig.blob(layer, limit) };
  } catch (e) {
    // A bad artifact is a signature that fails integrity; anything else (abort, registry down) is not a verdict.
    if (
      isFastpullError(e) &&
      (e.code.startsWith('SIGNATURE_') ||
        e.code === 'INVALID_MANIFEST' ||
        e.code === 'DIGEST_MISMATCH' ||
        e.code === 'SIZE_MISMATCH' ||
        e.code === 'MANIFEST_TOO_LARGE')
    ) {
      return { digest, reason: e.message };
    }
    throw e;
  }
}

function toGateVerdict(v: NotaryVerdict, unread: number): SignatureVerdict {
  const checks: SignatureCheck[] = [];
  for (const s of v.signatures) {
    for (const c of s.checks) {
      const message = c.ok ? `passed (${c.action})` : `${c.reason ?? 'failed'}${c.action === 'log' ? ' (logged)' : ''}`;
      checks.push({ signature: s.digest as Digest, check: c.validation, ok: c.ok, message });
    }
  }
  if (v.signatures.length === 0 && v.outcome !== 'skipped') checks.push({ check: 'discovery', ok: false, message: v.reason ?? 'no Notary Project signature' });
  if (unread > 0) checks.push({ check: 'discovery', ok: true, message: `${unread} more signature artifacts were not read` });
  if (v.outcome !== 'verified') checks.sort((a, b) => Number(a.ok) - Number(b.ok));
  return {
    kind: 'notation',
    level: v.level ?? 'skip',
    outcome: v.outcome,
    ...(v.policy !== undefined && { scope: v.policy }),
    ...(v.signature !== undefined && { signature: v.signature as Digest }),
    checks,
  };
}

/** A SignatureVerifier over a loaded notation configuration. */
export function notationVerifier(config: NotaryConfig): SignatureVerifier {
  return {
    kind: 'notation',
    covers(reference: Reference): boolean {
      const policy = applicablePolicy(config, scopeOf(reference));
      return policy !== undefined && policy.level.name !== 'skip';
    },
    async verify(subject: SignatureSubject, signatures: readonly DiscoveredSignature[], context: VerifyContext): Promise<SignatureVerdict> {
      const limit = Math.min(MAX_ENVELOPE_BYTES, context.limits.maxArtifactBytes);
      const ours = signatures.filter((s) => s.artifactType === NOTARY_ARTIFACT_TYPE);
      const read = ours.slice(0, MAX_SIGNATURES_EVALUATED);
      const readable: NotarySignature[] = [];
      const unreadable: UnreadableSignature[] = [];
      for (const sig of read) {
        const r = await readEnvelope(sig, limit);
        if ('envelope' in r) readable.push(r);
        else unreadable.push(r);
      }
      const target = { mediaType: subject.mediaType, digest: subject.digest, size: subject.size };
      const verdict = await verifyNotary(config, {
        repository: scopeOf(subject.reference),
        target,
        signatures: readable,
        unreadable,
        now: context.now,
        signal: context.signal,
      });
      return toGateVerdict(verdict, context.unread + ours.length - read.length);
    },
  };
}

/**
 * Loads the Notary Project verifier from a notation configuration directory (`trustpolicy.json` or
 * `trustpolicy.oci.json`, `truststore/x509/...`); INVALID_ARGUMENT for anything unusable.
 * @example
 * const gate = { verifiers: [await loadNotationVerifier('/etc/notation')] };
 */
export async function loadNotationVerifier(dir: string): Promise<SignatureVerifier> {
  return notationVerifier(await loadNotaryConfig(dir));
}
