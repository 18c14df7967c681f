// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * One layer of an image.
 */
export interface ImageLayer {
  /**
   * Digest of the compressed layer blob.
   */
  'digest'?: (string);
  /**
   * Size of the compressed layer blob.
   */
  'size'?: (number | string | Long);
  /**
   * Media type of the layer blob.
   */
  'mediaType'?: (string);
  /**
   * Digest of the uncompressed layer tar.
   */
  'diffId'?: (string);
  /**
   * Identity of the stack of layers up to this one: the name of its snapshot.
   */
  'chainId'?: (string);
}

/**
 * One layer of an image.
 */
export interface ImageLayer__Output {
  /**
   * Digest of the compressed layer blob.
   */
  'digest': (string);
  /**
   * Size of the compressed layer blob.
   */
  'size': (number);
  /**
   * Media type of the layer blob.
   */
  'mediaType': (string);
  /**
   * Digest of the uncompressed layer tar.
   */
  'diffId': (string);
  /**
   * Identity of the stack of layers up to this one: the name of its snapshot.
   */
  'chainId': (string);
}
