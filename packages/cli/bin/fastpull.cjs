#!/usr/bin/env node
// The `fastpull` executable: sizes libuv's thread pool before anything starts it (see
// @fastpull/core/threadpool), then runs the CLI.
'use strict';
require('@fastpull/core/threadpool').sizeThreadPool();
import('../dist/bin.js');
