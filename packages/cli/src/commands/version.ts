// `fastpull version`: what is running: fastpull, Node.js, the gzip decoder pulls would use, and
// how a pull sizes itself on this machine.
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { availableCores, inflaterFromEnv, isFastpullError, processCpuQuota, VERSION } from '@fastpull/core';
import { poolSizeFor, resolveGunzip, WRITER_THREADS, writerThreadsFor } from '@fastpull/core/unpack';
import { tuningFromEnv, type Tuning } from '@fastpull/core/tuning';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, withExample } from '../options.js';

export interface VersionInfo {
  readonly fastpull: string;
  readonly node: string;
  /** The gzip decoder a pull would use: isal, zlib or parallel (in process), igzip or pigz (with its path). */
  readonly inflater: { readonly choice: string; readonly kind: string; readonly path?: string; readonly error?: string };
  /** Threads of libuv's pool, which inflates (node:zlib, ISA-L) and hashes layers: UV_THREADPOOL_SIZE, else libuv's 4. */
  readonly threadPool: number;
  /** Cores this process may keep busy (its affinity mask, fewer under a cgroup CPU quota), which size what follows. */
  readonly cores: number;
  /** Its cgroup's CPU quota in cores (cpu.max, or cpu.cfs_quota_us over cpu.cfs_period_us), where one is set. */
  readonly cpuQuota?: number;
  /** Layers a pull unpacks at once unless told (`--unpack-concurrency`). */
  readonly unpackSlots: number;
  /** Threads that make small files, shared by every layer being unpacked. */
  readonly writerThreads: number;
  /**
   * The processor's instruction-set extensions that gzip decoding and SHA-256 use where present
   * (from /proc/cpuinfo; absent where it cannot be read): a virtual machine that hides them decodes
   * slower.
   */
  readonly cpuFlags?: readonly string[];
}

/** The flags of {@link VersionInfo.cpuFlags}, in the order printed. */
export const CPU_FLAGS = ['sse4_2', 'avx', 'avx2', 'bmi2', 'sha_ni', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vbmi2', 'gfni', 'vpclmulqdq'] as const;

/** Which of {@link CPU_FLAGS} the first `flags` line of a /proc/cpuinfo text names; undefined without one. */
export function cpuFlagsOf(cpuinfo: string): string[] | undefined {
  const line = /^flags\s*:(.*)$/m.exec(cpuinfo)?.[1];
  if (line === undefined) return undefined;
  const have = new Set(line.trim().split(/\s+/));
  return CPU_FLAGS.filter((f) => have.has(f));
}

function readCpuFlags(): string[] | undefined {
  try {
    return cpuFlagsOf(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return undefined;
  }
}

export function versionInfo(env: NodeJS.ProcessEnv): VersionInfo {
  let choice = 'auto';
  let inflater: VersionInfo['inflater'];
  try {
    choice = inflaterFromEnv(env) ?? 'auto';
    const found = resolveGunzip(choice as Parameters<typeof resolveGunzip>[0]);
    inflater = 'path' in found ? { choice, kind: found.kind, path: found.path } : { choice, kind: found.kind };
  } catch (e) {
    // A FASTPULL_INFLATER that names a missing or unknown decoder: say so, a pull would fail on it.
    inflater = { choice: env.FASTPULL_INFLATER ?? choice, kind: 'none', error: isFastpullError(e) ? e.message : String(e) };
  }
  const pool = Number(env.UV_THREADPOOL_SIZE);
  // A malformed knob this command does not use (FASTPULL_SYNC_METHOD) is the pull's to refuse.
  const knobs = ((): Tuning => {
    try {
      return tuningFromEnv(env);
    } catch {
      return {};
    }
  })();
  const cpuFlags = readCpuFlags();
  const quota = processCpuQuota();
  return {
    fastpull: VERSION,
    node: process.version,
    inflater,
    threadPool: Number.isInteger(pool) && pool > 0 ? Math.min(pool, 1024) : 4,
    cores: availableCores(),
    ...(quota ? { cpuQuota: quota.cores } : {}),
    unpackSlots: poolSizeFor(),
    // What a pull would start: the measuring knob FASTPULL_WRITER_THREADS, as the CLI's pull reads it.
    writerThreads: knobs.writerThreads !== undefined ? writerThreadsFor(availableCores(), knobs.writerThreads) : WRITER_THREADS,
    ...(cpuFlags ? { cpuFlags } : {}),
  };
}

export function versionCommand(io: CliIO): Command {
  const command = new Command('version').description('print the fastpull and Node.js versions and the gzip decoder in use').addOption(jsonOption());
  return withExample(command, ['fastpull version', 'fastpull version --json']).action((flags: { json?: boolean }) => {
    const v = versionInfo(io.env);
    if (flags.json) {
      writeJSON(io.stdout, v);
      return;
    }
    writeLine(io.stdout, `fastpull ${v.fastpull}`);
    writeLine(io.stdout, `node     ${v.node}`);
    const i = v.inflater;
    writeLine(io.stdout, `inflater ${i.error ? `${i.choice}: ${i.error}` : i.path ? `${i.kind} (${i.path})` : `${i.kind} (built in)`}`);
    writeLine(io.stdout, `threads  ${v.threadPool} in libuv's pool`);
    writeLine(
      io.stdout,
      `cores    ${v.cores}: ${v.unpackSlots} ${v.unpackSlots === 1 ? 'layer' : 'layers'} unpacked at once, ${v.writerThreads} small-file writer threads${v.cpuQuota !== undefined ? ` (cgroup CPU quota ${v.cpuQuota} cores)` : ''}`,
    );
    if (v.cpuFlags) writeLine(io.stdout, `cpu      ${v.cpuFlags.length > 0 ? v.cpuFlags.join(' ') : 'none of ' + CPU_FLAGS.join(' ')}`);
  });
}
