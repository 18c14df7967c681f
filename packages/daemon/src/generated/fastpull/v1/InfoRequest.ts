// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Ask about one blob.
 */
export interface InfoRequest {
  /**
   * Digest of the blob.
   */
  'digest'?: (string);
}

/**
 * Ask about one blob.
 */
export interface InfoRequest__Output {
  /**
   * Digest of the blob.
   */
  'digest': (string);
}
