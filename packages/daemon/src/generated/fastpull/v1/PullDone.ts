// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Image as _fastpull_v1_Image, Image__Output as _fastpull_v1_Image__Output } from '../../fastpull/v1/Image.js';
import type { PullTimings as _fastpull_v1_PullTimings, PullTimings__Output as _fastpull_v1_PullTimings__Output } from '../../fastpull/v1/PullTimings.js';
import type { Mount as _fastpull_v1_Mount, Mount__Output as _fastpull_v1_Mount__Output } from '../../fastpull/v1/Mount.js';

/**
 * The pull finished.
 */
export interface PullDone {
  /**
   * The image record.
   */
  'image'?: (_fastpull_v1_Image | null);
  /**
   * How long it took (the shared pull's timings, the same for every caller).
   */
  'timings'?: (_fastpull_v1_PullTimings | null);
  /**
   * The daemon's store root.
   */
  'root'?: (string);
  /**
   * The snapshot directory of each layer, bottom first.
   */
  'snapshots'?: (string)[];
  /**
   * The read-only mounts presenting the image's tree.
   */
  'mounts'?: (_fastpull_v1_Mount)[];
}

/**
 * The pull finished.
 */
export interface PullDone__Output {
  /**
   * The image record.
   */
  'image': (_fastpull_v1_Image__Output | null);
  /**
   * How long it took (the shared pull's timings, the same for every caller).
   */
  'timings': (_fastpull_v1_PullTimings__Output | null);
  /**
   * The daemon's store root.
   */
  'root': (string);
  /**
   * The snapshot directory of each layer, bottom first.
   */
  'snapshots': (string)[];
  /**
   * The read-only mounts presenting the image's tree.
   */
  'mounts': (_fastpull_v1_Mount__Output)[];
}
