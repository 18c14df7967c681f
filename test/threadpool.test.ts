// The fastpull and fastpulld launchers size libuv's thread pool before Node starts it: three threads per core and four more, unless UV_THREADPOOL_SIZE is set.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { datagramListenerUnavailable, listenDatagrams } from '../packages/core/src/util/unix-datagram.testkit.js';
import { lacks } from '@fastpull/core/testing';
import { repoRoot, tempDir } from './helpers.js';

const launcher = join(repoRoot, 'packages', 'cli', 'dist', 'launch.cjs');
const daemonLauncher = join(repoRoot, 'packages', 'daemon', 'dist', 'launch.cjs');
const expected = Math.min(1024, 3 * availableParallelism() + 4);
const work = tempDir('threadpool');
afterAll(() => work.cleanup());
const { UV_THREADPOOL_SIZE: _, ...baseEnv } = process.env;

/** Threads of a fastpulld started through its launcher, once it says READY=1 (everything it starts at boot has started). */
async function daemonThreads(name: string, env: NodeJS.ProcessEnv): Promise<number> {
  const socket = join(work.dir, `${name}.sock`);
  const notify = await listenDatagrams(join(work.dir, `${name}.notify`));
  const proc = spawn(process.execPath, [daemonLauncher, '--root', join(work.dir, name), '--socket', socket, '--snapshotter-socket', ''], {
    env: { ...env, FASTPULLD_CONFIG: '', NOTIFY_SOCKET: notify.address },
    stdio: 'ignore',
  });
  try {
    const exited = new Promise<never>((_, reject) => proc.once('exit', (code) => reject(new Error(`fastpulld exited (${code}) before READY=1`))));
    exited.catch(() => {}); // the kill below ends it too, once READY=1 came
    for (;;) {
      const d = await Promise.race([notify.next(), exited]);
      if (d.fields.READY === '1') break;
    }
    return readdirSync(`/proc/${proc.pid}/task`).length;
  } finally {
    proc.kill('SIGKILL');
    if (proc.exitCode === null && proc.signalCode === null) await new Promise((r) => proc.once('exit', r));
    await notify.close();
  }
}

describe('thread pool size', () => {
  it("is what `fastpull version` reports through the launcher, and the environment's value when set", () => {
    const version = (env: NodeJS.ProcessEnv) => {
      const r = spawnSync(process.execPath, [launcher, 'version', '--json'], { env, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { threadPool: number }).threadPool;
    };
    expect(version(baseEnv)).toBe(expected);
    expect(version({ ...baseEnv, UV_THREADPOOL_SIZE: '5' })).toBe(5);
  });

  it('the small-file writers: one per core, 2 to 4, or FASTPULL_WRITER_THREADS as a fresh CLI reads it', () => {
    const writers = (env: NodeJS.ProcessEnv) => {
      const r = spawnSync(process.execPath, [launcher, 'version', '--json'], { env, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { writerThreads: number }).writerThreads;
    };
    const { FASTPULL_WRITER_THREADS: _unset, ...plain } = baseEnv;
    expect(writers(plain)).toBe(Math.min(4, Math.max(2, availableParallelism())));
    expect(writers({ ...plain, FASTPULL_WRITER_THREADS: '8' })).toBe(8);
    expect(writers({ ...plain, FASTPULL_WRITER_THREADS: '17' })).toBe(Math.min(4, Math.max(2, availableParallelism())));
  });

  it.skipIf(lacks('python', datagramListenerUnavailable()))(
    "takes effect in fastpulld started through its launcher: its threads grow by the pool's size over 4",
    async () => {
      const sized = await daemonThreads('sized', baseEnv);
      const four = await daemonThreads('four', { ...baseEnv, UV_THREADPOOL_SIZE: '4' });
      expect(sized - four).toBe(expected - 4);
    },
  );
});
