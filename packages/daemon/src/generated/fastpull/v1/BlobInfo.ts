// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * A blob in the store.
 */
export interface BlobInfo {
  /**
   * Its digest.
   */
  'digest'?: (string);
  /**
   * Its size.
   */
  'size'?: (number | string | Long);
}

/**
 * A blob in the store.
 */
export interface BlobInfo__Output {
  /**
   * Its digest.
   */
  'digest': (string);
  /**
   * Its size.
   */
  'size': (number);
}
