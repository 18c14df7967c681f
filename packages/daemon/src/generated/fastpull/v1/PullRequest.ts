// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Credentials as _fastpull_v1_Credentials, Credentials__Output as _fastpull_v1_Credentials__Output } from '../../fastpull/v1/Credentials.js';
import type { PullPriority as _fastpull_v1_PullPriority, PullPriority__Output as _fastpull_v1_PullPriority__Output } from '../../fastpull/v1/PullPriority.js';
import type { Long } from '@grpc/proto-loader';

/**
 * Pull an image.
 */
export interface PullRequest {
  /**
   * Image reference, e.g. "ubuntu:24.04" or "host:5000/team/app@sha256:...".
   */
  'reference'?: (string);
  /**
   * Platform "os/arch[/variant]" to pull from a multi-platform image; empty: the daemon's host.
   */
  'platform'?: (string);
  /**
   * Talk to the registry over plain HTTP (loopback registries always may).
   */
  'plainHttp'?: (boolean);
  /**
   * Keep the compressed layer blobs after unpacking.
   */
  'keepBlobs'?: (boolean);
  /**
   * Credentials for the reference's registry, before the daemon's own Docker config; optional.
   */
  'credentials'?: (_fastpull_v1_Credentials | null);
  /**
   * Record a trace of the pull and send it back (a `trace` message just before `done`, or before
   * the error status when the pull fails). A traced pull is shared only with callers that ask for
   * a trace too; the daemon writes no file.
   */
  'trace'?: (boolean);
  /**
   * How urgent the pull is among the daemon's pulls; unspecified: normal. Callers that share a pull
   * raise it to the highest of their priorities.
   */
  'priority'?: (_fastpull_v1_PullPriority);
  /**
   * Bytes per second this pull may read from registries; 0: no limit of its own. It only lowers
   * what the daemon allows: the daemon's rate_limit, shared by all its pulls, holds as well. A
   * caller that joins a running pull of the same image loosens it to its own limit when that is
   * higher, and lifts it when it gives none.
   */
  'rateLimitBytesPerSecond'?: (number | string | Long);
  /**
   * Whole cores this pull's unpack work may keep busy at once: its unpack passes, their decoder
   * threads and their hashing run on that many of the daemon's CPUs, while its other pulls keep
   * every one; 0: no budget of its own. The daemon's cpu_budget, over all its pulls, holds as well.
   * A caller that joins a running pull of the same image loosens it to its own budget when that is
   * larger, and lifts it when it gives none (as the containerd fast path's pulls do).
   */
  'cpuBudget'?: (number);
}

/**
 * Pull an image.
 */
export interface PullRequest__Output {
  /**
   * Image reference, e.g. "ubuntu:24.04" or "host:5000/team/app@sha256:...".
   */
  'reference': (string);
  /**
   * Platform "os/arch[/variant]" to pull from a multi-platform image; empty: the daemon's host.
   */
  'platform': (string);
  /**
   * Talk to the registry over plain HTTP (loopback registries always may).
   */
  'plainHttp': (boolean);
  /**
   * Keep the compressed layer blobs after unpacking.
   */
  'keepBlobs': (boolean);
  /**
   * Credentials for the reference's registry, before the daemon's own Docker config; optional.
   */
  'credentials': (_fastpull_v1_Credentials__Output | null);
  /**
   * Record a trace of the pull and send it back (a `trace` message just before `done`, or before
   * the error status when the pull fails). A traced pull is shared only with callers that ask for
   * a trace too; the daemon writes no file.
   */
  'trace': (boolean);
  /**
   * How urgent the pull is among the daemon's pulls; unspecified: normal. Callers that share a pull
   * raise it to the highest of their priorities.
   */
  'priority': (_fastpull_v1_PullPriority__Output);
  /**
   * Bytes per second this pull may read from registries; 0: no limit of its own. It only lowers
   * what the daemon allows: the daemon's rate_limit, shared by all its pulls, holds as well. A
   * caller that joins a running pull of the same image loosens it to its own limit when that is
   * higher, and lifts it when it gives none.
   */
  'rateLimitBytesPerSecond': (number);
  /**
   * Whole cores this pull's unpack work may keep busy at once: its unpack passes, their decoder
   * threads and their hashing run on that many of the daemon's CPUs, while its other pulls keep
   * every one; 0: no budget of its own. The daemon's cpu_budget, over all its pulls, holds as well.
   * A caller that joins a running pull of the same image loosens it to its own budget when that is
   * larger, and lifts it when it gives none (as the containerd fast path's pulls do).
   */
  'cpuBudget': (number);
}
