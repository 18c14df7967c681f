// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Image as _fastpull_v1_Image, Image__Output as _fastpull_v1_Image__Output } from '../../fastpull/v1/Image.js';

/**
 * One image and where it lies.
 */
export interface GetImageResponse {
  /**
   * The image record.
   */
  'image'?: (_fastpull_v1_Image | null);
  /**
   * The daemon's store root.
   */
  'root'?: (string);
  /**
   * The snapshot directory of each layer, bottom first.
   */
  'snapshots'?: (string)[];
  /**
   * The platform manifest as stored (JSON), checked against its digest before it is sent.
   */
  'manifestJson'?: (string);
  /**
   * The image config as stored (JSON), checked against its digest.
   */
  'configJson'?: (string);
  /**
   * The index the name resolved to (JSON); empty when the name resolved to a manifest.
   */
  'indexJson'?: (string);
}

/**
 * One image and where it lies.
 */
export interface GetImageResponse__Output {
  /**
   * The image record.
   */
  'image': (_fastpull_v1_Image__Output | null);
  /**
   * The daemon's store root.
   */
  'root': (string);
  /**
   * The snapshot directory of each layer, bottom first.
   */
  'snapshots': (string)[];
  /**
   * The platform manifest as stored (JSON), checked against its digest before it is sent.
   */
  'manifestJson': (string);
  /**
   * The image config as stored (JSON), checked against its digest.
   */
  'configJson': (string);
  /**
   * The index the name resolved to (JSON); empty when the name resolved to a manifest.
   */
  'indexJson': (string);
}
