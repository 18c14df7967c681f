// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Millis as _fastpull_v1_Millis, Millis__Output as _fastpull_v1_Millis__Output } from '../../fastpull/v1/Millis.js';
import type { Count as _fastpull_v1_Count, Count__Output as _fastpull_v1_Count__Output } from '../../fastpull/v1/Count.js';
import type { Long } from '@grpc/proto-loader';

/**
 * Where one layer's time went (see PullTimings in @fastpull/core).
 */
export interface LayerTimings {
  /**
   * Digest of the layer blob.
   */
  'digest'?: (string);
  /**
   * Downloading (0 when the blob or snapshot was already there).
   */
  'fetchMs'?: (number | string);
  /**
   * Wall time of the single pass that hashes, decompresses and extracts.
   */
  'unpackMs'?: (number | string);
  /**
   * Of the pass: waiting for downloaded bytes.
   */
  'waitMs'?: (number | string);
  /**
   * Of the pass: SHA-256 of the blob and of the tar.
   */
  'verifyMs'?: (number | string);
  /**
   * Of the pass: decompressing.
   */
  'decompressMs'?: (number | string);
  /**
   * Of the pass: reading tar headers and writing files.
   */
  'extractMs'?: (number | string);
  /**
   * Committing the blob and the snapshot.
   */
  'commitMs'?: (number | string);
  /**
   * "committed" or "exists".
   */
  'state'?: (string);
  /**
   * CPU of the pass's stages, each on its own thread's clock; absent for a layer that was there, or
   * where the daemon has no thread clock (no native addon). Messages, so that absence shows.
   * The thread that parsed the tar and wrote the files.
   */
  'threadCpu'?: (_fastpull_v1_Millis | null);
  /**
   * SHA-256 of the blob.
   */
  'blobHashCpu'?: (_fastpull_v1_Millis | null);
  /**
   * SHA-256 of the tar.
   */
  'tarHashCpu'?: (_fastpull_v1_Millis | null);
  /**
   * With the parallel inflater and a SOCI zTOC: the checkpoints it started chunks from.
   */
  'ztocCheckpoints'?: (_fastpull_v1_Count | null);
  /**
   * Decompressing, on the decoder's own threads' clocks: in-process ISA-L or the parallel gunzip
   * only (node:zlib, external programs, zstd and plain tar leave it absent).
   */
  'inflateCpu'?: (_fastpull_v1_Millis | null);
  /**
   * The writer threads that made the layer's small files, on their own clocks: 0 when none went to
   * them; absent where the daemon's addon has no writer threads.
   */
  'writerCpu'?: (_fastpull_v1_Millis | null);
  /**
   * Bytes of the downloaded blob the pass freed behind it (hole-punched once hashed, so they were
   * never flushed to disk); 0 when none were.
   */
  'releasedBytes'?: (number | string | Long);
}

/**
 * Where one layer's time went (see PullTimings in @fastpull/core).
 */
export interface LayerTimings__Output {
  /**
   * Digest of the layer blob.
   */
  'digest': (string);
  /**
   * Downloading (0 when the blob or snapshot was already there).
   */
  'fetchMs': (number);
  /**
   * Wall time of the single pass that hashes, decompresses and extracts.
   */
  'unpackMs': (number);
  /**
   * Of the pass: waiting for downloaded bytes.
   */
  'waitMs': (number);
  /**
   * Of the pass: SHA-256 of the blob and of the tar.
   */
  'verifyMs': (number);
  /**
   * Of the pass: decompressing.
   */
  'decompressMs': (number);
  /**
   * Of the pass: reading tar headers and writing files.
   */
  'extractMs': (number);
  /**
   * Committing the blob and the snapshot.
   */
  'commitMs': (number);
  /**
   * "committed" or "exists".
   */
  'state': (string);
  /**
   * CPU of the pass's stages, each on its own thread's clock; absent for a layer that was there, or
   * where the daemon has no thread clock (no native addon). Messages, so that absence shows.
   * The thread that parsed the tar and wrote the files.
   */
  'threadCpu': (_fastpull_v1_Millis__Output | null);
  /**
   * SHA-256 of the blob.
   */
  'blobHashCpu': (_fastpull_v1_Millis__Output | null);
  /**
   * SHA-256 of the tar.
   */
  'tarHashCpu': (_fastpull_v1_Millis__Output | null);
  /**
   * With the parallel inflater and a SOCI zTOC: the checkpoints it started chunks from.
   */
  'ztocCheckpoints': (_fastpull_v1_Count__Output | null);
  /**
   * Decompressing, on the decoder's own threads' clocks: in-process ISA-L or the parallel gunzip
   * only (node:zlib, external programs, zstd and plain tar leave it absent).
   */
  'inflateCpu': (_fastpull_v1_Millis__Output | null);
  /**
   * The writer threads that made the layer's small files, on their own clocks: 0 when none went to
   * them; absent where the daemon's addon has no writer threads.
   */
  'writerCpu': (_fastpull_v1_Millis__Output | null);
  /**
   * Bytes of the downloaded blob the pass freed behind it (hole-punched once hashed, so they were
   * never flushed to disk); 0 when none were.
   */
  'releasedBytes': (number);
}
