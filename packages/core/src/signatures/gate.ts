// The gate: every verifier whose policy covers an image decides about it, from the signatures found
// once for all of them; a `missing` or `invalid` verdict refuses the image (SIGNATURE_MISSING,
// SIGNATURE_INVALID) with every verdict in the error's details. A pull starts the check as soon as it
// knows the manifest digest and waits for it only before the image record is written.
import { abortError, FastpullError } from '../errors.js';
import { formatReference } from '../oci/reference.js';
import { discoverSignatures, type SignatureRegistry } from './discover.js';
import type { ImageSignatures, SignatureLimits, SignatureSubject, SignatureVerdict, SignatureVerifier } from './types.js';

/** Signature artifacts of each type read per image: real images carry a handful. */
export const DEFAULT_MAX_SIGNATURES = 16;
/** Bytes of one signature manifest, envelope, bundle or payload: real ones are kilobytes. */
export const DEFAULT_MAX_ARTIFACT_BYTES = 1024 * 1024;
/** The whole verification of one image: a registry that serves signatures slower than this is refused. */
export const DEFAULT_SIGNATURE_TIMEOUT_MS = 60_000;

/** The limits when none are given. */
export const DEFAULT_SIGNATURE_LIMITS: SignatureLimits = {
  maxSignatures: DEFAULT_MAX_SIGNATURES,
  maxArtifactBytes: DEFAULT_MAX_ARTIFACT_BYTES,
  timeoutMs: DEFAULT_SIGNATURE_TIMEOUT_MS,
};

/** The verifiers a pull is gated by, and the limits they run under. */
export interface SignatureGate {
  /** The verifiers of the policies in force; those that cover an image decide about it. */
  readonly verifiers: readonly SignatureVerifier[];
  /** Limits other than {@link DEFAULT_SIGNATURE_LIMITS}. */
  readonly limits?: Partial<SignatureLimits>;
  /** The time the checks treat as now; default the clock. */
  readonly now?: () => Date;
}

/** Whether any verifier of the gate covers `subject` (when none does, nothing is checked or recorded). */
export function gateCovers(gate: SignatureGate | undefined, subject: Pick<SignatureSubject, 'reference'>): boolean {
  return gate !== undefined && gate.verifiers.some((v) => v.covers(subject.reference));
}

/**
 * Decides about `subject` with every verifier that covers it: undefined when none does; the joined
 * verdict when none refuses; otherwise rejects with SIGNATURE_MISSING (some verifier found no
 * signature it needs and none found a bad one) or SIGNATURE_INVALID, `details.verdicts` holding
 * every verdict. Registry failures while looking for signatures reject with their own codes; the
 * time limit rejects with SIGNATURE_INVALID; `signal` rejects with ABORTED.
 */
export async function checkSignatures(
  registry: SignatureRegistry,
  subject: SignatureSubject,
  gate: SignatureGate,
  signal?: AbortSignal,
): Promise<ImageSignatures | undefined> {
  const verifiers = gate.verifiers.filter((v) => v.covers(subject.reference));
  if (verifiers.length === 0) return undefined;
  const limits: SignatureLimits = { ...DEFAULT_SIGNATURE_LIMITS, ...gate.limits };
  const name = `${formatReference(subject.reference)} (${subject.digest})`;
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  const all = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const stopped = (): FastpullError =>
    signal?.aborted
      ? abortError(signal, `verifying the signatures of ${name}`)
      : new FastpullError('SIGNATURE_INVALID', `verifying the signatures of ${name}: not done within ${limits.timeoutMs} ms`, {
          details: { check: 'time', timeoutMs: limits.timeoutMs },
        });
  try {
    const where = { referrers: true, cosignTag: verifiers.some((v) => v.kind === 'sigstore') };
    const found = await discoverSignatures(registry, subject, where, limits, all);
    const context = { signal: all, now: (gate.now ?? (() => new Date()))(), limits, unread: found.unread };
    const verdicts = await Promise.all(verifiers.map((v) => v.verify(subject, found.signatures, context)));
    if (all.aborted) throw stopped();
    return judge(name, verdicts);
  } catch (e) {
    if (all.aborted && !(e instanceof FastpullError && e.code.startsWith('SIGNATURE_'))) throw stopped();
    throw e;
  }
}

/** The joined verdict, or the refusal. */
function judge(name: string, verdicts: readonly SignatureVerdict[]): ImageSignatures {
  const invalid = verdicts.filter((v) => v.outcome === 'invalid');
  const missing = verdicts.filter((v) => v.outcome === 'missing');
  if (invalid.length > 0 || missing.length > 0) {
    const code = invalid.length > 0 ? 'SIGNATURE_INVALID' : 'SIGNATURE_MISSING';
    const reasons = [...invalid, ...missing].map(reason).join('; ');
    throw new FastpullError(code, `signature check of ${name} refused it: ${reasons}`, { details: { verdicts } });
  }
  const outcome = verdicts.every((v) => v.outcome === 'verified') ? 'verified' : verdicts.some((v) => v.outcome === 'logged') ? 'logged' : 'skipped';
  return { outcome, verdicts, verifiedAt: new Date().toISOString() };
}

/** One verdict's refusal in words: its kind and the first failed check of each signature (at most three). */
function reason(v: SignatureVerdict): string {
  const failed = v.checks.filter((c) => !c.ok);
  if (v.outcome === 'missing' || failed.length === 0)
    return `${v.kind}: ${failed[0]?.message ?? 'no signature found'}${v.scope !== undefined ? ` (policy scope ${JSON.stringify(v.scope)})` : ''}`;
  const shown = failed.slice(0, 3).map((c) => `${c.signature ? `${c.signature.slice(0, 19)}: ` : ''}${c.check}: ${c.message}`);
  return `${v.kind}: ${shown.join(', ')}${failed.length > 3 ? ` and ${failed.length - 3} more` : ''}`;
}

/**
 * One line of a verdict for logs: `sigstore verified by sha256:...`, `notation logged (audit): ...`.
 * @example for (const v of image.signatures?.verdicts ?? []) console.log(verdictLine(v));
 */
export function verdictLine(v: SignatureVerdict): string {
  const failed = v.checks.find((c) => !c.ok);
  const by = v.signature ? ` by ${v.signature}` : '';
  return `${v.kind} ${v.outcome}${v.level !== 'strict' ? ` (${v.level})` : ''}${by}${failed && v.outcome !== 'verified' ? `: ${failed.check}: ${failed.message}` : ''}`;
}
