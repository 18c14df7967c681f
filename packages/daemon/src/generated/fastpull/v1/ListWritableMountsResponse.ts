// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { WritableMountRecord as _fastpull_v1_WritableMountRecord, WritableMountRecord__Output as _fastpull_v1_WritableMountRecord__Output } from '../../fastpull/v1/WritableMountRecord.js';

/**
 * The writable mounts.
 */
export interface ListWritableMountsResponse {
  /**
   * Records sorted by mount point.
   */
  'mounts'?: (_fastpull_v1_WritableMountRecord)[];
}

/**
 * The writable mounts.
 */
export interface ListWritableMountsResponse__Output {
  /**
   * Records sorted by mount point.
   */
  'mounts': (_fastpull_v1_WritableMountRecord__Output)[];
}
