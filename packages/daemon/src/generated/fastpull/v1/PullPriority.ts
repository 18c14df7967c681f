// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

/**
 * How urgent a pull is. Waiting range requests and unpack passes of a higher priority go first; a
 * low pull starts no layer while a pull above it runs (layers it has started go on).
 */
export const PullPriority = {
  /**
   * Normal.
   */
  PULL_PRIORITY_UNSPECIFIED: 'PULL_PRIORITY_UNSPECIFIED',
  /**
   * A pull a container start waits on (the containerd fast path's).
   */
  PULL_PRIORITY_HIGH: 'PULL_PRIORITY_HIGH',
  /**
   * The default.
   */
  PULL_PRIORITY_NORMAL: 'PULL_PRIORITY_NORMAL',
  /**
   * A background pull: gives way to every other.
   */
  PULL_PRIORITY_LOW: 'PULL_PRIORITY_LOW',
} as const;

/**
 * How urgent a pull is. Waiting range requests and unpack passes of a higher priority go first; a
 * low pull starts no layer while a pull above it runs (layers it has started go on).
 */
export type PullPriority =
  /**
   * Normal.
   */
  | 'PULL_PRIORITY_UNSPECIFIED'
  | 0
  /**
   * A pull a container start waits on (the containerd fast path's).
   */
  | 'PULL_PRIORITY_HIGH'
  | 1
  /**
   * The default.
   */
  | 'PULL_PRIORITY_NORMAL'
  | 2
  /**
   * A background pull: gives way to every other.
   */
  | 'PULL_PRIORITY_LOW'
  | 3

/**
 * How urgent a pull is. Waiting range requests and unpack passes of a higher priority go first; a
 * low pull starts no layer while a pull above it runs (layers it has started go on).
 */
export type PullPriority__Output = typeof PullPriority[keyof typeof PullPriority]
