// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Resolved as _fastpull_v1_Resolved, Resolved__Output as _fastpull_v1_Resolved__Output } from '../../fastpull/v1/Resolved.js';
import type { LayerProgress as _fastpull_v1_LayerProgress, LayerProgress__Output as _fastpull_v1_LayerProgress__Output } from '../../fastpull/v1/LayerProgress.js';
import type { PullDone as _fastpull_v1_PullDone, PullDone__Output as _fastpull_v1_PullDone__Output } from '../../fastpull/v1/PullDone.js';
import type { PullTrace as _fastpull_v1_PullTrace, PullTrace__Output as _fastpull_v1_PullTrace__Output } from '../../fastpull/v1/PullTrace.js';

/**
 * Progress of a pull: exactly one of the fields is set.
 */
export interface PullResponse {
  /**
   * The reference resolved to a manifest: its layers are known.
   */
  'resolved'?: (_fastpull_v1_Resolved | null);
  /**
   * A layer changed state or fetched more bytes.
   */
  'layer'?: (_fastpull_v1_LayerProgress | null);
  /**
   * The pull finished: the last message of the stream.
   */
  'done'?: (_fastpull_v1_PullDone | null);
  /**
   * The trace the request asked for: just before `done`, or before the error status.
   */
  'trace'?: (_fastpull_v1_PullTrace | null);
  /**
   * The event.
   */
  'event'?: "resolved"|"layer"|"done"|"trace";
}

/**
 * Progress of a pull: exactly one of the fields is set.
 */
export interface PullResponse__Output {
  /**
   * The reference resolved to a manifest: its layers are known.
   */
  'resolved'?: (_fastpull_v1_Resolved__Output | null);
  /**
   * A layer changed state or fetched more bytes.
   */
  'layer'?: (_fastpull_v1_LayerProgress__Output | null);
  /**
   * The pull finished: the last message of the stream.
   */
  'done'?: (_fastpull_v1_PullDone__Output | null);
  /**
   * The trace the request asked for: just before `done`, or before the error status.
   */
  'trace'?: (_fastpull_v1_PullTrace__Output | null);
  /**
   * The event.
   */
  'event'?: "resolved"|"layer"|"done"|"trace";
}
