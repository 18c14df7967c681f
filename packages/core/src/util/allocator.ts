// Tunes the C library's allocator for unpacking: see tuneAllocator below.
import { nativeFs } from '../unpack/native.js';

/** Allocations above this come from their own mapping (glibc's default is dynamic, from 128 KiB). */
export const MMAP_THRESHOLD = 4 * 1024 * 1024;
/** Free memory at the top of the heap beyond this goes back to the kernel (default: twice the mmap threshold). */
export const TRIM_THRESHOLD = 64 * 1024 * 1024;

/** What {@link tuneAllocator} did. */
export type AllocatorTuning = 'tuned' | 'disabled' | 'unsupported';

let done: AllocatorTuning | undefined;

/**
 * Keeps freed buffer memory in the process instead of handing it back to the kernel after each use.
 * Decompressing a layer allocates its output as buffers of 64 KiB to 1 MiB, gigabytes of them; with
 * glibc's defaults (a dynamic mmap threshold, and a trim threshold twice that) each buffer is a fresh
 * mapping or lands on a heap top that was just trimmed, so every 4 KiB of output costs a page fault.
 * Gunzipping the bench's 1 GB layer from a file with node:zlib took 59,000 faults and 1.1 s of
 * system time with the defaults, and 200-1,000 faults, 0.4 s and 1.3x less wall time with these
 * thresholds; a whole pull with node:zlib 6% less wall and 9% less CPU (docs/architecture.md). The
 * cost is freed memory kept in the heap: up to 64 MiB per malloc arena (threads get their own).
 *
 * Process-wide and once: the CLI and fastpulld call it at startup; a library user may. The
 * environment variable FASTPULL_TUNE_MALLOC=0 leaves the allocator alone. Only glibc is tuned.
 * @example
 * import { tuneAllocator } from '@fastpull/core';
 * tuneAllocator(); // 'tuned' on glibc
 */
export function tuneAllocator(env: NodeJS.ProcessEnv = process.env): AllocatorTuning {
  if (env.FASTPULL_TUNE_MALLOC === '0') return 'disabled';
  if (done) return done;
  try {
    done = nativeFs().tuneAllocator(MMAP_THRESHOLD, TRIM_THRESHOLD) ? 'tuned' : 'unsupported';
  } catch {
    done = 'unsupported'; // no addon: nothing to tune with (the unpack itself will say what is missing)
  }
  return done;
}

/**
 * Gives the free memory the tuned allocator keeps back to the kernel (glibc's `malloc_trim`: every
 * arena, its top and the free pages inside it). With {@link tuneAllocator}'s thresholds each arena
 * keeps up to 64 MiB freed, and pulls spread their buffers over many arenas (worker threads and the
 * thread pool get their own): a long-running process grows by that with each burst of pulls until
 * every arena is full. It calls this when it goes idle (fastpulld, when its last pull settles), so
 * what it holds between pulls is what it uses. Returns true when memory was released; false when
 * none was, the C library is not glibc, the addon is missing, or FASTPULL_TUNE_MALLOC=0.
 * @example
 * import { trimAllocator } from '@fastpull/core';
 * if (runningPulls === 0) trimAllocator();
 */
export function trimAllocator(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.FASTPULL_TUNE_MALLOC === '0') return false;
  try {
    return nativeFs().trimAllocator();
  } catch {
    return false; // no addon: nothing was tuned either
  }
}
