// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * A layer as the resolved manifest lists it.
 */
export interface ResolvedLayer {
  /**
   * Digest of the compressed layer blob.
   */
  'digest'?: (string);
  /**
   * Size of the compressed layer blob.
   */
  'size'?: (number | string | Long);
  /**
   * chainID of the stack up to this layer.
   */
  'chainId'?: (string);
}

/**
 * A layer as the resolved manifest lists it.
 */
export interface ResolvedLayer__Output {
  /**
   * Digest of the compressed layer blob.
   */
  'digest': (string);
  /**
   * Size of the compressed layer blob.
   */
  'size': (number);
  /**
   * chainID of the stack up to this layer.
   */
  'chainId': (string);
}
