// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * One check of one signature.
 */
export interface SignatureCheck {
  /**
   * The signature artifact's manifest digest; empty for a check of the image as a whole.
   */
  'signature'?: (string);
  /**
   * Which check: "integrity", "authenticity", "identity", "expiry", "revocation", ...
   */
  'check'?: (string);
  'ok'?: (boolean);
  /**
   * What was found, in words.
   */
  'message'?: (string);
}

/**
 * One check of one signature.
 */
export interface SignatureCheck__Output {
  /**
   * The signature artifact's manifest digest; empty for a check of the image as a whole.
   */
  'signature': (string);
  /**
   * Which check: "integrity", "authenticity", "identity", "expiry", "revocation", ...
   */
  'check': (string);
  'ok': (boolean);
  /**
   * What was found, in words.
   */
  'message': (string);
}
