// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Mount as _fastpull_v1_Mount, Mount__Output as _fastpull_v1_Mount__Output } from '../../fastpull/v1/Mount.js';

/**
 * Mounts, as data.
 */
export interface MountsResponse {
  /**
   * The read-only mounts, in order.
   */
  'mounts'?: (_fastpull_v1_Mount)[];
}

/**
 * Mounts, as data.
 */
export interface MountsResponse__Output {
  /**
   * The read-only mounts, in order.
   */
  'mounts': (_fastpull_v1_Mount__Output)[];
}
