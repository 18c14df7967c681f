// The Sigstore/cosign verifier: a containers policy.json's requirements for the image's scope, met by
// the signatures found. Every requirement of the scope must hold; a `sigstoreSigned` one holds when
// one signature passes all of its checks (authenticity, integrity, identity, transparency).
import { isFastpullError } from '../../errors.js';
import type { Descriptor } from '../../oci/manifest.js';
import type { Reference } from '../../oci/reference.js';
import { COSIGN_SIMPLESIGNING, SIGSTORE_BUNDLE_V03 } from '../discover.js';
import { containersPolicyFor, type ContainersPolicy, type PolicyRequirement, type SigstoreRequirement } from '../policy.js';
import type { DiscoveredSignature, SignatureCheck, SignatureSubject, SignatureVerdict, SignatureVerifier, VerifyContext } from '../types.js';
import { matchIdentity } from './identity.js';
import {
  COSIGN_BUNDLE_ANNOTATION,
  COSIGN_CERTIFICATE_ANNOTATION,
  COSIGN_SIGNATURE_ANNOTATION,
  decodeBase64,
  parseSimpleSigning,
  verifiesWith,
} from './simplesigning.js';

/** One candidate signature: a payload layer of cosign's tag, or the bundle layer of a bundle referrer. */
interface Candidate {
  readonly artifact: DiscoveredSignature;
  readonly layer: Descriptor;
  readonly format: 'simplesigning' | 'bundle';
}

/** The bundle checks, with @sigstore/verify behind them, loaded when the first bundle is met. */
let bundleModule: Promise<typeof import('./bundle.js')> | undefined;

/**
 * Verifies images against the `sigstoreSigned` requirements of a containers policy.json.
 * @example
 * const verifier = new SigstoreVerifier(loadContainersPolicy('/etc/containers/policy.json'));
 * await pull('registry.example.com/app:1', { root, signatures: { verifiers: [verifier] } });
 */
export class SigstoreVerifier implements SignatureVerifier {
  /** Always 'sigstore'. */
  readonly kind = 'sigstore' as const;

  /** @param policy the loaded policy.json (see loadContainersPolicy) */
  constructor(readonly policy: ContainersPolicy) {}

  /** Whether the policy's scope for `reference` requires more than insecureAcceptAnything. */
  covers(reference: Reference): boolean {
    return containersPolicyFor(this.policy, reference).requirements.some((r) => r.type !== 'insecureAcceptAnything');
  }

  /** The verdict of the scope's requirements over the signatures found. */
  async verify(subject: SignatureSubject, signatures: readonly DiscoveredSignature[], context: VerifyContext): Promise<SignatureVerdict> {
    const { scope, requirements } = containersPolicyFor(this.policy, subject.reference);
    // Keys in the order SignatureVerdict declares them, as every kind writes them: a verdict read back
    // from fastpulld's wire prints exactly as the one the store keeps.
    const verdict = (outcome: SignatureVerdict['outcome'], checks: SignatureCheck[], signature?: Descriptor['digest']): SignatureVerdict => ({
      kind: this.kind,
      level: 'strict',
      outcome,
      ...(scope !== undefined ? { scope } : {}),
      ...(signature ? { signature } : {}),
      checks,
    });
    const checks: SignatureCheck[] = [];
    let missing = false;
    let signature: Descriptor['digest'] | undefined;
    for (const req of requirements) {
      const r = await this.requirement(req, subject, signatures, context);
      checks.push(...r.checks);
      if (r.outcome === 'missing') missing = true;
      else if (r.outcome === 'invalid') return verdict('invalid', failedFirst(checks));
      else signature ??= r.signature;
    }
    if (missing) return verdict('missing', failedFirst(checks));
    return verdict('verified', checks, signature);
  }

  private async requirement(
    req: PolicyRequirement,
    subject: SignatureSubject,
    signatures: readonly DiscoveredSignature[],
    context: VerifyContext,
  ): Promise<{ outcome: 'verified' | 'missing' | 'invalid'; checks: SignatureCheck[]; signature?: Descriptor['digest'] }> {
    switch (req.type) {
      case 'insecureAcceptAnything':
        return { outcome: 'verified', checks: [{ check: 'policy', ok: true, message: 'insecureAcceptAnything' }] };
      case 'reject':
        return { outcome: 'invalid', checks: [{ check: 'policy', ok: false, message: `${this.policy.path} rejects every image of this scope` }] };
      case 'signedBy':
        return {
          outcome: 'invalid',
          checks: [{ check: 'policy', ok: false, message: `${this.policy.path} requires signedBy (GPG), which fastpull does not verify` }],
        };
      case 'sigstoreSigned':
        return this.sigstoreSigned(req, subject, signatures, context);
    }
  }

  /** Met when one candidate passes every check; missing when there is no candidate at all. */
  private async sigstoreSigned(req: SigstoreRequirement, subject: SignatureSubject, signatures: readonly DiscoveredSignature[], context: VerifyContext) {
    const checks: SignatureCheck[] = [];
    const candidates = await this.candidates(signatures, context, checks);
    if (candidates.length === 0) {
      checks.push({ check: 'discovery', ok: false, message: `no cosign signature of ${subject.digest} found (neither its .sig tag nor a Sigstore bundle)` });
      return { outcome: checks.some((c) => c.check !== 'discovery') ? ('invalid' as const) : ('missing' as const), checks };
    }
    for (const c of candidates) {
      const result = await this.candidate(req, subject, c, context);
      checks.push(...result);
      if (result.every((r) => r.ok)) return { outcome: 'verified' as const, checks: result, signature: c.artifact.descriptor.digest };
    }
    return { outcome: 'invalid' as const, checks };
  }

  /**
   * The payload layers of the cosign tag and the bundle layers of bundle referrers, at most
   * `maxSignatures`; what could not be read is a failed check.
   */
  private async candidates(signatures: readonly DiscoveredSignature[], context: VerifyContext, checks: SignatureCheck[]): Promise<Candidate[]> {
    const out: Candidate[] = [];
    for (const artifact of signatures) {
      const format = artifact.source === 'cosign-tag' ? 'simplesigning' : artifact.artifactType === SIGSTORE_BUNDLE_V03 ? 'bundle' : undefined;
      if (!format) continue;
      try {
        const m = await artifact.manifest();
        for (const layer of m.layers) {
          if (layer.mediaType !== (format === 'bundle' ? SIGSTORE_BUNDLE_V03 : COSIGN_SIMPLESIGNING)) continue;
          if (out.length >= context.limits.maxSignatures) {
            checks.push({
              signature: artifact.descriptor.digest,
              check: 'discovery',
              ok: false,
              message: `more than ${context.limits.maxSignatures} signatures; the rest were not read`,
            });
            break;
          }
          out.push({ artifact, layer, format });
        }
      } catch (e) {
        if (context.signal.aborted || !isFastpullError(e)) throw e;
        checks.push({ signature: artifact.descriptor.digest, check: 'discovery', ok: false, message: e.message });
      }
    }
    return out;
  }

  /** Every check of one candidate: authenticity first, then what its payload claims. */
  private async candidate(req: SigstoreRequirement, subject: SignatureSubject, c: Candidate, context: VerifyContext): Promise<SignatureCheck[]> {
    if (c.format === 'bundle') return this.bundle(req, subject, c, context);
    const signature = c.artifact.descriptor.digest;
    const fail = (check: string, message: string): SignatureCheck[] => [{ signature, check, ok: false, message }];
    const raw = decodeBase64(c.layer.annotations?.[COSIGN_SIGNATURE_ANNOTATION]);
    if (!raw) return fail('authenticity', `payload ${c.layer.digest} has no base64 ${COSIGN_SIGNATURE_ANNOTATION} annotation`);
    let payload: Buffer;
    try {
      payload = await c.artifact.blob(c.layer, context.limits.maxArtifactBytes);
    } catch (e) {
      if (context.signal.aborted || !isFastpullError(e)) throw e;
      return fail('integrity', e.message);
    }
    const checks = await this.tagAuthenticity(req, payload, raw, c);
    if (checks.some((k) => !k.ok)) return checks;
    const claims = parseSimpleSigning(payload);
    if (typeof claims === 'string') return [...checks, ...fail('integrity', claims)];
    if (claims.manifestDigest !== subject.digest) return [...checks, ...fail('integrity', `the payload signs ${claims.manifestDigest}, not ${subject.digest}`)];
    checks.push({ signature, check: 'integrity', ok: true, message: `the payload signs ${subject.digest}` });
    const identity = matchIdentity(req.signedIdentity, subject.reference, claims.dockerReference);
    checks.push({ signature, check: 'identity', ok: identity.ok, message: identity.message });
    return checks;
  }

  /**
   * A tag signature's authenticity: with keys alone, the signature over the payload; where the
   * policy names a Fulcio CA or Rekor keys, the certificate and Rekor entry of its annotations too,
   * checked as a bundle is (./bundle.ts).
   */
  private async tagAuthenticity(req: SigstoreRequirement, payload: Buffer, raw: Buffer, c: Candidate): Promise<SignatureCheck[]> {
    const signature = c.artifact.descriptor.digest;
    if (req.fulcio || req.rekorKeys.length > 0) {
      const certificate = c.layer.annotations?.[COSIGN_CERTIFICATE_ANNOTATION];
      const logged = c.layer.annotations?.[COSIGN_BUNDLE_ANNOTATION];
      if (logged === undefined)
        return [
          {
            signature,
            check: 'transparency',
            ok: false,
            message: `the policy names a Rekor key and the signature carries no ${COSIGN_BUNDLE_ANNOTATION} annotation`,
          },
        ];
      bundleModule ??= import('./bundle.js');
      return (await bundleModule).verifyTagSignature(req, payload, raw, certificate, logged, signature);
    }
    if (!req.keys.some((k) => verifiesWith(k, payload, raw)))
      return [
        {
          signature,
          check: 'authenticity',
          ok: false,
          message: `the signature of payload ${c.layer.digest} does not verify with ${req.keys.length === 1 ? 'the policy key' : `any of the ${req.keys.length} policy keys`}`,
        },
      ];
    return [{ signature, check: 'authenticity', ok: true, message: `payload ${c.layer.digest} signed by a policy key` }];
  }

  /** A Sigstore bundle: read within the limits, checked by ./bundle.ts. */
  private async bundle(req: SigstoreRequirement, subject: SignatureSubject, c: Candidate, context: VerifyContext): Promise<SignatureCheck[]> {
    const signature = c.artifact.descriptor.digest;
    let bytes: Buffer;
    try {
      bytes = await c.artifact.blob(c.layer, context.limits.maxArtifactBytes);
    } catch (e) {
      if (context.signal.aborted || !isFastpullError(e)) throw e;
      return [{ signature, check: 'integrity', ok: false, message: e.message }];
    }
    bundleModule ??= import('./bundle.js');
    return (await bundleModule).verifyBundle(req, subject, bytes, signature);
  }
}

/** Failed checks first, so that messages and logs lead with why. */
function failedFirst(checks: readonly SignatureCheck[]): SignatureCheck[] {
  return [...checks.filter((c) => !c.ok), ...checks.filter((c) => c.ok)];
}
