// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * How far a layer's unpack pass has read (a message, so that its absence shows).
 */
export interface UnpackProgress {
  /**
   * Compressed bytes of the blob consumed so far; total once the pass has read everything.
   */
  'consumed'?: (number | string | Long);
}

/**
 * How far a layer's unpack pass has read (a message, so that its absence shows).
 */
export interface UnpackProgress__Output {
  /**
   * Compressed bytes of the blob consumed so far; total once the pass has read everything.
   */
  'consumed': (number);
}
