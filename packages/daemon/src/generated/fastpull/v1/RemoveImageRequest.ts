// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Remove an image record.
 */
export interface RemoveImageRequest {
  /**
   * Any spelling of the image's reference.
   */
  'name'?: (string);
  /**
   * Collect garbage afterwards.
   */
  'gc'?: (boolean);
  /**
   * Platform "os/arch[/variant]" to remove; empty: every platform of the name.
   */
  'platform'?: (string);
}

/**
 * Remove an image record.
 */
export interface RemoveImageRequest__Output {
  /**
   * Any spelling of the image's reference.
   */
  'name': (string);
  /**
   * Collect garbage afterwards.
   */
  'gc': (boolean);
  /**
   * Platform "os/arch[/variant]" to remove; empty: every platform of the name.
   */
  'platform': (string);
}
