// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

/**
 * Where a layer is in its pull.
 */
export const LayerState = {
  /**
   * Never sent.
   */
  LAYER_STATE_UNSPECIFIED: 'LAYER_STATE_UNSPECIFIED',
  /**
   * Waiting for a download or unpack slot, or for another pull of the same layer.
   */
  LAYER_STATE_WAITING: 'LAYER_STATE_WAITING',
  /**
   * Downloading.
   */
  LAYER_STATE_FETCHING: 'LAYER_STATE_FETCHING',
  /**
   * Checking the blob digest and diffID.
   */
  LAYER_STATE_VERIFYING: 'LAYER_STATE_VERIFYING',
  /**
   * Decompressing and extracting (overlaps fetching).
   */
  LAYER_STATE_EXTRACTING: 'LAYER_STATE_EXTRACTING',
  /**
   * Unpacked and committed as a snapshot.
   */
  LAYER_STATE_COMMITTED: 'LAYER_STATE_COMMITTED',
  /**
   * Its snapshot was already in the store.
   */
  LAYER_STATE_EXISTS: 'LAYER_STATE_EXISTS',
} as const;

/**
 * Where a layer is in its pull.
 */
export type LayerState =
  /**
   * Never sent.
   */
  | 'LAYER_STATE_UNSPECIFIED'
  | 0
  /**
   * Waiting for a download or unpack slot, or for another pull of the same layer.
   */
  | 'LAYER_STATE_WAITING'
  | 1
  /**
   * Downloading.
   */
  | 'LAYER_STATE_FETCHING'
  | 2
  /**
   * Checking the blob digest and diffID.
   */
  | 'LAYER_STATE_VERIFYING'
  | 3
  /**
   * Decompressing and extracting (overlaps fetching).
   */
  | 'LAYER_STATE_EXTRACTING'
  | 4
  /**
   * Unpacked and committed as a snapshot.
   */
  | 'LAYER_STATE_COMMITTED'
  | 5
  /**
   * Its snapshot was already in the store.
   */
  | 'LAYER_STATE_EXISTS'
  | 6

/**
 * Where a layer is in its pull.
 */
export type LayerState__Output = typeof LayerState[keyof typeof LayerState]
