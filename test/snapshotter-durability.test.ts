// Committed means durable for the snapshots containerd commits through the snapshotter API too:
// fastpulld runs under `strace -f`, a client Prepares a snapshot, writes into it as containerd's
// diff applier does, and Commits it. The flush before the commit's record must be a syncfs through an
// fd of the snapshot's directory opened at Prepare, before anything was written into it: a write-back
// error that a flush of the filesystem consumed in between is then still reported to it (a flush
// through a file opened at Commit would not see it).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lacks, lacksRoot } from '@fastpull/core/testing';
import { serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient } from './snapshotter-client.js';
import { parseTrace, straceUnavailable, type Syscall } from './strace.js';

const noStrace = straceUnavailable();
const work = tempDir('snapshotter-durability');
afterAll(() => work.cleanup());

const TRACED = ['openat', 'open', 'syncfs', 'fsync', 'rename', 'renameat', 'renameat2'];

describe.skipIf(lacksRoot() || lacks('strace', noStrace))('snapshots containerd commits are durable (strace)', () => {
  it('flushes a committed snapshot through an fd of its directory opened at Prepare, before its record is written', async () => {
    const trace = join(work.dir, 'trace');
    const socket = join(work.dir, 'fastpulld.sock');
    const snapSocket = join(work.dir, 'snapshotter.sock');
    let daemon: RunningDaemon | undefined;
    const client = snapshotsClient(snapSocket);
    let dir: string;
    try {
      daemon = await serveDaemon(['--socket', socket, '--snapshotter-socket', snapSocket, '--root', join(work.dir, 'root')], {
        wrap: ['strace', '-f', '-y', '-qq', '-s', '256', '-o', trace, '-e', `trace=${TRACED.join(',')}`],
      });
      const [mount] = await client.prepare('extract-1');
      // A Prepare without a parent is a bind mount of the snapshot's fs/ directory.
      expect(mount!.type).toBe('bind');
      dir = dirname(mount!.source);
      writeFileSync(join(mount!.source, 'layer-file'), 'written by containerd\n');
      // Usage walks the tree: its open of fs/ marks, in the daemon's trace, a moment after the write.
      expect((await client.usage('extract-1')).inodes).toBeGreaterThan(1);
      await client.commit('layer-1', 'extract-1');
    } finally {
      client.close();
      // strace exits when fastpulld does: the pid fastpulld logs is the one to stop.
      const serving = daemon?.logs.find((l) => l.msg === 'fastpulld serving');
      if (serving) process.kill(serving.pid as number, 'SIGTERM');
      await daemon?.exited;
      await stopDaemon(daemon);
    }
    const calls = parseTrace(readFileSync(trace, 'latin1')).filter((c) => c.ret >= 0);
    const fs = join(dir!, 'fs');
    const usageWalk = calls.find((c) => (c.name === 'openat' || c.name === 'open') && c.paths.includes(fs) && c.args.includes('O_DIRECTORY'));
    expect(usageWalk, 'no open of the snapshot fs/ by Usage').toBeDefined();
    const recordWrites = calls.filter((c) => c.name.startsWith('rename') && c.paths.some((p) => p.startsWith(`${dir!}/`) && p.endsWith('.json')));
    const commitRecord = recordWrites.at(-1)!;
    expect(commitRecord.start, 'the commit wrote no record after Usage').toBeGreaterThan(usageWalk!.end);
    const flush = calls.filter((c) => c.name === 'syncfs' && c.paths.includes(dir!) && c.end < commitRecord.start && c.start > usageWalk!.end).at(-1);
    expect(flush, `no syncfs through ${dir!} between the write and the commit's record`).toBeDefined();
    expect(openerOf(calls, flush!, dir!), 'the fd flushed through was not opened before the write').toBeLessThan(usageWalk!.start);
  });
});

/** Where (trace line) the fd that `flush` went through was opened: the latest open of `dir` that returned it. */
function openerOf(calls: readonly Syscall[], flush: Syscall, dir: string): number {
  const fd = Number(/^(\d+)</.exec(flush.args)?.[1] ?? NaN);
  const opened = calls.filter((c) => (c.name === 'openat' || c.name === 'open') && c.ret === fd && c.paths.includes(dir) && c.end < flush.start).at(-1);
  return opened?.end ?? Infinity;
}
