// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Long } from '@grpc/proto-loader';

/**
 * Disk usage of a snapshot's tree.
 */
export interface UsageResponse {
  /**
   * Bytes its files take on disk (allocated blocks; hard links counted once).
   */
  'size'?: (number | string | Long);
  /**
   * Number of files, directories and other entries.
   */
  'inodes'?: (number | string | Long);
}

/**
 * Disk usage of a snapshot's tree.
 */
export interface UsageResponse__Output {
  /**
   * Bytes its files take on disk (allocated blocks; hard links counted once).
   */
  'size': (number);
  /**
   * Number of files, directories and other entries.
   */
  'inodes': (number);
}
