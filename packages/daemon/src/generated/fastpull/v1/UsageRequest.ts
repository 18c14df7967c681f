// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Disk usage of a snapshot.
 */
export interface UsageRequest {
  /**
   * chainID of a committed snapshot.
   */
  'chainId'?: (string);
}

/**
 * Disk usage of a snapshot.
 */
export interface UsageRequest__Output {
  /**
   * chainID of a committed snapshot.
   */
  'chainId': (string);
}
