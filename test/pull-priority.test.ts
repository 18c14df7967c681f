// Background pulls from the command line: in this process, every thread of the CLI at nice 19 and in
// the idle I/O class; through fastpulld, a low pull that starts no layer while a normal one runs, and
// a low pull raised by a caller that joins it at normal priority.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FastpullClient } from '@fastpull/daemon';
import { sampleImage, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import { cliPath, repoRoot, runCli, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const work = tempDir('priority');
afterAll(() => work.cleanup());

/** `fastpull ARGS --json` with its events as they come; `until(fn)` resolves at the first event matching fn. */
function cliEvents(
  args: string[],
  bin = cliPath,
): {
  child: ChildProcess;
  until: (fn: (e: Record<string, unknown>) => boolean) => Promise<void>;
  done: Promise<{ status: number | null; events: Array<Record<string, unknown>>; stderr: string }>;
} {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const events: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buf = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      events.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
      buf = buf.slice(nl + 1);
      for (const w of [...waiters]) w();
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ status: number | null; events: Array<Record<string, unknown>>; stderr: string }>((resolve) =>
    child.on('close', (status) => resolve({ status, events, stderr })),
  );
  const until = (fn: (e: Record<string, unknown>) => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (!events.some(fn)) return;
        waiters.splice(waiters.indexOf(check), 1);
        resolve();
      };
      waiters.push(check);
      void done.then(() => reject(new Error(`fastpull exited before the event; stderr: ${stderr}`)));
      check();
    });
  return { child, until, done };
}

/** The `fastpull` executable as installed (bin.js behind the launcher that sizes the thread pool and moves background pulls). */
const launcher = join(repoRoot, 'packages', 'cli', 'dist', 'launch.cjs');

/**
 * Whether the kernel splits this process's CPU time by session (then a background pull gets a session
 * of its own). The file is there wherever the kernel can group by session, but it is empty for a
 * process whose session the kernel never grouped (one descended from init without a new session, as a
 * CI runner's commands may be): there every thread weighs on its own, nice 19 alone yields, and the CLI
 * pulls in the process it was started as.
 */
const AUTOGROUPS = existsSync('/proc/self/autogroup') && readFileSync('/proc/self/autogroup', 'utf8').trim() !== '';

/** The session id of process `pid` (field 6 of its stat, after the command's closing parenthesis). */
function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

/** Thread `tid` back at nice 0, if it is still there. */
function raise(tid: number): void {
  try {
    setPriority(tid, 0);
  } catch {
    // It ended since the listing.
  }
}

/** The process that runs the pull the CLI process `pid` started: itself, or the one child it relaunched as. */
function pullingProcess(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
  return children.length === 1 && sessionOf(children[0]!) === children[0] ? children[0] : pid;
}

/** Indexes in the registry's log of the requests for `image`'s layer blobs. */
function blobRequests(reg: LoopbackRegistry, image: BuiltImage): number[] {
  const digests = new Set<string>(image.layers.map((l) => l.digest));
  const out: number[] = [];
  reg.stats.requests.forEach((r, i) => {
    const m = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(r.path);
    if (m && digests.has(m[1]!)) out.push(i);
  });
  return out;
}

/** Holds every layer blob of `image` back until the returned function is called. */
function holdLayers(reg: LoopbackRegistry, image: BuiltImage): () => void {
  let release!: () => void;
  reg.faults.hold = { path: new RegExp(image.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
  return release;
}

/** Whether every layer index of `count` has an event in state `state`. */
function everyLayer(events: Array<Record<string, unknown>>, count: number, state: string): boolean {
  return new Set(events.filter((e) => e.type === 'layer' && e.state === state).map((e) => e.index)).size === count;
}

describe('fastpull pull --background, in this process', () => {
  it('runs every thread at nice 19 and in the idle I/O class', async () => {
    const image = await sampleImage(601, { layers: 2 });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('p/bg', '1', image);
      const release = holdLayers(reg, image);
      const run = cliEvents(['pull', '--root', join(work.dir, 'local'), '--json', '--background', `${reg.host}/p/bg:1`], launcher);
      // Its layers are downloading: the unpack workers and the pool's threads have started.
      await run.until((e) => e.type === 'layer' && e.state === 'fetching');
      const pid = pullingProcess(run.child.pid!);
      if (AUTOGROUPS) {
        // Sessions split CPU time here: the pull runs as the leader of a session of its own, whose
        // group is lowered too, while the session it was started in keeps its weight.
        expect(pid).not.toBe(run.child.pid);
        expect(sessionOf(pid)).toBe(pid);
        expect(readFileSync(`/proc/${pid}/autogroup`, 'utf8')).toMatch(/ nice 19\n?$/);
        expect(readFileSync('/proc/self/autogroup', 'utf8')).toMatch(/ nice 0\n?$/);
      } else {
        expect(pid).toBe(run.child.pid);
      }
      const threads = readdirSync(`/proc/${pid}/task`);
      expect(threads.length).toBeGreaterThan(3);
      for (const tid of threads) {
        // Field 19 of stat is the nice value; the name (field 2) may hold spaces, so count after it.
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
        expect(nice, `thread ${tid}`).toBe(19);
        const io = spawnSync('ionice', ['-p', tid], { encoding: 'utf8' });
        expect(io.stdout.trim(), `thread ${tid}: ${io.stderr}`).toBe('idle');
      }
      // Lowered this far, the pull gets next to no CPU on a machine whose other work keeps every core
      // busy, which is the point; to finish it there too, the test (root) raises it again.
      if (AUTOGROUPS) writeFileSync(`/proc/${pid}/autogroup`, '0');
      for (const tid of readdirSync(`/proc/${pid}/task`)) raise(Number(tid));
      release();
      const r = await run.done;
      expect(r.status, r.stderr).toBe(0);
      expect(r.events.at(-1)).toMatchObject({ type: 'done' });
    } finally {
      await reg.close();
    }
  });

  it('passes Ctrl-C on to the pull, in its own session where sessions split CPU time, which ends with it', async () => {
    const image = await sampleImage(602, { layers: 2 });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('p/int', '1', image);
      holdLayers(reg, image);
      const run = cliEvents(['pull', '--root', join(work.dir, 'int'), '--json', '--background', `${reg.host}/p/int:1`], launcher);
      await run.until((e) => e.type === 'layer' && e.state === 'fetching');
      const inner = pullingProcess(run.child.pid!);
      // Where sessions split nothing, the CLI pulls in the process it was started as (the control case).
      if (AUTOGROUPS) expect(inner).not.toBe(run.child.pid);
      else expect(inner).toBe(run.child.pid);
      run.child.kill('SIGINT');
      const r = await run.done;
      expect(r.status, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(/abort|interrupt/i);
      // The pull in the other session has ended too, not only the process that started it.
      expect(existsSync(`/proc/${inner}`) && !readFileSync(`/proc/${inner}/stat`, 'utf8').includes(') Z ')).toBe(false);
    } finally {
      await reg.close();
    }
  });

  it('refuses a priority it does not know, and --background with another priority', () => {
    const bad = runCli(['pull', '--root', join(work.dir, 'x'), '--priority', 'urgent', '127.0.0.1:1/a:1']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--priority "urgent": want one of high, normal, low');
    const both = runCli(['pull', '--root', join(work.dir, 'x'), '--background', '--priority', 'high', '127.0.0.1:1/a:1']);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('--background is --priority low');
  });
});

describe('pull priorities through fastpulld', () => {
  let daemon: RunningDaemon | undefined;
  let reg: LoopbackRegistry;
  const socket = join(work.dir, 'fastpulld.sock');

  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    // A slot for every layer: an unpack pass holds its slot while its download is held back.
    daemon = await serveDaemon(['--socket', socket, '--root', join(work.dir, 'daemon-root'), '--unpack-concurrency', '6', '--metrics-address', '127.0.0.1:0']);
  });
  afterAll(async () => {
    await stopDaemon(daemon);
    await reg.close();
  });

  /** fastpull_pulls_running by priority, from the daemon's metrics. */
  async function runningByPriority(): Promise<Record<string, number>> {
    const url = String(daemon!.logs.find((l) => l.msg === 'fastpulld serving')!.metrics);
    const text = await (await fetch(url)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^fastpull_pulls_running\{priority="(\w+)"\} (\d+)$/gm)) out[m[1]!] = Number(m[2]);
    return out;
  }

  it('a background pull starts no layer while a normal pull runs, and completes after it', async () => {
    const a = await sampleImage(611, { layers: 2 });
    const b = await sampleImage(612, { layers: 3 });
    reg.addImage('d/a', '1', a);
    reg.addImage('d/b', '1', b);
    const release = holdLayers(reg, a);
    const client = new FastpullClient(socket);
    try {
      const fetchingA = new Set<number>();
      let aFetching!: () => void;
      const aStarted = new Promise<void>((r) => (aFetching = r));
      const pullA = client.pull(`${reg.host}/d/a:1`, {
        onProgress: (e) => {
          if (e.type === 'layer' && e.state === 'fetching') fetchingA.add(e.index);
          if (fetchingA.size === a.layers.length) aFetching();
        },
      });
      await aStarted;
      const run = cliEvents(['pull', '--address', socket, '--json', '--background', `${reg.host}/d/b:1`]);
      let seen: Array<Record<string, unknown>> = [];
      await run.until((e) => {
        seen = [...seen, e];
        return everyLayer(seen, b.layers.length, 'waiting');
      });
      expect(blobRequests(reg, b)).toEqual([]);
      expect(await runningByPriority()).toEqual({ high: 0, normal: 1, low: 1 });
      release();
      await pullA;
      const r = await run.done;
      expect(r.status, r.stderr).toBe(0);
      expect(Math.min(...blobRequests(reg, b))).toBeGreaterThan(Math.max(...blobRequests(reg, a)));
    } finally {
      release();
      await client.close();
    }
  });

  /** The value of one series in the daemon's metrics (0 when absent). */
  async function metric(series: string): Promise<number> {
    const url = String(daemon!.logs.find((l) => l.msg === 'fastpulld serving')!.metrics);
    const text = await (await fetch(url)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  }

  it('metrics by priority: a low pull that waited behind a high one shows its queue wait, bytes and time under low', async () => {
    const a = await sampleImage(631, { layers: 2 });
    const b = await sampleImage(632, { layers: 2 });
    reg.addImage('m/a', '1', a);
    reg.addImage('m/b', '1', b);
    const names = ['queue_wait_seconds', 'duration_by_priority_seconds'];
    const before: Record<string, number> = {};
    for (const p of ['high', 'low']) {
      for (const n of names) {
        before[`${n}_sum ${p}`] = await metric(`fastpull_pull_${n}_sum{priority="${p}"}`);
        before[`${n}_count ${p}`] = await metric(`fastpull_pull_${n}_count{priority="${p}"}`);
      }
      before[`bytes ${p}`] = await metric(`fastpull_pull_fetched_bytes_by_priority_total{priority="${p}"}`);
    }
    const release = holdLayers(reg, a);
    const client = new FastpullClient(socket);
    try {
      let aFetching!: () => void;
      const aStarted = new Promise<void>((r) => (aFetching = r));
      const pullA = client.pull(`${reg.host}/m/a:1`, { priority: 'high', onProgress: (e) => e.type === 'layer' && e.state === 'fetching' && aFetching() });
      await aStarted;
      const waiting = new Set<number>();
      let bWaits!: () => void;
      const bWaiting = new Promise<void>((r) => (bWaits = r));
      const pullB = client.pull(`${reg.host}/m/b:1`, {
        priority: 'low',
        onProgress: (e) => {
          if (e.type === 'layer' && e.state === 'waiting') waiting.add(e.index);
          if (waiting.size === b.layers.length) bWaits();
        },
      });
      // Every layer of the low pull waits on the gate: the high pull runs.
      await bWaiting;
      release();
      await Promise.all([pullA, pullB]);
      const delta = async (n: string, p: string, part: 'sum' | 'count') =>
        (await metric(`fastpull_pull_${n}_${part}{priority="${p}"}`)) - before[`${n}_${part} ${p}`]!;
      expect(await delta('queue_wait_seconds', 'low', 'count')).toBe(1);
      expect(await delta('queue_wait_seconds', 'low', 'sum')).toBeGreaterThan(0);
      expect(await delta('queue_wait_seconds', 'high', 'count')).toBe(1);
      expect(await delta('duration_by_priority_seconds', 'low', 'count')).toBe(1);
      expect(await delta('duration_by_priority_seconds', 'high', 'count')).toBe(1);
      const blobBytes = (img: typeof a) => img.layers.reduce((n, l) => n + l.blob.length, 0);
      expect((await metric('fastpull_pull_fetched_bytes_by_priority_total{priority="low"}')) - before['bytes low']!).toBe(blobBytes(b));
      expect((await metric('fastpull_pull_fetched_bytes_by_priority_total{priority="high"}')) - before['bytes high']!).toBe(blobBytes(a));
      // The series without a priority are as they were.
      expect(await metric('fastpull_pull_fetched_bytes_total{result="ok"}')).toBeGreaterThan(0);
    } finally {
      release();
      await client.close();
    }
  });

  it('a caller that joins a waiting background pull at normal priority raises it', async () => {
    const a = await sampleImage(621, { layers: 2 });
    const b = await sampleImage(622, { layers: 2 });
    reg.addImage('r/a', '1', a);
    reg.addImage('r/b', '1', b);
    const release = holdLayers(reg, a);
    const client = new FastpullClient(socket);
    try {
      let aResolved!: () => void;
      const aRuns = new Promise<void>((r) => (aResolved = r));
      const pullA = client.pull(`${reg.host}/r/a:1`, { onProgress: (e) => e.type === 'resolved' && aResolved() });
      await aRuns;
      const waiting = new Set<number>();
      let allWaiting!: () => void;
      const bWaits = new Promise<void>((r) => (allWaiting = r));
      const low = client.pull(`${reg.host}/r/b:1`, {
        priority: 'low',
        onProgress: (e) => {
          if (e.type === 'layer' && e.state === 'waiting') waiting.add(e.index);
          if (waiting.size === b.layers.length) allWaiting();
        },
      });
      await bWaits;
      expect(blobRequests(reg, b)).toEqual([]);
      // The same image at normal priority: one pull, now at normal, done while a is still held back.
      const normal = await client.pull(`${reg.host}/r/b:1`, {});
      await low;
      expect(normal.image.manifest.digest).toBe((await low).image.manifest.digest);
      expect(blobRequests(reg, a)).toEqual([]);
      release();
      await pullA;
    } finally {
      release();
      await client.close();
    }
  });
});
