// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A count (a message, so that its absence shows).
 */
export interface Count {
  'n'?: (number);
}

/**
 * A count (a message, so that its absence shows).
 */
export interface Count__Output {
  'n': (number);
}
