// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * An image record that garbage collection removed.
 */
export interface ReleasedImage {
  /**
   * Canonical name of the image.
   */
  'name'?: (string);
  /**
   * Its platform, os/arch[/variant].
   */
  'platform'?: (string);
}

/**
 * An image record that garbage collection removed.
 */
export interface ReleasedImage__Output {
  /**
   * Canonical name of the image.
   */
  'name': (string);
  /**
   * Its platform, os/arch[/variant].
   */
  'platform': (string);
}
