// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * List the writable mounts.
 */
export interface ListWritableMountsRequest {
}

/**
 * List the writable mounts.
 */
export interface ListWritableMountsRequest__Output {
}
