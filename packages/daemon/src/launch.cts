#!/usr/bin/env node
// The `fastpulld` executable: sizes libuv's thread pool before anything starts it (see
// @fastpull/core's threadpool), then runs the daemon (bin.ts).
import threadpool = require('@fastpull/core/threadpool');

threadpool.sizeThreadPool();
void import('./bin.js');
