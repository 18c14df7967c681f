// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * The blob was removed.
 */
export interface DeleteContentResponse {
}

/**
 * The blob was removed.
 */
export interface DeleteContentResponse__Output {
}
