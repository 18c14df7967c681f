// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * List the images.
 */
export interface ListImagesRequest {
}

/**
 * List the images.
 */
export interface ListImagesRequest__Output {
}
