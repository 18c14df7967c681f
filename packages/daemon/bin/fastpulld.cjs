#!/usr/bin/env node
// The `fastpulld` executable: sizes libuv's thread pool before anything starts it (see
// @fastpull/core/threadpool), then runs the daemon.
'use strict';
require('@fastpull/core/threadpool').sizeThreadPool();
import('../dist/bin.js');
