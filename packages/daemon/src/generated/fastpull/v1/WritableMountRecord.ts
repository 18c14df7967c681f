// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A writable mount of an image, as the store records it.
 */
export interface WritableMountRecord {
  /**
   * Its id: the name of its directory under <root>/mounts.
   */
  'id'?: (string);
  /**
   * Canonical name of the image.
   */
  'image'?: (string);
  /**
   * Digest of the image's platform manifest.
   */
  'manifest'?: (string);
  /**
   * chainIDs of the snapshots in the lowerdir stack, bottom first.
   */
  'snapshots'?: (string)[];
  /**
   * The mount point: absolute, symlinks resolved.
   */
  'target'?: (string);
  /**
   * The upper dir, where the mount's changes go.
   */
  'upper'?: (string);
  /**
   * overlayfs's work dir for the mount.
   */
  'work'?: (string);
  /**
   * When it was recorded.
   */
  'created'?: (string);
}

/**
 * A writable mount of an image, as the store records it.
 */
export interface WritableMountRecord__Output {
  /**
   * Its id: the name of its directory under <root>/mounts.
   */
  'id': (string);
  /**
   * Canonical name of the image.
   */
  'image': (string);
  /**
   * Digest of the image's platform manifest.
   */
  'manifest': (string);
  /**
   * chainIDs of the snapshots in the lowerdir stack, bottom first.
   */
  'snapshots': (string)[];
  /**
   * The mount point: absolute, symlinks resolved.
   */
  'target': (string);
  /**
   * The upper dir, where the mount's changes go.
   */
  'upper': (string);
  /**
   * overlayfs's work dir for the mount.
   */
  'work': (string);
  /**
   * When it was recorded.
   */
  'created': (string);
}
