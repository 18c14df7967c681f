// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { SignatureCheck as _fastpull_v1_SignatureCheck, SignatureCheck__Output as _fastpull_v1_SignatureCheck__Output } from '../../fastpull/v1/SignatureCheck.js';

/**
 * What one kind of signature policy decided about one image.
 */
export interface SignatureVerdict {
  /**
   * "notation" (Notary Project trust policy) or "sigstore" (policy.json's sigstoreSigned).
   */
  'kind'?: (string);
  /**
   * "strict", "permissive", "audit" or "skip".
   */
  'level'?: (string);
  /**
   * "verified", "skipped", "logged", "missing" or "invalid".
   */
  'outcome'?: (string);
  /**
   * The policy scope that applied (a trust policy's name, a policy.json scope); empty: the default.
   */
  'scope'?: (string);
  /**
   * Digest of the signature artifact that verified; empty when none did.
   */
  'signature'?: (string);
  /**
   * Every check made.
   */
  'checks'?: (_fastpull_v1_SignatureCheck)[];
}

/**
 * What one kind of signature policy decided about one image.
 */
export interface SignatureVerdict__Output {
  /**
   * "notation" (Notary Project trust policy) or "sigstore" (policy.json's sigstoreSigned).
   */
  'kind': (string);
  /**
   * "strict", "permissive", "audit" or "skip".
   */
  'level': (string);
  /**
   * "verified", "skipped", "logged", "missing" or "invalid".
   */
  'outcome': (string);
  /**
   * The policy scope that applied (a trust policy's name, a policy.json scope); empty: the default.
   */
  'scope': (string);
  /**
   * Digest of the signature artifact that verified; empty when none did.
   */
  'signature': (string);
  /**
   * Every check made.
   */
  'checks': (_fastpull_v1_SignatureCheck__Output)[];
}
