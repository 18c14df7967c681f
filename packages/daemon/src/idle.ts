// What fastpulld does when its last running pull settles: give back the memory the pulls used, so
// that what it holds between bursts of pulls is what it uses, not the high-water mark of the last.
//
// Measured in the long load run (30 generations of 36 pulls, test/reliability-load.test.ts), RSS
// after each generation rose 1-2 MiB a generation for a dozen generations, then fell by 40 MiB,
// and again (204 MiB after the 5th, 228 MiB at most, 217 MiB after the 30th; on a busier run
// 166 MiB after the 5th, 208 MiB after the 16th). Heap snapshots after the 5th and the 15th held the
// same objects (the live heap stayed at 21-22 MiB); the growth was freed memory kept: freed buffers
// in glibc's arenas (tuneAllocator keeps up to 64 MiB in each, and threads have their own), and
// garbage in V8's heap until a major collection. A full collection (it frees the buffers' memory to
// the allocator) and then malloc_trim take both back: 172 MiB after the 5th generation, 180 MiB
// after the 30th, 185 MiB at most, the growth all in the first ten.
import { collectHeap, trimAllocator } from '@fastpull/core';

/** Runs a full collection, then hands the allocator's free memory back to the kernel. */
export function releaseIdleMemory(): void {
  collectHeap('major');
  trimAllocator();
}
