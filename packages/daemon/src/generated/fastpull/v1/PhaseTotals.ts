// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Per-phase sums over all layers (layers run at once, so sums exceed wall time).
 */
export interface PhaseTotals {
  /**
   * Deprecated: not a sum over layers but the once-per-pull resolve time, the same as
   * PullTimings.resolve_ms (read that). Still sent, for clients written before it moved.
   * @deprecated
   */
  'resolveMs'?: (number | string);
  /**
   * Downloading.
   */
  'fetchMs'?: (number | string);
  /**
   * Hashing.
   */
  'verifyMs'?: (number | string);
  /**
   * Decompressing.
   */
  'decompressMs'?: (number | string);
  /**
   * Extracting.
   */
  'extractMs'?: (number | string);
  /**
   * Committing.
   */
  'commitMs'?: (number | string);
}

/**
 * Per-phase sums over all layers (layers run at once, so sums exceed wall time).
 */
export interface PhaseTotals__Output {
  /**
   * Deprecated: not a sum over layers but the once-per-pull resolve time, the same as
   * PullTimings.resolve_ms (read that). Still sent, for clients written before it moved.
   * @deprecated
   */
  'resolveMs': (number);
  /**
   * Downloading.
   */
  'fetchMs': (number);
  /**
   * Hashing.
   */
  'verifyMs': (number);
  /**
   * Decompressing.
   */
  'decompressMs': (number);
  /**
   * Extracting.
   */
  'extractMs': (number);
  /**
   * Committing.
   */
  'commitMs': (number);
}
