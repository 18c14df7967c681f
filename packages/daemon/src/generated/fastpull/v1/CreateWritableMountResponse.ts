// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { WritableMountRecord as _fastpull_v1_WritableMountRecord, WritableMountRecord__Output as _fastpull_v1_WritableMountRecord__Output } from '../../fastpull/v1/WritableMountRecord.js';
import type { Mount as _fastpull_v1_Mount, Mount__Output as _fastpull_v1_Mount__Output } from '../../fastpull/v1/Mount.js';

/**
 * The writable mount was recorded.
 */
export interface CreateWritableMountResponse {
  /**
   * The record.
   */
  'record'?: (_fastpull_v1_WritableMountRecord | null);
  /**
   * The overlay to mount at the target: lowerdir, upperdir and workdir options.
   */
  'mount'?: (_fastpull_v1_Mount | null);
}

/**
 * The writable mount was recorded.
 */
export interface CreateWritableMountResponse__Output {
  /**
   * The record.
   */
  'record': (_fastpull_v1_WritableMountRecord__Output | null);
  /**
   * The overlay to mount at the target: lowerdir, upperdir and workdir options.
   */
  'mount': (_fastpull_v1_Mount__Output | null);
}
