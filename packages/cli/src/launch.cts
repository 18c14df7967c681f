#!/usr/bin/env node
// The `fastpull` executable: sizes libuv's thread pool, then runs the CLI (bin.ts).
// Node starts libuv's pool at its first use, and an ES module entry is loaded through it: only a
// CommonJS entry can size it. Each unpack worker (one per core) keeps up to three pool jobs going
// (node:zlib's inflate, both SHA-256s) and file calls need a few more; libuv's default of 4 would cap a
// pull's inflating and hashing at four cores. A UV_THREADPOOL_SIZE already set wins.
import os = require('node:os');

if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = String(Math.min(1024, 3 * os.availableParallelism() + 4));
void import('./bin.js');
