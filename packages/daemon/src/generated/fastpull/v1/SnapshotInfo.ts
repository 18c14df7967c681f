// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * A committed snapshot.
 */
export interface SnapshotInfo {
  /**
   * Its name: the chainID of its layer stack.
   */
  'chainId'?: (string);
  /**
   * The diffID of its layer.
   */
  'diffId'?: (string);
  /**
   * The chainID of the snapshot below it; empty for a bottom layer.
   */
  'parent'?: (string);
  /**
   * Bytes of the uncompressed layer tar.
   */
  'size'?: (number | string | Long);
  /**
   * When it was committed.
   */
  'created'?: (string);
  /**
   * Laid out for a rootless overlay mount (mount with "userxattr").
   */
  'rootless'?: (boolean);
}

/**
 * A committed snapshot.
 */
export interface SnapshotInfo__Output {
  /**
   * Its name: the chainID of its layer stack.
   */
  'chainId': (string);
  /**
   * The diffID of its layer.
   */
  'diffId': (string);
  /**
   * The chainID of the snapshot below it; empty for a bottom layer.
   */
  'parent': (string);
  /**
   * Bytes of the uncompressed layer tar.
   */
  'size': (number);
  /**
   * When it was committed.
   */
  'created': (string);
  /**
   * Laid out for a rootless overlay mount (mount with "userxattr").
   */
  'rootless': (boolean);
}
