// How many layers a pool unpacks at once by default, by the cores the process may use.
import { availableCores } from '../../util/cpu.js';

/**
 * Layers a pool unpacks at once by default on `cores` cores: one per two cores, at most
 * {@link MAX_POOL_SIZE}. A pass keeps about
 * two cores busy by itself: its unpack thread parses the tar and writes the large files, ISA-L's
 * decode thread inflates, libuv's pool hashes both streams, and the addon's writer threads make the
 * small files. A slower download is what a pass then waits for, and a pass that waits lends its
 * slot to a layer that has landed (LEND_WAIT_SHARE in lending.ts): without lending, small layers queued
 * behind a large one's pass while it waited for bytes (docs/architecture.md, "Figures behind the
 * defaults").
 * @example poolSizeFor(2) // 1; poolSizeFor(16) // 4 (MAX_POOL_SIZE)
 */
export function poolSizeFor(cores = availableCores()): number {
  return Math.min(MAX_POOL_SIZE, Math.max(1, Math.ceil(cores / 2)));
}

/**
 * The most layers a pool unpacks at once by default, however many cores (`--unpack-concurrency`
 * sets any). Each slot's worker holds its own heap and allocator arena, about 16-40 MiB, and every
 * pass's small files compete for the same filesystem: more slots than four bought little time for
 * much memory (docs/architecture.md, "Figures behind the defaults").
 */
export const MAX_POOL_SIZE = 4;
