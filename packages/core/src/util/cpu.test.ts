// The cgroup CPU quota as read from a cgroup tree laid out as the kernel shows one (v2 and v1, a
// container's cgroup namespace, a parent's tighter quota), and the parsers of budgets and CPU lists.
// test/cpu-budget.test.ts reads a real cgroup the test makes and counts a budgeted pull from /proc.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { allowedCpus, applyCpuBudget, availableCores, cgroupCpuQuota, parseCpuBudget, parseCpuList } from './cpu.js';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** A /proc/self and a filesystem root holding `files` (paths relative to the root). */
function layout(cgroup: string, mountinfo: string, files: Record<string, string>): { procSelf: string; fsRoot: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fastpull-cpu-'));
  dirs.push(dir);
  const procSelf = join(dir, 'proc-self');
  mkdirSync(procSelf);
  writeFileSync(join(procSelf, 'cgroup'), cgroup);
  writeFileSync(join(procSelf, 'mountinfo'), mountinfo);
  const fsRoot = join(dir, 'root');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(fsRoot, path)), { recursive: true });
    writeFileSync(join(fsRoot, path), text);
  }
  return { procSelf, fsRoot };
}

const V2_MOUNT = '35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n';
const V1_MOUNTS =
  '31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n' +
  '33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n';

describe('cgroupCpuQuota', () => {
  it('reads cgroup v2 cpu.max of its own cgroup and the tightest above it', () => {
    const paths = layout('0::/kubepods/pod1/ctr\n', V2_MOUNT, {
      'sys/fs/cgroup/cpu.max': 'max 100000\n',
      'sys/fs/cgroup/kubepods/cpu.max': '400000 100000\n',
      'sys/fs/cgroup/kubepods/pod1/cpu.max': '150000 100000\n',
      'sys/fs/cgroup/kubepods/pod1/ctr/cpu.max': 'max 100000\n',
    });
    expect(cgroupCpuQuota(paths)).toEqual({ cores: 1.5, file: join(paths.fsRoot, 'sys/fs/cgroup/kubepods/pod1/cpu.max') });
  });

  it('in a cgroup namespace, reads the cgroup mounted as its root', () => {
    // A container sees its own cgroup as "/" and has it mounted at /sys/fs/cgroup.
    const paths = layout('0::/\n', V2_MOUNT, { 'sys/fs/cgroup/cpu.max': '50000 100000\n' });
    expect(cgroupCpuQuota(paths)?.cores).toBe(0.5);
  });

  it('reads cgroup v1 cpu.cfs_quota_us over cpu.cfs_period_us of the cpu controller, -1 being none', () => {
    const paths = layout('4:cpuset:/\n3:cpu,cpuacct:/job/task\n0::/\n', V1_MOUNTS, {
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1\n',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n',
      'sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us': '-1\n',
      'sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us': '100000\n',
      'sys/fs/cgroup/cpu,cpuacct/job/task/cpu.cfs_quota_us': '300000\n',
      'sys/fs/cgroup/cpu,cpuacct/job/task/cpu.cfs_period_us': '200000\n',
    });
    expect(cgroupCpuQuota(paths)?.cores).toBe(1.5);
  });

  it('is undefined with no quota anywhere, or nothing to read', () => {
    expect(cgroupCpuQuota(layout('0::/a\n', V2_MOUNT, { 'sys/fs/cgroup/a/cpu.max': 'max 100000\n' }))).toBeUndefined();
    expect(cgroupCpuQuota(layout('0::/a\n', '', {}))).toBeUndefined();
    expect(cgroupCpuQuota({ procSelf: '/nonexistent' })).toBeUndefined();
  });
});

describe('parsers', () => {
  it('parseCpuBudget takes whole cores, at least one', () => {
    expect(parseCpuBudget('2', '--cpu-budget')).toBe(2);
    expect(parseCpuBudget(1, 'cpu_budget')).toBe(1);
    for (const bad of ['0', '1.5', 0.5, -1, 'two', '', true]) {
      expect(() => parseCpuBudget(bad, 'cpu_budget')).toThrow(/^cpu_budget .*: want a whole number of cores, at least 1/);
    }
  });

  it("parseCpuList reads the kernel's ranges", () => {
    expect(parseCpuList('0-2,5,7-8\n')).toEqual([0, 1, 2, 5, 7, 8]);
    expect(parseCpuList('3')).toEqual([3]);
    expect(() => parseCpuList('0-x')).toThrow(/cannot read/);
  });
});

describe('applyCpuBudget', () => {
  it('confines this process to its last CPUs and gives them back', () => {
    const all = allowedCpus();
    try {
      const one = applyCpuBudget(1);
      expect(one.cpus).toEqual([all[all.length - 1]]);
      expect(allowedCpus()).toEqual(one.cpus);
      expect(availableCores()).toBe(1);
    } finally {
      expect(applyCpuBudget(undefined).cpus).toEqual(all);
    }
    expect(allowedCpus()).toEqual(all);
    expect(applyCpuBudget(all.length + 1).cpus).toEqual(all);
  });
});
