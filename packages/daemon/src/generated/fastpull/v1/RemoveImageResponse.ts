// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { GarbageCollectResponse as _fastpull_v1_GarbageCollectResponse, GarbageCollectResponse__Output as _fastpull_v1_GarbageCollectResponse__Output } from '../../fastpull/v1/GarbageCollectResponse.js';

/**
 * The image was removed.
 */
export interface RemoveImageResponse {
  /**
   * Canonical name of the removed image.
   */
  'name'?: (string);
  /**
   * What garbage collection removed, when asked for.
   */
  'gc'?: (_fastpull_v1_GarbageCollectResponse | null);
}

/**
 * The image was removed.
 */
export interface RemoveImageResponse__Output {
  /**
   * Canonical name of the removed image.
   */
  'name': (string);
  /**
   * What garbage collection removed, when asked for.
   */
  'gc': (_fastpull_v1_GarbageCollectResponse__Output | null);
}
