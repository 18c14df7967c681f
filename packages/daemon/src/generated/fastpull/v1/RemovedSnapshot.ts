// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * A snapshot that garbage collection removed.
 */
export interface RemovedSnapshot {
  /**
   * Its chainID.
   */
  'chainId'?: (string);
  /**
   * Bytes of its uncompressed layer tar.
   */
  'size'?: (number | string | Long);
}

/**
 * A snapshot that garbage collection removed.
 */
export interface RemovedSnapshot__Output {
  /**
   * Its chainID.
   */
  'chainId': (string);
  /**
   * Bytes of its uncompressed layer tar.
   */
  'size': (number);
}
