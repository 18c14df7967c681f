// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { SnapshotInfo as _fastpull_v1_SnapshotInfo, SnapshotInfo__Output as _fastpull_v1_SnapshotInfo__Output } from '../../fastpull/v1/SnapshotInfo.js';

/**
 * The committed snapshots.
 */
export interface ListSnapshotsResponse {
  /**
   * Snapshots sorted by chainID.
   */
  'snapshots'?: (_fastpull_v1_SnapshotInfo)[];
}

/**
 * The committed snapshots.
 */
export interface ListSnapshotsResponse__Output {
  /**
   * Snapshots sorted by chainID.
   */
  'snapshots': (_fastpull_v1_SnapshotInfo__Output)[];
}
