// policy.json's signedIdentity: whether the identity a signature claims (`docker-reference` of a
// simple-signing payload) is acceptable for the reference pulled, by the rules containers/image
// applies (containers-policy.json(5), "signedIdentity").
import { isFastpullError } from '../../errors.js';
import { formatReference, parseReference, referenceName, type Reference } from '../../oci/reference.js';
import type { SignedIdentity } from '../policy.js';

/** A reference as written, normalised, remembering whether it named a tag (parseReference adds `latest`). */
interface Named {
  readonly ref: Reference;
  readonly name: string;
  readonly tagged: boolean;
}

function named(text: string): Named | undefined {
  try {
    const ref = parseReference(text);
    const path = text.split('@')[0]!;
    const tagged = path.lastIndexOf(':') > path.lastIndexOf('/');
    return { ref, name: referenceName(ref), tagged };
  } catch (e) {
    if (isFastpullError(e)) return undefined;
    throw e;
  }
}

/** The full string of a reference with the tag only where it was named. */
function full(n: Named): string {
  return formatReference({ ...n.ref, ...(n.tagged ? {} : { tag: undefined }) });
}

/**
 * Whether `signed` (the signature's docker-reference) is acceptable for `intended` (what was
 * pulled) under `rule`; a reason when it is not.
 */
export function matchIdentity(rule: SignedIdentity, intended: Reference, signed: string): { ok: boolean; message: string } {
  const sig = named(signed);
  if (!sig) return { ok: false, message: `the signed reference ${JSON.stringify(signed.slice(0, 300))} does not parse` };
  const want = formatReference(intended);
  const fail = (why: string) => ({ ok: false, message: `signed for ${full(sig)}, ${why} (signedIdentity ${rule.type})` });
  const pass = { ok: true, message: `signed for ${full(sig)} (signedIdentity ${rule.type})` };
  switch (rule.type) {
    case 'matchExact':
      return full(sig) === want ? pass : fail(`not exactly ${want}`);
    case 'matchRepoDigestOrExact':
      return repoDigestOrExact(intended, sig)
        ? pass
        : fail(intended.tag !== undefined ? `not exactly ${want}` : `not the repository ${referenceName(intended)}`);
    case 'matchRepository':
      return sig.name === referenceName(intended) ? pass : fail(`not the repository ${referenceName(intended)}`);
    case 'exactReference': {
      const only = named(rule.dockerReference);
      if (!only || (!only.tagged && only.ref.digest === undefined))
        return fail(`the policy's dockerReference ${JSON.stringify(rule.dockerReference)} names no tag or digest`);
      return full(sig) === full(only) ? pass : fail(`not ${full(only)}`);
    }
    case 'exactRepository': {
      const only = named(rule.dockerRepository);
      if (!only) return fail(`the policy's dockerRepository ${JSON.stringify(rule.dockerRepository)} does not parse`);
      return sig.name === only.name ? pass : fail(`not the repository ${only.name}`);
    }
    case 'remapIdentity': {
      const mapped = remap(intended, rule.prefix, rule.signedPrefix);
      if (!mapped) return fail(`${want} does not remap to a valid reference`);
      return repoDigestOrExact(mapped, sig) ? pass : fail(`not ${formatReference(mapped)} (${want} remapped)`);
    }
  }
}

/** matchRepoDigestOrExact: a pull by tag wants exactly that tag signed; one by digest wants the repository. */
function repoDigestOrExact(intended: Reference, sig: Named): boolean {
  if (intended.tag !== undefined) return full(sig) === formatReference(intended);
  return sig.name === referenceName(intended);
}

/** `intended` with `prefix` replaced by `signedPrefix`, where the prefix ends at a path boundary. */
function remap(intended: Reference, prefix: string, signedPrefix: string): Reference | undefined {
  const text = formatReference(intended);
  const boundary = text.length === prefix.length || /^[/:@]/.test(text.slice(prefix.length)) || prefix.endsWith('/');
  if (!text.startsWith(prefix) || !boundary) return intended;
  return named(signedPrefix + text.slice(prefix.length))?.ref;
}

/**
 * signedIdentity for a signature that names no reference (a Sigstore bundle: its in-toto statement
 * names the digest only, as cosign writes it). The rules that relate the signed name to the one
 * pulled have nothing to compare, and the digest the pull resolved to is what was signed; the rules
 * that demand one named reference or repository cannot be met.
 */
export function matchUnnamedIdentity(rule: SignedIdentity): { ok: boolean; message: string } {
  switch (rule.type) {
    case 'exactReference':
    case 'exactRepository':
      return {
        ok: false,
        message: `the signature signs the digest only and names no reference, so it cannot be for ${rule.type === 'exactReference' ? rule.dockerReference : rule.dockerRepository} (signedIdentity ${rule.type})`,
      };
    default:
      return { ok: true, message: `the signature signs the digest only and names no reference (signedIdentity ${rule.type} has no name to compare)` };
  }
}
