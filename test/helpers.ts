// Shared helpers of the cross-package tests: temp dirs, store inspection, the built CLI.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { isFastpullError, sha256Digest, type FastpullError } from '@fastpull/core';
import type { BuiltImage } from '@fastpull/core/testing';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const repoRoot = resolve(import.meta.dirname, '..');
export const cliPath = join(repoRoot, 'packages', 'cli', 'dist', 'bin.js');

/**
 * Where scripts/peers.sh puts peer `name`'s executable `file` (as `--list` prints it: name, version,
 * directory), or undefined when it lists no such peer. The file may still be missing: callers that
 * need it fail naming the build command.
 */
export function peerBinary(name: string, file: string): string | undefined {
  const listed = spawnSync('bash', [join(repoRoot, 'scripts', 'peers.sh'), '--list'], { encoding: 'utf8' }).stdout;
  const dir = listed
    .split('\n')
    .find((l) => l.startsWith(`${name} `))
    ?.split(' ')[2];
  return dir === undefined ? undefined : join(dir, file);
}

export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `fastpull-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Names in a directory, or [] when it does not exist. */
export function ls(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** Every committed blob re-hashed: returns the names whose content does not match. */
export function corruptBlobs(root: string): string[] {
  const dir = join(root, 'content', 'blobs', 'sha256');
  return ls(dir).filter(
    (hex) =>
      createHash('sha256')
        .update(readFileSync(join(dir, hex)))
        .digest('hex') !== hex,
  );
}

/** Runs the built CLI; returns status and output. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 120_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** Why overlay mounts cannot be tested here, or undefined when they can. */
export function overlayUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root';
  const { dir, cleanup } = tempDir('probe');
  try {
    for (const d of ['l1', 'l2', 'm']) execFileSync('mkdir', ['-p', join(dir, d)]);
    execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${join(dir, 'l2')}:${join(dir, 'l1')}`, join(dir, 'm')], { stdio: 'pipe' });
    execFileSync('umount', [join(dir, 'm')]);
    return undefined;
  } catch (e) {
    return `overlay mount not permitted: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`;
  } finally {
    cleanup();
  }
}

/**
 * Runs the built CLI without blocking this process's event loop (needed when the registry it talks
 * to runs in this process).
 */
export function runCliAsync(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The built fastpulld. */
export const daemonBin = join(repoRoot, 'packages', 'daemon', 'dist', 'bin.js');

/** A fastpulld process and the JSON log lines it wrote. */
export interface RunningDaemon {
  readonly proc: ChildProcess;
  readonly socket: string;
  readonly logs: Array<Record<string, unknown>>;
  readonly stderr: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log line matching `fn`. */
  waitLog(fn: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

/**
 * Starts `fastpulld ARGS` (the built daemon, no config file) and collects its JSON log lines. `env` is
 * added to this process's environment; `bin` runs another entry (the launcher the systemd unit runs).
 */
export function startDaemon(args: string[], options: { env?: NodeJS.ProcessEnv; bin?: string; wrap?: readonly string[] } = {}): RunningDaemon {
  const socket = args[args.indexOf('--socket') + 1]!;
  // `wrap`: a program (and its arguments) the daemon runs under, such as strace; `proc` is then that program.
  const command = [...(options.wrap ?? []), process.execPath, options.bin ?? daemonBin, ...args];
  const proc = spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FASTPULLD_CONFIG: '', ...options.env } });
  const logs: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buf = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ unparsed: line });
      }
      for (const w of [...waiters]) w();
    }
  });
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    proc,
    socket,
    logs,
    stderr: () => err,
    exited,
    waitLog(fn, timeoutMs = 120_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no such log line within ${timeoutMs} ms; logs: ${JSON.stringify(logs)}; stderr: ${err}`)), timeoutMs);
        const check = (): void => {
          const found = logs.find(fn);
          if (found) {
            clearTimeout(timer);
            waiters.splice(waiters.indexOf(check), 1);
            resolve(found);
          }
        };
        waiters.push(check);
        check();
      });
    },
  };
}

/** Starts `fastpulld ARGS` and waits until it says it serves; fails with its stderr if it exits first. */
export async function serveDaemon(args: string[], options: { env?: NodeJS.ProcessEnv; bin?: string; wrap?: readonly string[] } = {}): Promise<RunningDaemon> {
  const d = startDaemon(args, options);
  await Promise.race([
    d.waitLog((l) => l.msg === 'fastpulld serving'),
    d.exited.then(({ code }) => {
      throw new Error(`fastpulld exited with ${code}: ${d.stderr()}`);
    }),
  ]);
  return d;
}

/** SIGTERM to a running fastpulld, and its exit awaited; nothing for one already gone. */
export async function stopDaemon(d: RunningDaemon | undefined): Promise<void> {
  if (!d || d.proc.exitCode !== null || d.proc.signalCode !== null) return;
  d.proc.kill('SIGTERM');
  await d.exited;
}

/** The FastpullError `p` rejects with; fails the test when it resolves or rejects with anything else. */
export async function failure(p: Promise<unknown>): Promise<FastpullError> {
  try {
    await p;
  } catch (e) {
    if (isFastpullError(e)) return e;
    throw e;
  }
  throw new Error('expected a FastpullError, and the call succeeded');
}

/**
 * Everything under `dir` a write through an escape would change: names, types, modes, owners, sizes,
 * times (mtime and ctime), link counts, file contents and link targets.
 */
export function fingerprint(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const p = rel === '' ? dir : join(dir, rel);
    const st = lstatSync(p);
    const what = st.isFile() ? readFileSync(p, 'latin1') : st.isSymbolicLink() ? `-> ${readlinkSync(p)}` : '';
    out.push(`${rel || '.'} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.size} ${st.mtimeMs} ${st.ctimeMs} ${st.nlink} ${what}`);
    if (st.isDirectory()) for (const name of readdirSync(p).sort()) walk(rel === '' ? name : `${rel}/${name}`);
  };
  walk('');
  return out;
}

/** `image` with its config and manifest rewritten by `config` and `manifest` (each given the parsed document). */
export function rewriteImage(
  image: BuiltImage,
  edit: { config?: (c: Record<string, unknown>) => Buffer; manifest?: (m: Record<string, unknown>) => Buffer },
): BuiltImage {
  const config = edit.config ? edit.config(JSON.parse(image.config.toString('utf8')) as Record<string, unknown>) : image.config;
  const configDigest = sha256Digest(config);
  const doc = JSON.parse(image.manifest.toString('utf8')) as Record<string, unknown>;
  const next = { ...doc, config: { ...(doc.config as object), digest: configDigest, size: config.length } };
  const manifest = edit.manifest ? edit.manifest(next) : Buffer.from(JSON.stringify(next));
  const manifestDigest = sha256Digest(manifest);
  const blobs = new Map(image.blobs);
  blobs.delete(image.configDigest);
  blobs.set(configDigest, config);
  return {
    ...image,
    config,
    configDigest,
    manifest,
    manifestDigest,
    manifestDescriptor: { ...image.manifestDescriptor, digest: manifestDigest, size: manifest.length },
    blobs,
  };
}
