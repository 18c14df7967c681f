#!/usr/bin/env node
// The `fastpull` executable: sizes libuv's thread pool before anything starts it (see
// @fastpull/core's threadpool), then runs the CLI (bin.ts).
import threadpool = require('@fastpull/core/threadpool');

threadpool.sizeThreadPool();
void import('./bin.js');
