// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Remove a writable mount's record.
 */
export interface RemoveWritableMountRequest {
  /**
   * Its id.
   */
  'id'?: (string);
}

/**
 * Remove a writable mount's record.
 */
export interface RemoveWritableMountRequest__Output {
  /**
   * Its id.
   */
  'id': (string);
}
