#!/usr/bin/env node
// The `fastpull` executable.
import { tuneAllocator } from '@fastpull/core';
import { main } from './main.js';

// Unpacking allocates output buffers by the gigabyte: keep their pages (FASTPULL_TUNE_MALLOC=0: don't).
tuneAllocator(process.env);

// A reader that goes away (`fastpull images | head -1`) ends the output, not in a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
}

const controller = new AbortController();
let interrupted = 0;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    // First signal: abort cleanly (the store stays resumable); second: leave now.
    if (++interrupted > 1) process.exit(130);
    controller.abort(new Error(`received ${sig}`));
  });
}
process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }, controller.signal);
