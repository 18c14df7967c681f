// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A time in milliseconds (a message, so that its absence shows).
 */
export interface Millis {
  'ms'?: (number | string);
}

/**
 * A time in milliseconds (a message, so that its absence shows).
 */
export interface Millis__Output {
  'ms': (number);
}
