#!/usr/bin/env node
// The `fastpull` executable.
import { main } from './main.js';

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
