// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A pull's trace, recorded by the daemon.
 */
export interface PullTrace {
  /**
   * Chrome trace-event JSON ({"traceEvents": [...]}), as `fastpull pull --trace` writes it: open it
   * in Perfetto or chrome://tracing. Counters of memory are the daemon's.
   */
  'json'?: (string);
}

/**
 * A pull's trace, recorded by the daemon.
 */
export interface PullTrace__Output {
  /**
   * Chrome trace-event JSON ({"traceEvents": [...]}), as `fastpull pull --trace` writes it: open it
   * in Perfetto or chrome://tracing. Counters of memory are the daemon's.
   */
  'json': (string);
}
