// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { SignatureVerdict as _fastpull_v1_SignatureVerdict, SignatureVerdict__Output as _fastpull_v1_SignatureVerdict__Output } from '../../fastpull/v1/SignatureVerdict.js';

/**
 * The verdict of the signature policies on an image, kept with its record.
 */
export interface ImageSignatures {
  /**
   * "verified" when every policy that covers the image verified it; else "logged" (a failed check
   * the policy's level only logs) or "skipped" (a level of skip).
   */
  'outcome'?: (string);
  /**
   * Each policy's verdict.
   */
  'verdicts'?: (_fastpull_v1_SignatureVerdict)[];
  /**
   * When the verdict was made (RFC 3339).
   */
  'verifiedAt'?: (string);
}

/**
 * The verdict of the signature policies on an image, kept with its record.
 */
export interface ImageSignatures__Output {
  /**
   * "verified" when every policy that covers the image verified it; else "logged" (a failed check
   * the policy's level only logs) or "skipped" (a level of skip).
   */
  'outcome': (string);
  /**
   * Each policy's verdict.
   */
  'verdicts': (_fastpull_v1_SignatureVerdict__Output)[];
  /**
   * When the verdict was made (RFC 3339).
   */
  'verifiedAt': (string);
}
