// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Platform as _fastpull_v1_Platform, Platform__Output as _fastpull_v1_Platform__Output } from '../../fastpull/v1/Platform.js';
import type { Long } from '@grpc/proto-loader';

/**
 * An OCI content descriptor: what a manifest says about a blob it refers to.
 */
export interface Descriptor {
  /**
   * Media type of the blob.
   */
  'mediaType'?: (string);
  /**
   * Digest of the blob, "sha256:<hex>".
   */
  'digest'?: (string);
  /**
   * Size of the blob.
   */
  'size'?: (number | string | Long);
  /**
   * Other places the blob may be fetched from.
   */
  'urls'?: (string)[];
  /**
   * Annotations of the descriptor.
   */
  'annotations'?: ({[key: string]: string});
  /**
   * Platform of a manifest listed in an index; unset otherwise.
   */
  'platform'?: (_fastpull_v1_Platform | null);
}

/**
 * An OCI content descriptor: what a manifest says about a blob it refers to.
 */
export interface Descriptor__Output {
  /**
   * Media type of the blob.
   */
  'mediaType': (string);
  /**
   * Digest of the blob, "sha256:<hex>".
   */
  'digest': (string);
  /**
   * Size of the blob.
   */
  'size': (number);
  /**
   * Other places the blob may be fetched from.
   */
  'urls': (string)[];
  /**
   * Annotations of the descriptor.
   */
  'annotations': ({[key: string]: string});
  /**
   * Platform of a manifest listed in an index; unset otherwise.
   */
  'platform': (_fastpull_v1_Platform__Output | null);
}
