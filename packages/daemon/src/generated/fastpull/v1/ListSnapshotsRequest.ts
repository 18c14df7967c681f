// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * List the snapshots.
 */
export interface ListSnapshotsRequest {
}

/**
 * List the snapshots.
 */
export interface ListSnapshotsRequest__Output {
}
