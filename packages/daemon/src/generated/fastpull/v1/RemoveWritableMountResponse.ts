// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { WritableMountRecord as _fastpull_v1_WritableMountRecord, WritableMountRecord__Output as _fastpull_v1_WritableMountRecord__Output } from '../../fastpull/v1/WritableMountRecord.js';

/**
 * The record was removed.
 */
export interface RemoveWritableMountResponse {
  /**
   * The record as it was.
   */
  'record'?: (_fastpull_v1_WritableMountRecord | null);
}

/**
 * The record was removed.
 */
export interface RemoveWritableMountResponse__Output {
  /**
   * The record as it was.
   */
  'record': (_fastpull_v1_WritableMountRecord__Output | null);
}
