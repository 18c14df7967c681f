// Where signature policies come from: fastpull's settings only name the user's own files (a containers
// policy.json, a notation configuration directory); this turns them into the verifiers a gate runs.
// Naming neither leaves verification off.
import { loadNotationVerifier } from './kinds.js';
import { loadContainersPolicy } from './policy.js';
import { SigstoreVerifier } from './sigstore/verifier.js';
import type { SignatureVerifier } from './types.js';

/** The signature settings every front end shares (`--signature-policy`, `signature_policy`, ...). */
export interface SignatureSettings {
  /** A containers policy.json whose `sigstoreSigned` requirements are enforced. */
  readonly signaturePolicy?: string;
  /** A directory laid out as notation's own configuration (`trustpolicy.json`, `truststore/`). */
  readonly notationConfig?: string;
}

/** Environment variables of the settings, as the CLI and fastpulld read them when no flag or key is given. */
export const SIGNATURE_ENV = { signaturePolicy: 'FASTPULL_SIGNATURE_POLICY', notationConfig: 'FASTPULL_NOTATION_CONFIG' } as const;

/**
 * The settings from the environment: `FASTPULL_SIGNATURE_POLICY`, `FASTPULL_NOTATION_CONFIG` (an
 * empty value is unset).
 * @example signatureSettingsFromEnv({ FASTPULL_SIGNATURE_POLICY: '/etc/containers/policy.json' })
 */
export function signatureSettingsFromEnv(env: NodeJS.ProcessEnv): SignatureSettings {
  const policy = env[SIGNATURE_ENV.signaturePolicy];
  const notation = env[SIGNATURE_ENV.notationConfig];
  return { ...(policy ? { signaturePolicy: policy } : {}), ...(notation ? { notationConfig: notation } : {}) };
}

/** Whether the settings turn verification on. */
export function signaturesEnabled(settings: SignatureSettings | undefined): boolean {
  return settings?.signaturePolicy !== undefined || settings?.notationConfig !== undefined;
}

/**
 * The verifiers the settings name, every file read and checked now: INVALID_ARGUMENT naming the file
 * and entry for anything unusable, so that a pull never meets a policy it cannot apply.
 * @example
 * const verifiers = await loadSignatureVerifiers({ signaturePolicy: '/etc/containers/policy.json' });
 * await pull('registry.example.com/app:1', { root, signatures: { verifiers } });
 */
export async function loadSignatureVerifiers(settings: SignatureSettings): Promise<SignatureVerifier[]> {
  const out: SignatureVerifier[] = [];
  if (settings.signaturePolicy !== undefined) out.push(new SigstoreVerifier(loadContainersPolicy(settings.signaturePolicy)));
  if (settings.notationConfig !== undefined) out.push(await loadNotationVerifier(settings.notationConfig));
  return out;
}
