// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { LayerTimings as _fastpull_v1_LayerTimings, LayerTimings__Output as _fastpull_v1_LayerTimings__Output } from '../../fastpull/v1/LayerTimings.js';
import type { PhaseTotals as _fastpull_v1_PhaseTotals, PhaseTotals__Output as _fastpull_v1_PhaseTotals__Output } from '../../fastpull/v1/PhaseTotals.js';

/**
 * How long a pull took.
 */
export interface PullTimings {
  /**
   * Resolving the reference.
   */
  'resolveMs'?: (number | string);
  /**
   * Wall time of the whole pull.
   */
  'totalMs'?: (number | string);
  /**
   * Each layer, bottom first.
   */
  'layers'?: (_fastpull_v1_LayerTimings)[];
  /**
   * Per-phase sums.
   */
  'phases'?: (_fastpull_v1_PhaseTotals | null);
}

/**
 * How long a pull took.
 */
export interface PullTimings__Output {
  /**
   * Resolving the reference.
   */
  'resolveMs': (number);
  /**
   * Wall time of the whole pull.
   */
  'totalMs': (number);
  /**
   * Each layer, bottom first.
   */
  'layers': (_fastpull_v1_LayerTimings__Output)[];
  /**
   * Per-phase sums.
   */
  'phases': (_fastpull_v1_PhaseTotals__Output | null);
}
