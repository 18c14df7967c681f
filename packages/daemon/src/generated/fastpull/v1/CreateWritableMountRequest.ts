// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Record a writable mount.
 */
export interface CreateWritableMountRequest {
  /**
   * The image, by any spelling of its reference.
   */
  'image'?: (string);
  /**
   * Its platform "os/arch[/variant]" when the name was pulled for several.
   */
  'platform'?: (string);
  /**
   * The mount point: an absolute path, symlinks resolved, as the caller sees it.
   */
  'target'?: (string);
}

/**
 * Record a writable mount.
 */
export interface CreateWritableMountRequest__Output {
  /**
   * The image, by any spelling of its reference.
   */
  'image': (string);
  /**
   * Its platform "os/arch[/variant]" when the name was pulled for several.
   */
  'platform': (string);
  /**
   * The mount point: an absolute path, symlinks resolved, as the caller sees it.
   */
  'target': (string);
}
