// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { BlobInfo as _fastpull_v1_BlobInfo, BlobInfo__Output as _fastpull_v1_BlobInfo__Output } from '../../fastpull/v1/BlobInfo.js';

/**
 * The blob.
 */
export interface InfoResponse {
  /**
   * Digest and size.
   */
  'info'?: (_fastpull_v1_BlobInfo | null);
}

/**
 * The blob.
 */
export interface InfoResponse__Output {
  /**
   * Digest and size.
   */
  'info': (_fastpull_v1_BlobInfo__Output | null);
}
