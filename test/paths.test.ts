// Paths a user gets wrong fail at once, naming the path and what is wrong with it: the CLI and fastpulld
// driven through ENOENT, ENOTDIR, EEXIST (a file where a directory should be), EACCES, EROFS, ELOOP and
// paths under /proc and /sys. Each check happens before any network work (the pulls name a registry
// nobody serves, so a check made too late shows as NETWORK_ERROR), and commands that only read the
// store never create it. The time bound is a hang guard, not a speed figure: these used to spin forever.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_CONFIG } from '@fastpull/daemon';
import { cliPath, daemonBin, tempDir } from './helpers.js';
import { lacks, lacksRoot } from '@fastpull/core/testing';

/** A registry reference nothing answers (port 9, discard): reaching the network fails with NETWORK_ERROR. */
const NOWHERE = '127.0.0.1:9/paths/app:1';
/** A run still going after this is killed (its status then is null, which no case expects): a hang fails its case instead of the whole file's timeout. */
const HANG_GUARD_MS = 20_000;

const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;

interface Run {
  status: number | null;
  stderr: string;
}

function run(file: string, args: string[], prefix: string[] = []): Promise<Run> {
  return new Promise((resolve) => {
    const [cmd, ...rest] = prefix.length > 0 ? [...prefix, process.execPath, file, ...args] : [process.execPath, file, ...args];
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, FASTPULL_ADDRESS: '', FASTPULLD_CONFIG: '' } });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), HANG_GUARD_MS);
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stderr });
    });
  });
}

function expectRefused(r: Run, code: string, ...mentions: string[]): void {
  expect(r.status, r.stderr).not.toBe(0);
  expect(r.stderr).toMatch(new RegExp(`\\(${code}\\)\\n$`));
  for (const m of mentions) expect(r.stderr).toContain(m);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
}

describe('paths a user gets wrong', () => {
  const work = tempDir('paths');
  const file = join(work.dir, 'a-file');
  writeFileSync(file, 'not a directory\n');
  const loop = join(work.dir, 'loop');
  symlinkSync(loop, loop);
  afterAll(() => work.cleanup());

  const cli = (args: string[], prefix?: string[]) => run(cliPath, args, prefix);

  it('pull under /proc or /sys fails at once with INVALID_ARGUMENT, before any network work', async () => {
    for (const root of ['/proc/nope', '/sys/nope/store', '/proc']) {
      expectRefused(await cli(['pull', '--root', root, NOWHERE]), 'INVALID_ARGUMENT', root, 'kernel filesystem');
    }
  });

  it('a store root that is a file, goes through a file, loops or is empty is INVALID_ARGUMENT', async () => {
    expectRefused(await cli(['pull', '--root', file, NOWHERE]), 'INVALID_ARGUMENT', file, 'is not a directory');
    expectRefused(await cli(['pull', '--root', join(file, 'store'), NOWHERE]), 'INVALID_ARGUMENT', `goes through ${file}`);
    expectRefused(await cli(['pull', '--root', join(loop, 'store'), NOWHERE]), 'INVALID_ARGUMENT', 'symbolic links');
    expectRefused(await cli(['pull', '--root', '', NOWHERE]), 'INVALID_ARGUMENT', 'empty path');
    expectRefused(await cli(['images', '--root', file]), 'INVALID_ARGUMENT', file);
  });

  it('a missing --hosts-dir is INVALID_ARGUMENT before any network work', async () => {
    const missing = join(work.dir, 'no-certs.d');
    expectRefused(await cli(['pull', '--root', join(work.dir, 'store-h'), '--hosts-dir', missing, NOWHERE]), 'INVALID_ARGUMENT', missing, 'does not exist');
  });

  it('commands that only read the store never create it: a missing store is NOT_FOUND naming it', async () => {
    for (const args of [['images'], ['gc'], ['gc', '--dry-run'], ['inspect', 'app:1'], ['mounts', 'app:1'], ['rm', 'app:1']]) {
      const root = join(work.dir, `typo-${args.join('-')}`);
      expectRefused(await cli([...args, '--root', root]), 'NOT_FOUND', root, 'does not exist');
      expect(existsSync(root)).toBe(false);
    }
  });

  it('the network is reached only once the store root is good (control: a good root fails on the network)', async () => {
    const r = await cli(['pull', '--root', join(work.dir, 'good'), NOWHERE]);
    expectRefused(r, 'NETWORK_ERROR');
    expect(existsSync(join(work.dir, 'good'))).toBe(true);
  });

  it.skipIf(lacksRoot())('a store root on a read-only filesystem is PERMISSION_DENIED', async (ctx) => {
    const ro = join(work.dir, 'ro');
    mkdirSync(ro);
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', ro]).status !== 0) {
      lacks('tmpfs', 'cannot mount a read-only tmpfs here');
      ctx.skip();
    }
    try {
      expectRefused(await cli(['pull', '--root', join(ro, 'store'), NOWHERE]), 'PERMISSION_DENIED', join(ro, 'store'), 'read-only');
    } finally {
      spawnSync('umount', [ro]);
    }
  });

  it.skipIf(lacksRoot() || lacks('setpriv', hasSetpriv ? undefined : 'setpriv (util-linux) is not installed'))(
    'a store root another user may not write is PERMISSION_DENIED',
    async () => {
      const owned = join(work.dir, 'root-only');
      mkdirSync(owned, { mode: 0o755 });
      chmodSync(work.dir, 0o755);
      const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
      expectRefused(await cli(['pull', '--root', join(owned, 'store'), NOWHERE], asNobody), 'PERMISSION_DENIED', join(owned, 'store'), 'permission denied');
    },
  );

  it('fastpulld refuses a bad store root or socket path at once, naming it, with exit 2', async () => {
    const socket = join(work.dir, 'd.sock');
    const cases: Array<[string[], string]> = [
      [['--root', '/proc/nope', '--socket', socket], '/proc/nope'],
      [['--root', join(work.dir, 'droot'), '--socket', '/proc/nope/x.sock'], '/proc/nope'],
      [['--root', file, '--socket', socket], file],
      [['--root', join(work.dir, 'droot'), '--socket', join(file, 'x.sock')], file],
      [['--root', join(work.dir, 'droot'), '--socket', socket, '--hosts-dir', file], file],
    ];
    for (const [args, path] of cases) {
      const r = await run(daemonBin, args);
      expect(r.status, r.stderr).toBe(EXIT_CONFIG);
      expect(r.stderr).toContain(path);
      expect(r.stderr).toMatch(/^fastpulld: .*\(INVALID_ARGUMENT\)\n$/);
    }
  });
});
