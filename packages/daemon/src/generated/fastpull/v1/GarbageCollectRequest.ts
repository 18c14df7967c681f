// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Collect garbage.
 */
export interface GarbageCollectRequest {
  /**
   * Say what would be removed, remove nothing.
   */
  'dryRun'?: (boolean);
}

/**
 * Collect garbage.
 */
export interface GarbageCollectRequest__Output {
  /**
   * Say what would be removed, remove nothing.
   */
  'dryRun': (boolean);
}
