// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Remove a blob.
 */
export interface DeleteContentRequest {
  /**
   * Digest of the blob.
   */
  'digest'?: (string);
}

/**
 * Remove a blob.
 */
export interface DeleteContentRequest__Output {
  /**
   * Digest of the blob.
   */
  'digest': (string);
}
