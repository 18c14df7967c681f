#!/usr/bin/env node
// The `fastpulld` executable: sizes libuv's thread pool and caps the C library's allocator arenas,
// then runs the daemon (bin.ts). As the CLI's launch.cts for the pool.
// Node starts libuv's pool at its first use, and an ES module entry is loaded through it: only a
// CommonJS entry can size it. Each unpack worker (one per core) keeps up to three pool jobs going
// (node:zlib's inflate, both SHA-256s) and file calls need a few more; libuv's default of 4 would cap a
// pull's inflating and hashing at four cores. A UV_THREADPOOL_SIZE already set wins.
import os = require('node:os');
import path = require('node:path');

if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = String(Math.min(1024, 3 * os.availableParallelism() + 4));

/**
 * Allocator arenas fastpulld's threads share. glibc gives every thread that allocates an arena of
 * its own, up to eight per core, and each keeps what a trim cannot give back (its live allocations,
 * spread over pages); an idle daemon of twenty threads held several MiB that way, more after each
 * burst of pulls (docs/daemon.md, "Memory"). Set here, before the daemon's code loads: an arena a
 * thread already made stays, threads that come later share the ones there are. A MALLOC_ARENA_MAX
 * in the environment wins (glibc applied it when the process started).
 */
const ARENAS = 1;
if (!process.env.MALLOC_ARENA_MAX) {
  try {
    // The addon itself, not the library: loading @fastpull/core would start the threads first.
    const addon = path.join(path.dirname(require.resolve('@fastpull/core/package.json')), 'native', 'build', 'Release', 'fastpull_native.node');
    (require(addon) as { limitArenas?: (count: number) => boolean }).limitArenas?.(ARENAS);
  } catch {
    // No addon: glibc's own arenas; the daemon says what is missing when a pull first needs it.
  }
}
void import('./bin.js');
