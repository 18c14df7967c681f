// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { LayerState as _fastpull_v1_LayerState, LayerState__Output as _fastpull_v1_LayerState__Output } from '../../fastpull/v1/LayerState.js';
import type { UnpackProgress as _fastpull_v1_UnpackProgress, UnpackProgress__Output as _fastpull_v1_UnpackProgress__Output } from '../../fastpull/v1/UnpackProgress.js';
import type { Long } from '@grpc/proto-loader';

/**
 * A layer's progress.
 */
export interface LayerProgress {
  /**
   * Position of the layer in the image, bottom first, from 0.
   */
  'index'?: (number);
  /**
   * Digest of the layer blob.
   */
  'digest'?: (string);
  /**
   * Its state.
   */
  'state'?: (_fastpull_v1_LayerState);
  /**
   * Compressed bytes fetched so far (fetching) or the layer size once past fetching.
   */
  'bytes'?: (number | string | Long);
  /**
   * Size of the layer blob.
   */
  'total'?: (number | string | Long);
  /**
   * EXTRACTING only: how far the unpack pass has read; EXTRACTING repeats as it grows.
   */
  'unpack'?: (_fastpull_v1_UnpackProgress | null);
}

/**
 * A layer's progress.
 */
export interface LayerProgress__Output {
  /**
   * Position of the layer in the image, bottom first, from 0.
   */
  'index': (number);
  /**
   * Digest of the layer blob.
   */
  'digest': (string);
  /**
   * Its state.
   */
  'state': (_fastpull_v1_LayerState__Output);
  /**
   * Compressed bytes fetched so far (fetching) or the layer size once past fetching.
   */
  'bytes': (number);
  /**
   * Size of the layer blob.
   */
  'total': (number);
  /**
   * EXTRACTING only: how far the unpack pass has read; EXTRACTING repeats as it grows.
   */
  'unpack': (_fastpull_v1_UnpackProgress__Output | null);
}
