// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * The mounts of an image or of a snapshot stack.
 */
export interface MountsRequest {
  /**
   * An image in the store, by any spelling of its reference.
   */
  'image'?: (string);
  /**
   * A committed snapshot: the mounts present it and every snapshot below it.
   */
  'chainId'?: (string);
  /**
   * With an image: its platform "os/arch[/variant]" when the name was pulled for several.
   */
  'platform'?: (string);
  /**
   * What to mount: exactly one.
   */
  'target'?: "image"|"chainId";
}

/**
 * The mounts of an image or of a snapshot stack.
 */
export interface MountsRequest__Output {
  /**
   * An image in the store, by any spelling of its reference.
   */
  'image'?: (string);
  /**
   * A committed snapshot: the mounts present it and every snapshot below it.
   */
  'chainId'?: (string);
  /**
   * With an image: its platform "os/arch[/variant]" when the name was pulled for several.
   */
  'platform': (string);
  /**
   * What to mount: exactly one.
   */
  'target'?: "image"|"chainId";
}
