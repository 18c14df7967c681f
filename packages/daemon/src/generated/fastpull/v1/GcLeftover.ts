// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * A leftover of a process that died, as garbage collection found it.
 */
export interface GcLeftover {
  /**
   * What it is: lease, ingest (a partial download), active (a half-written snapshot), trash (a
   * snapshot a killed collection had begun to delete) or temp (a temporary file of a record, blob or
   * link write).
   */
  'kind'?: (string);
  /**
   * Its path relative to the store root, /-separated.
   */
  'path'?: (string);
}

/**
 * A leftover of a process that died, as garbage collection found it.
 */
export interface GcLeftover__Output {
  /**
   * What it is: lease, ingest (a partial download), active (a half-written snapshot), trash (a
   * snapshot a killed collection had begun to delete) or temp (a temporary file of a record, blob or
   * link write).
   */
  'kind': (string);
  /**
   * Its path relative to the store root, /-separated.
   */
  'path': (string);
}
