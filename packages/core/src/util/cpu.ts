// The cores a process may use, and a CPU budget that holds it to fewer. Three things bound it: the
// CPUs its threads may run on (its affinity, which a container's cpuset narrows), its cgroup's CPU
// quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us, on its cgroup or any above
// it), and a budget it is given. The quota is the kernel's to enforce: fastpull only sizes its
// threads by it (a process that runs more busy threads than its quota is throttled in bursts). A
// budget is fastpull's to enforce: every thread of the process is confined to that many of its
// CPUs, so no count of worker, decoder, hashing or writer threads can take more, and threads started
// later inherit the confinement from the thread that starts them.
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { FastpullError } from '../errors.js';
import { nativeFs } from '../native/addon.js';

/** A cgroup's CPU quota, in cores, and the file that set it. */
export interface CpuQuota {
  /** quota / period: 1.5 is one and a half cores' time per period. */
  readonly cores: number;
  /** The file it was read from. */
  readonly file: string;
}

/** Where {@link cgroupCpuQuota} looks: the roots of /proc and of the filesystem (tests make their own). */
export interface CgroupPaths {
  /** `/proc/self` of the process: its `cgroup` and `mountinfo` are read. */
  readonly procSelf?: string;
  /** Prefix of every mount point mountinfo names (default none). */
  readonly fsRoot?: string;
}

interface CgroupMount {
  readonly version: 1 | 2;
  readonly root: string;
  readonly mountPoint: string;
}

/** The cgroup mounts of mountinfo that can hold a CPU quota: every cgroup2, and v1 ones with the cpu controller. */
function cgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const f = line.slice(0, dash).split(' ');
    const [fstype, , superOptions = ''] = line.slice(dash + 3).split(' ');
    const root = unescapeMount(f[3] ?? '');
    const mountPoint = unescapeMount(f[4] ?? '');
    if (fstype === 'cgroup2') mounts.push({ version: 2, root, mountPoint });
    else if (fstype === 'cgroup' && superOptions.split(',').includes('cpu')) mounts.push({ version: 1, root, mountPoint });
  }
  return mounts;
}

/** mountinfo writes space, tab, newline and backslash as octal escapes. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** The directories of a cgroup from its own up to its mount's, for the cgroup `path` of /proc/self/cgroup. */
function cgroupDirs(mount: CgroupMount, path: string, fsRoot: string): string[] {
  const top = join(fsRoot, mount.mountPoint);
  // Inside a cgroup namespace the path is relative to the namespace's root, which is what is mounted.
  let rel = path;
  if (mount.root !== '/' && (path === mount.root || path.startsWith(mount.root + '/'))) rel = path.slice(mount.root.length);
  else if (mount.root !== '/') rel = '/';
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.' && p !== '..');
  const dirs: string[] = [];
  for (let i = parts.length; i >= 0; i--) dirs.push(join(top, ...parts.slice(0, i)));
  return dirs;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** The quota one cgroup directory sets, in cores; undefined for none (max, -1) or unreadable. */
function quotaOf(version: 1 | 2, dir: string): CpuQuota | undefined {
  if (version === 2) {
    const file = join(dir, 'cpu.max');
    const m = /^(\d+)\s+(\d+)\s*$/.exec(readText(file) ?? '');
    return m && Number(m[2]) > 0 ? { cores: Number(m[1]) / Number(m[2]), file } : undefined;
  }
  const file = join(dir, 'cpu.cfs_quota_us');
  const quota = Number((readText(file) ?? '').trim());
  const period = Number((readText(join(dir, 'cpu.cfs_period_us')) ?? '').trim());
  return Number.isInteger(quota) && quota > 0 && period > 0 ? { cores: quota / period, file } : undefined;
}

/**
 * The tightest CPU quota of the process's cgroups (its own and every one above it, v2 and v1
 * controllers alike), or undefined where none is set or none can be read.
 * @example cgroupCpuQuota() // { cores: 1.5, file: '/sys/fs/cgroup/kubepods/.../cpu.max' } in a pod limited to 1500m
 */
export function cgroupCpuQuota(paths: CgroupPaths = {}): CpuQuota | undefined {
  const self = paths.procSelf ?? '/proc/self';
  const fsRoot = paths.fsRoot ?? '/';
  const cgroups = readText(join(self, 'cgroup'));
  const mountinfo = readText(join(self, 'mountinfo'));
  if (cgroups === undefined || mountinfo === undefined) return undefined;
  const mounts = cgroupMounts(mountinfo);
  let best: CpuQuota | undefined;
  for (const line of cgroups.split('\n')) {
    // hierarchy-ID:controllers:path; v2's is 0::path.
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    const v2 = m[1] === '0' && m[2] === '';
    if (!v2 && !m[2]!.split(',').includes('cpu')) continue;
    for (const mount of mounts.filter((x) => x.version === (v2 ? 2 : 1))) {
      for (const dir of cgroupDirs(mount, m[3]!, fsRoot)) {
        const q = quotaOf(mount.version, dir);
        if (q && (!best || q.cores < best.cores)) best = q;
      }
    }
  }
  return best;
}

let quota: { value: CpuQuota | undefined } | undefined;

/**
 * {@link cgroupCpuQuota} of this process, read once per thread (a cgroup's quota rarely changes under a running process).
 * @example processCpuQuota()?.cores // 2 in a pod whose CPU limit is 2
 */
export function processCpuQuota(): CpuQuota | undefined {
  quota ??= { value: cgroupCpuQuota() };
  return quota.value;
}

/**
 * Cores this process may keep busy: the CPUs its threads may run on (its affinity: a cpuset, a
 * `taskset`, or a CPU budget), fewer where its cgroup's quota allows less time (rounded up: a quota
 * of 1.5 cores keeps two threads busy part of the time). Every default thread count is sized by it.
 * @example availableCores() // 1 in a container limited to one CPU on a 2-core machine
 */
export function availableCores(): number {
  const cpus = availableParallelism();
  const q = processCpuQuota();
  return q ? Math.max(1, Math.min(cpus, Math.ceil(q.cores))) : cpus;
}

/**
 * A CPU budget: a whole number of cores, at least 1. Throws INVALID_ARGUMENT naming `what`.
 * @example parseCpuBudget('1', '--cpu-budget') // 1
 */
export function parseCpuBudget(value: unknown, what: string): number {
  const n = typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) {
    let shown: string;
    try {
      shown = JSON.stringify(value) ?? typeof value;
    } catch {
      shown = typeof value;
    }
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `${what} ${shown}: want a whole number of cores, at least 1 (for a share of a core, give fastpull a cgroup CPU quota)`,
    );
  }
  return n;
}

/**
 * A CPU list as the kernel writes one (`Cpus_allowed_list`, cpuset.cpus): "0-3,8,10-11".
 * @example parseCpuList('0-2,5') // [0, 1, 2, 5]
 */
export function parseCpuList(text: string): number[] {
  const cpus: number[] = [];
  for (const part of text.trim().split(',')) {
    if (part === '') continue;
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new FastpullError('INTERNAL', `CPU list ${JSON.stringify(text)}: cannot read ${JSON.stringify(part)}`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    for (let c = lo; c <= hi; c++) cpus.push(c);
  }
  return cpus;
}

/**
 * The CPUs a thread of this process may run on now (the main thread's, when `tid` is left out).
 * @example allowedCpus() // [0, 1] on a 2-core machine; [1] after applyCpuBudget(1)
 */
export function allowedCpus(tid?: number): number[] {
  const status = readFileSync(tid === undefined ? '/proc/self/status' : `/proc/self/task/${tid}/status`, 'utf8');
  const line = /^Cpus_allowed_list:\s*(.*)$/m.exec(status)?.[1];
  if (line === undefined) throw new FastpullError('INTERNAL', 'reading the CPUs this process may use: /proc/self/status has no Cpus_allowed_list');
  return parseCpuList(line);
}

/** What {@link applyCpuBudget} did. */
export interface CpuBudgetState {
  /** The budget asked for; undefined: none (every CPU the process was started with). */
  readonly budget: number | undefined;
  /** The CPUs every thread of the process is confined to now. */
  readonly cpus: readonly number[];
  /** Cores the process may keep busy now ({@link availableCores}). */
  readonly cores: number;
}

/** The CPUs the process was started with, read before the first budget confined it. */
let startCpus: number[] | undefined;
let applied: readonly number[] | undefined;

/**
 * Holds this whole process to `budget` cores: every thread, now and started later, may run only on
 * the last `budget` CPUs of those the process was started with (the first CPUs are where the
 * kernel's housekeeping and most pinned programs go). Undefined, or a budget of at least that many
 * CPUs, gives them all back. A process has one budget: the last call wins. INVALID_ARGUMENT for a
 * budget that is not a whole number of at least 1; FAILED_PRECONDITION where the native addon is
 * missing (nothing else can confine threads that are not Node's).
 * @example applyCpuBudget(1) // { budget: 1, cpus: [1], cores: 1 } on a 2-core machine
 */
export function applyCpuBudget(budget: number | undefined): CpuBudgetState {
  if (budget !== undefined) parseCpuBudget(budget, 'CPU budget');
  startCpus ??= allowedCpus();
  const want = budget === undefined || budget >= startCpus.length ? startCpus : startCpus.slice(-budget);
  if (applied === undefined ? want !== startCpus : want.join(',') !== applied.join(',')) {
    const setAffinity = (nativeFs() as { setAffinity?: (tid: number, cpus: readonly number[]) => void }).setAffinity;
    if (typeof setAffinity !== 'function') {
      throw new FastpullError(
        'FAILED_PRECONDITION',
        `a CPU budget of ${budget} needs fastpull's native addon, which is not built here (see README.md, Installing)`,
      );
    }
    // Listed again until a listing shows no thread not yet confined: a thread that started one
    // while the list was walked may have given it the set it had before.
    const done = new Set<string>();
    for (let fresh = readdirSync('/proc/self/task'); fresh.length > 0; fresh = readdirSync('/proc/self/task').filter((t) => !done.has(t))) {
      for (const tid of fresh) {
        done.add(tid);
        try {
          setAffinity(Number(tid), want);
        } catch (e) {
          // A thread that ended since the listing needs no confinement.
          if ((e as NodeJS.ErrnoException).code !== 'ESRCH')
            throw new FastpullError('INTERNAL', `confining thread ${tid} to CPUs ${want.join(',')}: ${(e as Error).message}`, { cause: e });
        }
      }
    }
    applied = want;
  }
  return { budget, cpus: want, cores: availableCores() };
}
