// The one place the CLI chooses where its commands run: fastpulld over its socket (given --address,
// FASTPULL_ADDRESS, or the daemon's default socket when it exists and no store was named) or a
// LocalService over the store in this process. Commands then only call the FastpullService.
import type { Command } from 'commander';
import {
  checkDirectory,
  defaultHostsDir,
  inflaterFromEnv,
  LocalService,
  signatureSettingsFromEnv,
  type FastpullService,
  type InflaterChoice,
  type SignatureSettings,
} from '@fastpull/core';
import { tuningFromEnv } from '@fastpull/core/tuning';
import { UsageError } from './errors.js';
import { asUsageError, writeLine, type CliIO } from './io.js';
import { daemonAddress } from './remote.js';

/** The flags every command that reaches the store has. */
export interface ServiceFlags {
  readonly root: string;
  readonly address?: string;
}

/** Settings of a pull in this process; with a daemon, its own configuration decides them. */
export interface LocalTuning {
  readonly hostsDir?: string;
  readonly concurrency?: number;
  readonly chunkSize?: number;
  readonly unpackConcurrency?: number;
  readonly inflater?: InflaterChoice;
  /**
   * Whole cores the process is held to (--cpu-budget). Not fastpulld's configuration: a pull sent to
   * it carries the budget as its own (ServicePullOptions.cpuBudget).
   */
  readonly cpuBudget?: number;
  /** false: commit snapshots without flushing them (unsafe; --no-sync). */
  readonly sync?: false;
  /** --signature-policy FILE (a containers policy.json). */
  readonly signaturePolicy?: string;
  /** --notation-config DIR. */
  readonly notationConfig?: string;
  /** --metadata-timeout, in milliseconds. */
  readonly metadataTimeoutMs?: number;
}

/** The flag each tuning setting comes from, for the error when it is given with a daemon. */
const TUNING_FLAGS: Readonly<Record<keyof LocalTuning, string>> = {
  hostsDir: '--hosts-dir',
  concurrency: '--concurrency',
  chunkSize: '--chunk-size',
  unpackConcurrency: '--unpack-concurrency',
  inflater: '--inflater',
  cpuBudget: '--cpu-budget',
  sync: '--no-sync',
  signaturePolicy: '--signature-policy (or FASTPULL_SIGNATURE_POLICY)',
  notationConfig: '--notation-config (or FASTPULL_NOTATION_CONFIG)',
  metadataTimeoutMs: '--metadata-timeout',
};

/**
 * The service a command works through. `command` lets the daemon's default socket be used when the
 * command was not pointed at a store of its own; leave it out to use a daemon only when one is named.
 */
export async function openService(io: CliIO, flags: ServiceFlags, command?: Command, tuning: LocalTuning = {}): Promise<FastpullService> {
  const tuned = (Object.keys(tuning) as Array<keyof LocalTuning>).filter((k) => tuning[k] !== undefined && k !== 'cpuBudget');
  // The default socket is used only when nothing asks for work of this process's own.
  const address = daemonAddress(io, flags, tuned.length > 0 ? undefined : command);
  if (address) {
    if (tuned.length > 0) throw new UsageError(`${TUNING_FLAGS[tuned[0]!]} is fastpulld's configuration; it does not go with --address`);
    const { FastpullClient } = await import('@fastpull/daemon/client');
    return new FastpullClient(address);
  }
  // A --hosts-dir given on the command line must be there: a typo would silently mean no mirrors.
  if (tuning.hostsDir !== undefined) await checkDirectory(tuning.hostsDir, '--hosts-dir', 'read', 'INVALID_ARGUMENT');
  const hostsDir = tuning.hostsDir ?? defaultHostsDir(io.env);
  const inflater = tuning.inflater ?? asUsageError(() => inflaterFromEnv(io.env));
  // The measuring knobs of the benchmarks (bench/README.md): read here, at the CLI's entry, once.
  const knobs = asUsageError(() => tuningFromEnv(io.env));
  return new LocalService({
    root: flags.root,
    ...(hostsDir ? { hostsDir } : {}),
    env: io.env,
    onWarning: (message) => writeLine(io.stderr, `fastpull: warning: ${message}`),
    ...(tuning.concurrency !== undefined ? { concurrency: tuning.concurrency } : {}),
    ...(tuning.chunkSize !== undefined ? { chunkSize: tuning.chunkSize } : {}),
    ...(tuning.metadataTimeoutMs !== undefined ? { metadataTimeoutMs: tuning.metadataTimeoutMs } : {}),
    ...(tuning.unpackConcurrency !== undefined ? { unpackConcurrency: tuning.unpackConcurrency } : {}),
    ...(inflater !== undefined ? { inflater } : {}),
    ...(tuning.cpuBudget !== undefined ? { cpuBudget: tuning.cpuBudget } : {}),
    // FASTPULL_NO_SYNC=1, as --no-sync (a daemon's own configuration decides for its pulls).
    ...(tuning.sync === false || io.env.FASTPULL_NO_SYNC === '1' ? { sync: false } : {}),
    // FASTPULL_THREADS=0 keeps unpacking on the main thread (for comparison and debugging).
    ...(io.env.FASTPULL_THREADS === '0' ? { threads: false } : {}),
    signatures: signatureSettings(io, tuning),
    tuning: knobs,
  });
}

/** The signature policies a command in this process applies: its flags, else FASTPULL_SIGNATURE_POLICY and FASTPULL_NOTATION_CONFIG. */
export function signatureSettings(io: CliIO, tuning: Pick<LocalTuning, 'signaturePolicy' | 'notationConfig'>): SignatureSettings {
  const env = signatureSettingsFromEnv(io.env);
  const policy = tuning.signaturePolicy ?? env.signaturePolicy;
  const notation = tuning.notationConfig ?? env.notationConfig;
  return { ...(policy !== undefined ? { signaturePolicy: policy } : {}), ...(notation !== undefined ? { notationConfig: notation } : {}) };
}

/** Runs `fn` with the command's service, then closes it. */
export async function withService<T>(
  io: CliIO,
  flags: ServiceFlags,
  command: Command | undefined,
  fn: (service: FastpullService) => Promise<T>,
  tuning?: LocalTuning,
): Promise<T> {
  const service = await openService(io, flags, command, tuning);
  try {
    return await fn(service);
  } finally {
    await service.close();
  }
}
