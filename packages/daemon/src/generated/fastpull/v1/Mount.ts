// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A mount as data, in the form mount(8) and containerd take.
 */
export interface Mount {
  /**
   * Filesystem type: "overlay", or "bind" for a one-layer image.
   */
  'type'?: (string);
  /**
   * Mount source ("overlay", or the directory of a bind mount).
   */
  'source'?: (string);
  /**
   * Mount options, e.g. "lowerdir=TOP:...:BOTTOM".
   */
  'options'?: (string)[];
}

/**
 * A mount as data, in the form mount(8) and containerd take.
 */
export interface Mount__Output {
  /**
   * Filesystem type: "overlay", or "bind" for a one-layer image.
   */
  'type': (string);
  /**
   * Mount source ("overlay", or the directory of a bind mount).
   */
  'source': (string);
  /**
   * Mount options, e.g. "lowerdir=TOP:...:BOTTOM".
   */
  'options': (string)[];
}
