// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Image as _fastpull_v1_Image, Image__Output as _fastpull_v1_Image__Output } from '../../fastpull/v1/Image.js';

/**
 * The images in the store.
 */
export interface ListImagesResponse {
  /**
   * Image records sorted by name.
   */
  'images'?: (_fastpull_v1_Image)[];
}

/**
 * The images in the store.
 */
export interface ListImagesResponse__Output {
  /**
   * Image records sorted by name.
   */
  'images': (_fastpull_v1_Image__Output)[];
}
