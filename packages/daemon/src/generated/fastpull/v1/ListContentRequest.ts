// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * List the blobs.
 */
export interface ListContentRequest {
}

/**
 * List the blobs.
 */
export interface ListContentRequest__Output {
}
