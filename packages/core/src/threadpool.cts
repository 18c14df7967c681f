// Sizes libuv's thread pool for a process that unpacks layers. Node starts the pool at its first use,
// and an ES module entry is loaded through it, so executables call this from a CommonJS launcher.
import os = require('node:os');

/**
 * Pool threads for a machine with `cores` cores. Each unpack worker (one per core by default) keeps
 * up to three pool jobs going for its layer (node:zlib's inflate and both SHA-256s), and file calls
 * and the download's positional writes need a few more; 4, libuv's default, would cap a pull's
 * inflating and hashing at four cores whatever the machine.
 */
function threadPoolSize(cores: number): number {
  return Math.min(1024, 3 * Math.max(1, Math.floor(cores)) + 4);
}

/** Sets UV_THREADPOOL_SIZE in `env` unless it is set already (a value there wins); returns what it holds. */
function sizeThreadPool(env: NodeJS.ProcessEnv = process.env, cores: number = os.availableParallelism()): string {
  if (env.UV_THREADPOOL_SIZE === undefined || env.UV_THREADPOOL_SIZE === '') env.UV_THREADPOOL_SIZE = String(threadPoolSize(cores));
  return env.UV_THREADPOOL_SIZE;
}

export = { threadPoolSize, sizeThreadPool };
