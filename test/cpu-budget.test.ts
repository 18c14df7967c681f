// A CPU budget, counted from /proc: `fastpull pull --cpu-budget 1` against the real distribution
// registry, every thread of the CLI sampled from /proc/PID/task while it pulls (its allowed CPUs and its
// CPU time), and the process's CPU time over the pull against the wall time; and a cgroup CPU quota,
// from a cgroup this test makes, read by a CLI started inside it.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowedCpus, parseCpuList } from '@fastpull/core';
import { buildImage, lacks, lacksRegistry, notHere, Prng, pushImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { cliPath, repoRoot, serveDaemon, stopDaemon, tempDir } from './helpers.js';

const launcher = join(repoRoot, 'packages', 'cli', 'dist', 'launch.cjs');
const work = tempDir('cpu-budget');
afterAll(() => work.cleanup());
/** Clock ticks a second in /proc/PID/stat (USER_HZ: 100 on every Linux architecture Node runs on). */
const HZ = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** utime + stime of a /proc stat line, in seconds (the fields after the command's closing parenthesis). */
function cpuSeconds(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / HZ;
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

interface Sample {
  readonly at: number;
  /** The whole process's CPU seconds (threads that ended included). */
  readonly cpu: number;
  /** Each live thread's allowed CPUs and CPU seconds. */
  readonly threads: ReadonlyMap<string, { cpus: string; cpu: number }>;
}

/** One look at every thread of `pid`; undefined once it is gone. */
function sample(pid: number): Sample | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  const threads = new Map<string, { cpus: string; cpu: number }>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const tid of tids) {
    const status = read(`/proc/${pid}/task/${tid}/status`);
    const tstat = read(`/proc/${pid}/task/${tid}/stat`);
    const cpus = status && /^Cpus_allowed_list:\s*(.*)$/m.exec(status)?.[1];
    if (cpus && tstat) threads.set(tid, { cpus, cpu: cpuSeconds(tstat) });
  }
  return { at: performance.now() / 1000, cpu: cpuSeconds(stat), threads };
}

/** Runs the CLI, sampling its threads until it exits (a look per event-loop turn of this process, as often as 5 ms apart). */
function pullSampled(args: string[]): Promise<{ status: number | null; stderr: string; stdout: string; samples: Sample[] }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [launcher, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const samples: Sample[] = [];
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const look = () => {
      const s = sample(child.pid!);
      if (s) samples.push(s);
    };
    const timer = setInterval(look, 5);
    child.on('exit', () => clearInterval(timer));
    child.on('close', (status) => resolve({ status, stdout, stderr, samples }));
  });
}

describe.skipIf(lacksRegistry())('--cpu-budget', () => {
  let registry: DistributionRegistry;
  let ref = '';
  const cpus = allowedCpus();

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    // Three layers of text that compresses about 3:1, enough inflating, hashing and writing to keep
    // more than one core busy for a while where it may.
    const rng = new Prng(47);
    const layer = (i: number) => Array.from({ length: 8 }, (_, j) => ({ type: 'file' as const, path: `l${i}/f${j}.txt`, content: rng.text(2 * 1024 * 1024) }));
    const image = await buildImage({ layers: [layer(0), layer(1), layer(2)] });
    await pushImage(registry.url, 'budget/app', 'v1', image);
    ref = `${registry.host}/budget/app:v1`;
  });
  afterAll(async () => {
    await registry?.stop();
  });

  it('confines every thread of the pull to one of its CPUs, and its CPU time stays within the wall time', async () => {
    const r = await pullSampled(['pull', '--root', join(work.dir, 'one'), '--cpu-budget', '1', '--json', ref]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('"type":"done"');
    // From the first look at which every thread was confined on (the budget confines them one by
    // one): the budget's CPU is the last allowed, and no thread ever leaves it or starts elsewhere.
    const want = String(cpus[cpus.length - 1]);
    const first = r.samples.findIndex((s) => [...s.threads.values()].every((t) => t.cpus === want));
    expect(first, `the threads were never all confined to CPU ${want}`).toBeGreaterThanOrEqual(0);
    const confined = r.samples.slice(first);
    const seen = new Set<string>();
    for (const s of confined) {
      for (const [tid, t] of s.threads) {
        seen.add(tid);
        expect(t.cpus, `thread ${tid}`).toBe(want);
      }
    }
    // The pull's threads: main, unpack worker, decoder, libuv's pool, V8's: many more than one.
    expect(seen.size).toBeGreaterThan(4);
    const last = confined[confined.length - 1]!;
    const wall = last.at - confined[0]!.at;
    const cpu = last.cpu - confined[0]!.cpu;
    // Each thread's count only grows, and they add up to no more than the process's.
    const perThread = [...seen].reduce(
      (sum, tid) => sum + Math.max(0, ...confined.map((s) => s.threads.get(tid)?.cpu ?? 0)) - (confined[0]!.threads.get(tid)?.cpu ?? 0),
      0,
    );
    console.log(
      `--cpu-budget 1: ${cpu.toFixed(2)} s of CPU (${perThread.toFixed(2)} s in threads still alive at a look) over ${wall.toFixed(2)} s, ${seen.size} threads on CPU ${want}`,
    );
    expect(wall).toBeGreaterThan(0.2);
    // One CPU gives at most one second a second; a tick of slack either end for the kernel's accounting.
    expect(cpu).toBeLessThanOrEqual(wall + 2 / HZ);
    expect(perThread).toBeLessThanOrEqual(cpu + 2 / HZ);
  });

  it('without a budget, leaves the threads every CPU the process was started with', async () => {
    const r = await pullSampled(['pull', '--root', join(work.dir, 'all'), '--json', ref]);
    expect(r.status, r.stderr).toBe(0);
    const lists = new Set(r.samples.flatMap((s) => [...s.threads.values()].map((t) => parseCpuList(t.cpus).join(','))));
    expect(r.samples.length).toBeGreaterThan(0);
    expect([...lists]).toEqual([cpus.join(',')]);
  });

  it('refuses a budget that is not a whole number of cores', () => {
    for (const [value, message] of [
      ['0', '--cpu-budget "0": want a whole number of cores, at least 1'],
      ['1.5', '--cpu-budget "1.5": want a whole number of cores, at least 1'],
    ]) {
      // In-process, and before anything is sent to a daemon (the socket need not exist).
      for (const where of [
        ['--root', join(work.dir, 'bad')],
        ['--address', join(work.dir, 'none.sock')],
      ]) {
        const r = spawnSync(process.execPath, [cliPath, 'pull', ...where, '--cpu-budget', value!, ref], { encoding: 'utf8' });
        expect(r.status).toBe(2);
        expect(r.stderr).toContain(message);
      }
    }
  });
});

/** The allowed CPUs of every thread of `pid` now, as the kernel lists them. */
function threadCpus(pid: number): Set<string> {
  const lists = new Set<string>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const list = /^Cpus_allowed_list:\s*(.*)$/m.exec(read(`/proc/${pid}/task/${tid}/status`) ?? '')?.[1];
    if (list) lists.add(parseCpuList(list).join(','));
  }
  return lists;
}

describe('fastpulld cpu_budget', () => {
  it('confines every thread from the start; SIGHUP gives every CPU back, or confines them again, as the file says', async () => {
    const cpus = allowedCpus();
    const config = join(work.dir, 'fastpulld.toml');
    const body = `root = "${join(work.dir, 'daemon-root')}"\nsnapshotter_socket = ""\n`;
    writeFileSync(config, `${body}cpu_budget = 1\n`);
    const d = await serveDaemon(['--config', config, '--socket', join(work.dir, 'budget.sock')]);
    const last = String(cpus[cpus.length - 1]);
    try {
      expect(d.logs.find((l) => l.msg === 'fastpulld serving')).toMatchObject({ cpuBudget: 1 });
      expect([...threadCpus(d.proc.pid!)]).toEqual([last]);
      writeFileSync(config, body);
      d.proc.kill('SIGHUP');
      expect(await d.waitLog((l) => l.msg === 'configuration reloaded')).toMatchObject({ cpuBudget: null, cpus: cpus.join(',') });
      expect([...threadCpus(d.proc.pid!)]).toEqual([cpus.join(',')]);
      writeFileSync(config, `${body}cpu_budget = 1\n`);
      d.proc.kill('SIGHUP');
      await d.waitLog((l) => l.msg === 'configuration reloaded' && l.cpuBudget === 1);
      expect([...threadCpus(d.proc.pid!)]).toEqual([last]);
      // A bad value keeps the running budget.
      writeFileSync(config, `${body}cpu_budget = 0.5\n`);
      d.proc.kill('SIGHUP');
      const failed = await d.waitLog((l) => l.msg === 'reload failed; keeping the running configuration');
      expect(failed.err).toContain('cpu_budget 0.5: want a whole number of cores, at least 1');
      expect([...threadCpus(d.proc.pid!)]).toEqual([last]);
    } finally {
      await stopDaemon(d);
    }
  });
});

/** The cgroup hierarchy with a CPU controller this test makes its cgroups in: v1's cpu controller, or v2's. */
function cpuCgroupRoot(): { dir: string; version: 1 | 2 } | undefined {
  if (existsSync('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')) return { dir: '/sys/fs/cgroup/cpu', version: 1 };
  const controllers = read('/sys/fs/cgroup/cgroup.controllers');
  return controllers?.split(/\s+/).includes('cpu') ? { dir: '/sys/fs/cgroup', version: 2 } : undefined;
}

const cgroupRoot = cpuCgroupRoot();
const noController = cgroupRoot ? undefined : 'no cgroup v1 cpu controller at /sys/fs/cgroup/cpu and no cpu controller in cgroup v2 at /sys/fs/cgroup';

describe.skipIf(lacks('root', process.getuid?.() === 0 ? undefined : 'not running as root: cannot make a cgroup') || notHere(noController))(
  'a cgroup CPU quota',
  () => {
    const root = cgroupRoot!;
    const made: string[] = [];
    afterAll(() => {
      for (const dir of made) if (existsSync(dir)) rmdirSync(dir);
    });

    /** `fastpull version --json` run inside a new cgroup whose quota is `quota` microseconds a 100 ms period. */
    function versionIn(quota: number): { cores: number; cpuQuota?: number; unpackSlots: number } {
      const dir = join(root.dir, `fastpull-quota-${process.pid}-${made.length}`);
      mkdirSync(dir);
      made.push(dir);
      if (root.version === 1) {
        writeFileSync(join(dir, 'cpu.cfs_period_us'), '100000');
        writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quota));
      } else {
        if (!read(join(root.dir, 'cgroup.subtree_control'))?.includes('cpu')) writeFileSync(join(root.dir, 'cgroup.subtree_control'), '+cpu');
        writeFileSync(join(dir, 'cpu.max'), `${quota} 100000`);
      }
      // The shell joins the cgroup, then becomes the CLI: every thread it starts is in the cgroup.
      const r = spawnSync('sh', ['-c', `echo $$ > ${dir}/cgroup.procs && exec "$0" "$@"`, process.execPath, launcher, 'version', '--json'], {
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { cores: number; cpuQuota?: number; unpackSlots: number };
    }

    it('sizes the CLI by the quota: one core, and a core and a half rounded up within the CPUs it has', () => {
      expect(versionIn(100_000)).toMatchObject({ cores: 1, cpuQuota: 1, unpackSlots: 1 });
      const cpus = allowedCpus().length;
      expect(versionIn(150_000)).toMatchObject({ cores: Math.min(2, cpus), cpuQuota: 1.5 });
      // A quota above the CPUs it may use leaves the CPU count.
      expect(versionIn(100_000 * (cpus + 1))).toMatchObject({ cores: cpus, cpuQuota: cpus + 1 });
    });
  },
);
