// A pull's own CPU budget in fastpulld, counted from /proc: with no budget for the daemon, a pull sent
// by `fastpull pull --address ... --cpu-budget 1` unpacks on a thread confined to one CPU while another
// pull, sent without one at the same time, unpacks on every CPU; both threads are read from
// /proc/PID/task/TID/status while the registry holds their blobs back, and every thread of the daemon
// is back on every CPU once both pulls are done.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FastpullClient } from '@fastpull/daemon';
import { allowedCpus, parseCpuList } from '@fastpull/core';
import { notHere, sampleImage, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import { cliPath, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const work = tempDir('pull-cpu-budget');
afterAll(() => work.cleanup());

const cpus = allowedCpus();

/** The CPUs thread `tid` of `pid` may run on, as the kernel lists them; undefined once it has ended. */
function cpusOf(pid: number, tid: number | string): string | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const list = /^Cpus_allowed_list:\s*(.*)$/m.exec(status)?.[1];
  return list === undefined ? undefined : parseCpuList(list).join(',');
}

/** Threads of `pid` by the CPUs they may run on. */
function threadsByCpus(pid: number): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const list = cpusOf(pid, tid);
    if (list !== undefined) out.set(list, [...(out.get(list) ?? []), tid]);
  }
  return out;
}

/** Holds every layer blob of the images back until the returned function is called. */
function holdLayers(reg: LoopbackRegistry, images: readonly BuiltImage[]): () => void {
  let release!: () => void;
  const digests = images.flatMap((i) => i.layers.map((l) => l.digest));
  reg.faults.hold = { path: new RegExp(digests.join('|')), until: new Promise<void>((r) => (release = r)) };
  return release;
}

// A budget of one core is every CPU of a machine that gives the test one: nothing could tell them apart.
describe.skipIf(notHere(cpus.length < 2 ? `this process may run on CPU ${cpus.join(',')} only, and a budget of 1 is all of it` : undefined))(
  'a pull of its own CPU budget through fastpulld',
  () => {
    let daemon: RunningDaemon | undefined;
    let reg: LoopbackRegistry;
    const socket = join(work.dir, 'fastpulld.sock');

    beforeAll(async () => {
      reg = await startLoopbackRegistry();
      // No budget for the daemon; a slot for each pull, whose pass holds it while its blob is held back;
      // debug logs say where each pass runs.
      daemon = await serveDaemon([
        '--socket',
        socket,
        '--root',
        join(work.dir, 'root'),
        '--snapshotter-socket',
        '',
        '--unpack-concurrency',
        '2',
        '--log-level',
        'debug',
      ]);
    });
    afterAll(async () => {
      await stopDaemon(daemon);
      await reg?.close();
    });

    it('unpacks the pull with budget 1 on one CPU, and one without on every CPU, at the same time', async () => {
      const d = daemon!;
      const pid = d.proc.pid!;
      const all = cpus.join(',');
      const last = String(cpus[cpus.length - 1]);
      const a = await sampleImage(4701, { layers: 1 });
      const b = await sampleImage(4702, { layers: 1 });
      reg.addImage('budget/a', '1', a);
      reg.addImage('budget/b', '1', b);
      const refA = `${reg.host}/budget/a:1`;
      const refB = `${reg.host}/budget/b:1`;
      expect([...threadsByCpus(pid).keys()]).toEqual([all]);
      const release = holdLayers(reg, [a, b]);
      const client = new FastpullClient(socket);
      try {
        // The budget goes from the command line through the daemon's API to the pull.
        const cli = spawn(process.execPath, [cliPath, 'pull', '--address', socket, '--cpu-budget', '1', '--json', refA], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        cli.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        cli.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        const cliDone = new Promise<number | null>((resolve) => cli.on('close', resolve));
        const passA = await d.waitLog((l) => l.msg === 'unpack pass started' && String(l.image).endsWith('/budget/a:1'));
        expect(passA).toMatchObject({ cpuBudget: 1, cpus: last });
        const pullB = client.pull(refB);
        const passB = await d.waitLog((l) => l.msg === 'unpack pass started' && String(l.image).endsWith('/budget/b:1'));
        expect(passB).toMatchObject({ cpuBudget: null, cpus: all });
        const tidA = Number(passA.tid);
        const tidB = Number(passB.tid);
        expect(tidA).not.toBe(tidB);
        // Both passes run now, each waiting for its blob: read from /proc, not from the log.
        expect(cpusOf(pid, tidA)).toBe(last);
        expect(cpusOf(pid, tidB)).toBe(all);
        // Nothing else of the daemon was moved: the budget is the pull's, not the process's.
        const byCpus = threadsByCpus(pid);
        expect(byCpus.get(last)).toEqual([String(tidA)]);
        expect(byCpus.get(all)!.length).toBeGreaterThan(4);
        release();
        const doneB = await pullB;
        expect(doneB.image.manifest.digest).toBe(b.manifestDigest);
        expect(await cliDone, stderr).toBe(0);
        expect(stdout).toContain('"type":"done"');
        await d.waitLog((l) => l.msg === 'pull finished' && String(l.image).endsWith('/budget/a:1'));
        // The worker that ran the budgeted pass, and the threads that hashed, decoded and wrote for it,
        // are back on every CPU (a worker retired since has no entry).
        expect([...threadsByCpus(pid).keys()]).toEqual([all]);
      } finally {
        release();
        await client.close();
      }
    });
  },
);
