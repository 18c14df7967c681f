// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * An OCI platform.
 */
export interface Platform {
  /**
   * Operating system, e.g. "linux".
   */
  'os'?: (string);
  /**
   * CPU architecture, e.g. "amd64", "arm64".
   */
  'architecture'?: (string);
  /**
   * CPU variant, e.g. "v8"; empty when there is none.
   */
  'variant'?: (string);
  /**
   * Operating system version (Windows images); empty when there is none.
   */
  'osVersion'?: (string);
  /**
   * Required operating system features; empty when there are none.
   */
  'osFeatures'?: (string)[];
}

/**
 * An OCI platform.
 */
export interface Platform__Output {
  /**
   * Operating system, e.g. "linux".
   */
  'os': (string);
  /**
   * CPU architecture, e.g. "amd64", "arm64".
   */
  'architecture': (string);
  /**
   * CPU variant, e.g. "v8"; empty when there is none.
   */
  'variant': (string);
  /**
   * Operating system version (Windows images); empty when there is none.
   */
  'osVersion': (string);
  /**
   * Required operating system features; empty when there are none.
   */
  'osFeatures': (string)[];
}
