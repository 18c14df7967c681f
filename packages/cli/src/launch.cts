#!/usr/bin/env node
// The `fastpull` executable: sizes libuv's thread pool, then runs the CLI (bin.ts).
// Node starts libuv's pool at its first use, and an ES module entry is loaded through it: only a
// CommonJS entry can size it. Each unpack worker (one per core) keeps up to three pool jobs going
// (node:zlib's inflate, both SHA-256s) and file calls need a few more; libuv's default of 4 would cap a
// pull's inflating and hashing at four cores. A UV_THREADPOOL_SIZE already set wins.
import os = require('node:os');

if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = String(Math.min(1024, 3 * os.availableParallelism() + 4));
void (async () => {
  // A background pull first moves to a session of its own where sessions split CPU time (session.ts).
  const session = await import('./session.js').catch(() => undefined);
  if (session?.needsOwnSession(process.argv.slice(2), session.sessionState())) return session.relaunchInOwnSession();
  // A pull's first layer waits for an unpack worker, which takes 0.2-0.3 s of a core to start and load
  // the unpacker: started first, it loads on another core while this thread loads the CLI (0.2-0.3 s
  // too), and is ready when the first layer starts downloading (the pull's pool takes it).
  await import('./ahead.js')
    .then(({ startsWorkerAhead }) =>
      startsWorkerAhead(process.argv.slice(2), process.env) ? import('@fastpull/core/worker-ahead').then((m) => m.startWorkerAhead()) : undefined,
    )
    .catch(() => undefined);
  await import('./bin.js');
})();
