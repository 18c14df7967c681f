// The Notary Project signature verification workflow (trust-store-trust-policy.md, "Signature
// Verification"): pick the statement for the repository, then for each signature run integrity,
// authenticity (trust store and trusted identity), expiry, authentic timestamp and revocation, each
// enforced, logged or skipped as the statement's level says, stopping at the first enforced failure.
// The first signature accepted decides. The only I/O is the revocation check's (OCSP and CRL, through
// the checker handed in), and a bad signature is a verdict, not a throw.
import { checkIntegrity, type VerifiedEnvelope } from './envelope.js';
import { trustedAnchor, validityProblem } from './chain.js';
import { isSubsetDN, subjectDN } from './dn.js';
import { applicablePolicy } from './policy.js';
import type { RevocationChecker } from './revocation/index.js';
import { findExtension, OID } from './x509.js';
import type { CheckResult, NotaryConfig, NotarySignature, NotaryVerdict, SignatureResult, TargetDescriptor, TrustPolicy, Validation } from './types.js';

/** Signatures evaluated per image at most (as notation's verify evaluates at most 50 by default). */
export const MAX_SIGNATURES_EVALUATED = 50;

export interface VerifyNotaryOptions {
  /** The image's repository as trust policies scope it: `HOST/PATH`, no tag or digest. */
  readonly repository: string;
  /** The manifest being verified; a signature must name exactly this. */
  readonly target: TargetDescriptor;
  /** The envelopes of the manifest's Notary Project signatures, in the order the registry listed them. */
  readonly signatures: readonly NotarySignature[];
  /** Signature manifests that were found but could not be read (bad manifest, oversized envelope): each fails integrity. */
  readonly unreadable?: readonly { readonly digest: string; readonly reason: string }[];
  /** The time of verification; now by default. */
  readonly now?: Date;
  /** Checks revocation by OCSP and CRL; the process's shared checker (and its CRL cache) by default. */
  readonly revocation?: RevocationChecker;
  /** Stops the revocation check's queries (the pull stopped, the verification's time is up). */
  readonly signal?: AbortSignal;
}

type Check = (env: VerifiedEnvelope) => string | undefined | Promise<string | undefined>;

interface Context {
  readonly policy: TrustPolicy;
  readonly config: NotaryConfig;
  readonly target: TargetDescriptor;
  readonly now: Date;
  readonly revocation: RevocationChecker | undefined;
  readonly signal: AbortSignal | undefined;
}

function sameTarget(env: VerifiedEnvelope, target: TargetDescriptor): string | undefined {
  const t = env.target;
  if (t.digest !== target.digest || t.mediaType !== target.mediaType || t.size !== target.size) {
    return `the signature is for ${String(t.digest)} (${String(t.mediaType)}, ${String(t.size)} bytes), not ${target.digest} (${target.mediaType}, ${target.size} bytes)`;
  }
  return undefined;
}

function authenticity(policy: TrustPolicy, config: NotaryConfig): Check {
  return (env) => {
    const storeType = env.scheme === 'notary.x509' ? 'ca' : 'signingAuthority';
    const trusted = policy.trustStores.filter((s) => s.startsWith(`${storeType}:`)).flatMap((s) => config.stores.get(s) ?? []);
    if (trusted.length === 0) return `statement "${policy.name}" names no ${storeType} trust store for a ${env.scheme} signature`;
    if (!trustedAnchor(env.chain, trusted))
      return `the certificate chain (leaf ${env.chain[0]!.subject}) leads to no certificate of ${policy.trustStores.join(', ')}`;
    if (policy.trustedIdentities === '*') return undefined;
    let subject;
    try {
      subject = subjectDN(env.chain[0]!.subjectRDNs);
    } catch (e) {
      return `the signing certificate's subject cannot be matched: ${(e as Error).message}`;
    }
    if (policy.trustedIdentities.some((id) => isSubsetDN(id, subject))) return undefined;
    return `the signing certificate's subject ${env.chain[0]!.subject} is none of the trusted identities of statement "${policy.name}"`;
  };
}

function authenticTimestamp(policy: TrustPolicy, now: Date): Check {
  return (env) => {
    if (env.scheme === 'notary.x509.signingAuthority') {
      const cert = env.chain.find((c) => env.signingTime < c.notBefore || env.signingTime > c.notAfter);
      return cert && `certificate ${cert.subject} was not valid at the authentic signing time ${env.signingTime.toISOString()}`;
    }
    let timestamp = policy.trustStores.some((s) => s.startsWith('tsa:'));
    if (timestamp && policy.verifyTimestamp === 'afterCertExpiry' && !env.chain.some((c) => now > c.notAfter)) timestamp = false;
    if (!timestamp) return validityProblem(env.chain, now);
    if (!env.timestamped) return 'the policy requires a timestamp countersignature and the envelope has none';
    return 'the envelope has an RFC 3161 timestamp countersignature, which this verifier does not check';
  };
}

/** Whether a certificate the revocation check asks about (all but the root) names an OCSP responder or a CRL. */
function namesRevocationService(chain: VerifiedEnvelope['chain']): boolean {
  return chain.slice(0, -1).some((c) => findExtension(c.extensions, OID.authorityInfoAccess) || findExtension(c.extensions, OID.crlDistributionPoints));
}

/**
 * The revocation validation. A chain that failed authenticity (only logged, as under audit) is not
 * queried: the URLs in it are anyone's, and fastpull does not send requests where an untrusted
 * certificate points.
 */
function revocation(ctx: Context, checks: readonly CheckResult[]): Check {
  return async (env) => {
    if (checks.some((c) => c.validation === 'authenticity' && !c.ok))
      return 'not checked: the chain is not trusted (authenticity failed), and fastpull does not query the OCSP responders or CRLs an untrusted certificate names';
    // Where no certificate names where to ask, each is taken as not revoked, and the OCSP and CRL
    // code (with the ASN.1 schemas it parses answers with) is not loaded at all.
    if (!namesRevocationService(env.chain)) return undefined;
    const checker = ctx.revocation ?? (await import('./revocation/index.js')).sharedRevocationChecker;
    const signingTime = env.scheme === 'notary.x509.signingAuthority' ? env.signingTime : undefined;
    return checker.checkChain(env.chain, { now: ctx.now, ...(signingTime && { signingTime }), ...(ctx.signal && { signal: ctx.signal }) });
  };
}

function checksOf(ctx: Context, checks: readonly CheckResult[]): [Validation, Check][] {
  const now = ctx.now;
  return [
    ['authenticity', authenticity(ctx.policy, ctx.config)],
    ['expiry', (env) => (env.expiry && now >= env.expiry ? `the signature expired at ${env.expiry.toISOString()}` : undefined)],
    ['authenticTimestamp', authenticTimestamp(ctx.policy, now)],
    ['revocation', revocation(ctx, checks)],
  ];
}

async function verifyOne(sig: NotarySignature, ctx: Context): Promise<SignatureResult> {
  const actions = ctx.policy.level.actions;
  const checks: CheckResult[] = [];
  const integrity = await checkIntegrity(sig.mediaType, sig.envelope);
  const integrityProblem = typeof integrity === 'string' ? integrity : sameTarget(integrity, ctx.target);
  checks.push({ validation: 'integrity', action: 'enforce', ok: integrityProblem === undefined, ...(integrityProblem && { reason: integrityProblem }) });
  if (integrityProblem || typeof integrity === 'string') return { digest: sig.digest, accepted: false, checks };
  for (const [validation, check] of checksOf(ctx, checks)) {
    const action = actions[validation];
    if (action === 'skip') continue;
    const reason = await check(integrity);
    checks.push({ validation, action, ok: reason === undefined, ...(reason && { reason }) });
    if (reason && action === 'enforce') return { digest: sig.digest, accepted: false, checks };
  }
  return { digest: sig.digest, accepted: true, checks };
}

function failureLine(r: SignatureResult): string {
  const failed = r.checks.find((c) => !c.ok && c.action === 'enforce') ?? r.checks.find((c) => !c.ok);
  return `signature ${r.digest}: ${failed ? `${failed.validation}: ${failed.reason ?? 'failed'}` : 'failed'}`;
}

/**
 * Verifies a manifest's Notary Project signatures against a loaded notation configuration.
 * @example
 * const verdict = await verifyNotary(config, { repository: 'registry.example/app', target, signatures });
 * if (!verdict.trusted) throw new Error(verdict.reason);
 */
export async function verifyNotary(config: NotaryConfig, options: VerifyNotaryOptions): Promise<NotaryVerdict> {
  const policy = applicablePolicy(config, options.repository);
  if (!policy) return { kind: 'notation', outcome: 'skipped', trusted: true, signatures: [], reason: `no trust policy statement covers ${options.repository}` };
  const base = { kind: 'notation', policy: policy.name, level: policy.level.name } as const;
  if (policy.level.name === 'skip')
    return { ...base, outcome: 'skipped', trusted: true, signatures: [], reason: `statement "${policy.name}" skips verification` };
  const unreadable: SignatureResult[] = (options.unreadable ?? []).map((u) => ({
    digest: u.digest,
    accepted: false,
    checks: [{ validation: 'integrity', action: 'enforce', ok: false, reason: u.reason }],
  }));
  if (options.signatures.length === 0 && unreadable.length === 0) {
    // The audit level enforces integrity only "if a signature is present".
    if (policy.level.name === 'audit')
      return { ...base, outcome: 'logged', trusted: true, signatures: [], reason: 'no Notary Project signature (logged: audit level)' };
    return {
      ...base,
      outcome: 'missing',
      trusted: false,
      signatures: [],
      reason: `no Notary Project signature, and statement "${policy.name}" (${policy.level.name}) requires one`,
    };
  }
  const ctx: Context = {
    policy,
    config,
    target: options.target,
    now: options.now ?? new Date(),
    revocation: options.revocation,
    signal: options.signal,
  };
  const results: SignatureResult[] = [...unreadable];
  for (const sig of options.signatures.slice(0, MAX_SIGNATURES_EVALUATED)) {
    const result = await verifyOne(sig, ctx);
    results.push(result);
    if (result.accepted) {
      const logged = result.checks.filter((c) => !c.ok);
      if (logged.length === 0) return { ...base, outcome: 'verified', trusted: true, signature: sig.digest, signatures: results };
      return {
        ...base,
        outcome: 'logged',
        trusted: true,
        signature: sig.digest,
        signatures: results,
        reason: logged.map((c) => `${c.validation}: ${c.reason ?? 'failed'}`).join('; '),
      };
    }
  }
  const skipped = options.signatures.length + unreadable.length - results.length;
  const reason = results.map(failureLine).join('; ') + (skipped > 0 ? `; ${skipped} more not evaluated (at most ${MAX_SIGNATURES_EVALUATED})` : '');
  return { ...base, outcome: 'invalid', trusted: false, signatures: results, reason };
}
