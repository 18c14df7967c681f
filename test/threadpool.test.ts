// The fastpull and fastpulld launchers size libuv's thread pool before Node starts it: from the core count, unless UV_THREADPOOL_SIZE is set.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers.js';

const launcher = join(repoRoot, 'packages', 'cli', 'dist', 'launch.cjs');
const daemonLauncher = join(repoRoot, 'packages', 'daemon', 'dist', 'launch.cjs');
// The built module, as the launchers load it (vite does not read .cts sources).
const poolModule = join(repoRoot, 'packages', 'core', 'dist', 'threadpool.cjs');
const { sizeThreadPool, threadPoolSize } = createRequire(import.meta.url)(poolModule) as typeof import('@fastpull/core/threadpool');

/** Threads of a node process once it has used the pool, launched with `prelude` run first. */
function threadsAfterPoolUse(prelude: string, env: NodeJS.ProcessEnv): number {
  const script = `${prelude}; const fs = require('node:fs'); fs.readFile('/proc/self/status', () => console.log(fs.readdirSync('/proc/self/task').length));`;
  const r = spawnSync(process.execPath, ['-e', script], { env, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return Number(r.stdout.trim());
}

describe('thread pool size', () => {
  it('is three threads per core and four more, up to libuv\'s 1024; a value already set wins', () => {
    expect(threadPoolSize(1)).toBe(7);
    expect(threadPoolSize(2)).toBe(10);
    expect(threadPoolSize(64)).toBe(196);
    expect(threadPoolSize(1000)).toBe(1024);
    expect(threadPoolSize(0)).toBe(7);
    const env: NodeJS.ProcessEnv = {};
    expect(sizeThreadPool(env, 16)).toBe('52');
    expect(env.UV_THREADPOOL_SIZE).toBe('52');
    const set: NodeJS.ProcessEnv = { UV_THREADPOOL_SIZE: '6' };
    expect(sizeThreadPool(set, 16)).toBe('6');
  });

  it('takes effect when set from a CommonJS entry before the first pool call', () => {
    const { UV_THREADPOOL_SIZE: _, ...env } = process.env;
    const plain = threadsAfterPoolUse('process.env.UV_THREADPOOL_SIZE = "4"', env);
    const sized = threadsAfterPoolUse(`require(${JSON.stringify(poolModule)}).sizeThreadPool(process.env, 3)`, env);
    expect(sized - plain).toBe(threadPoolSize(3) - 4);
  });

  it('is what `fastpull version` reports through the launcher, and the environment\'s value when set', () => {
    const { UV_THREADPOOL_SIZE: _, ...env } = process.env;
    const version = (e: NodeJS.ProcessEnv) => {
      const r = spawnSync(process.execPath, [launcher, 'version', '--json'], { env: e, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { threadPool: number }).threadPool;
    };
    expect(version(env)).toBe(threadPoolSize(availableParallelism()));
    expect(version({ ...env, UV_THREADPOOL_SIZE: '5' })).toBe(5);
    const d = spawnSync(process.execPath, [daemonLauncher, '--version'], { env, encoding: 'utf8' });
    expect(d.status, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/^fastpulld \d/);
  });
});
