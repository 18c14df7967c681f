// `fastpull version`: what is running: fastpull, Node.js, and the gzip decoder pulls would use.
import { Command } from 'commander';
import { inflaterFromEnv, isFastpullError, resolveGunzip, VERSION } from '@fastpull/core';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, withExample } from '../options.js';

export interface VersionInfo {
  readonly fastpull: string;
  readonly node: string;
  /** The gzip decoder a pull would use: isal, zlib or parallel (in process), igzip or pigz (with its path). */
  readonly inflater: { readonly choice: string; readonly kind: string; readonly path?: string; readonly error?: string };
  /** Threads of libuv's pool, which inflates (node:zlib, ISA-L) and hashes layers: UV_THREADPOOL_SIZE, else libuv's 4. */
  readonly threadPool: number;
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
  return { fastpull: VERSION, node: process.version, inflater, threadPool: Number.isInteger(pool) && pool > 0 ? Math.min(pool, 1024) : 4 };
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
  });
}
