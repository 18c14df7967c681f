// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { BlobInfo as _fastpull_v1_BlobInfo, BlobInfo__Output as _fastpull_v1_BlobInfo__Output } from '../../fastpull/v1/BlobInfo.js';

/**
 * The blobs in the store.
 */
export interface ListContentResponse {
  /**
   * Blobs sorted by digest.
   */
  'blobs'?: (_fastpull_v1_BlobInfo)[];
}

/**
 * The blobs in the store.
 */
export interface ListContentResponse__Output {
  /**
   * Blobs sorted by digest.
   */
  'blobs': (_fastpull_v1_BlobInfo__Output)[];
}
