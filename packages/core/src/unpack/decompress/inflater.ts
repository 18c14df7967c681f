// Chooses the gunzip decoder for layers and runs an external one (igzip from ISA-L, or pigz) as a pipeline stage.
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Transform, type TransformCallback } from 'node:stream';
import { FastpullError } from '../../errors.js';
import { ZstdFrameGuard } from './zstd-frames.js';
import { isalAvailable, isalUnavailableReason } from './isal.js';

/**
 * Which gunzip decoder inflates gzip layers:
 * - 'auto': ISA-L's decoder in this process when its addon is built here, else node:zlib (never an
 *   external program: see {@link AUTO_GUNZIP} for the measurements behind the order);
 * - 'igzip': the igzip program of Intel's ISA-L (Debian/Ubuntu package `isal`), required;
 * - 'pigz': `unpigz`/`pigz -d`, required;
 * - 'zlib': node:zlib in this process;
 * - 'parallel': fastpull's own decoder, one gzip stream spread over threads (unpack/decompress/pargzip.ts);
 *   INVALID_ARGUMENT when its native part is not built;
 * - 'isal': ISA-L's decoder in this process (unpack/decompress/isal.ts, the addon linked against libisal);
 *   INVALID_ARGUMENT when that addon is not built.
 */
export type InflaterChoice = 'auto' | 'igzip' | 'pigz' | 'zlib' | 'parallel' | 'isal';

/** Every {@link InflaterChoice}, in the order messages list them. */
export const INFLATER_CHOICES: readonly InflaterChoice[] = ['auto', 'igzip', 'pigz', 'zlib', 'parallel', 'isal'];

/**
 * What 'auto' tries, first that can run here: in-process ISA-L, then node:zlib (always there).
 * Chosen by whole pulls, not by decoders alone (bench/README.md, "Choosing auto"; the figures in
 * docs/architecture.md, "Figures behind the defaults"). ISA-L in process is as fast or faster within the noise and takes the least CPU; node:zlib next.
 * The igzip program decodes faster than node:zlib alone, but its pipe costs more CPU than it saves
 * once hashing and extraction share the cores; in process, ISA-L decodes on its own thread while
 * the unpack thread extracts the chunk before (and the hashes run on other pool threads). 'parallel' spends CPU on
 * guessing and pays off only with cores to spare. igzip and pigz run only when asked for.
 */
export const AUTO_GUNZIP: readonly ('isal' | 'zlib')[] = ['isal', 'zlib'];

/** The choice when none is given. */
export const DEFAULT_INFLATER: InflaterChoice = 'auto';

/** The environment variable {@link inflaterFromEnv} reads. */
export const INFLATER_ENV = 'FASTPULL_INFLATER';

/** An external decompressor: a gunzip program, or zstd. */
export interface ExternalInflater {
  /** Which program it is. */
  kind: 'igzip' | 'pigz' | 'zstd';
  /** Absolute path of the program, run without a shell. */
  path: string;
}

/**
 * Where each external inflater is looked for, in order. Fixed absolute paths only: PATH is never
 * searched, so the environment cannot substitute another program for the one that decodes layers.
 */
export const INFLATER_PATHS: Readonly<Record<ExternalInflater['kind'], readonly string[]>> = {
  igzip: ['/usr/bin/igzip', '/usr/local/bin/igzip'],
  pigz: ['/usr/bin/unpigz', '/usr/local/bin/unpigz', '/usr/bin/pigz', '/usr/local/bin/pigz'],
  zstd: ['/usr/bin/zstd', '/usr/local/bin/zstd'],
};

/** The most stderr of an external inflater an error message quotes. */
export const INFLATER_STDERR_LIMIT = 2048;

/**
 * Pipe buffers of the external inflater's stage. Larger than the 16 KiB stream default so a 64 KiB
 * read from the child's stdout does not pause the pipe on every chunk.
 */
const EXTERNAL_HIGH_WATER_MARK = 1024 * 1024;

/** Arguments that make each program inflate stdin to stdout. */
const INFLATER_ARGS: Readonly<Record<ExternalInflater['kind'], readonly string[]>> = {
  igzip: ['-d', '-c'],
  pigz: ['-d', '-c'],
  zstd: ['-d', '-c', '-q'],
};

/** Whether each path is an executable regular file, looked up once per process. */
const executableCache = new Map<string, boolean>();

function isExecutableFile(path: string): boolean {
  let found = executableCache.get(path);
  if (found === undefined) {
    try {
      found = fs.statSync(path).isFile();
      if (found) fs.accessSync(path, fs.constants.X_OK);
    } catch {
      found = false;
    }
    executableCache.set(path, found);
  }
  return found;
}

/**
 * `value` as an {@link InflaterChoice}; INVALID_ARGUMENT naming `source` when it is none.
 * @example
 * const inflater = parseInflaterChoice(flags.inflater, '--inflater');
 */
export function parseInflaterChoice(value: string, source = 'inflater'): InflaterChoice {
  if ((INFLATER_CHOICES as readonly string[]).includes(value)) return value as InflaterChoice;
  throw new FastpullError('INVALID_ARGUMENT', `${source}: ${JSON.stringify(value)} is not one of ${INFLATER_CHOICES.join(', ')}`, {
    details: { value },
  });
}

/**
 * The choice the {@link INFLATER_ENV} variable of `env` makes, or undefined when it is unset or empty.
 * INVALID_ARGUMENT when it holds anything else than an {@link InflaterChoice}.
 * @example
 * const inflater = inflaterFromEnv(process.env) ?? 'auto';
 */
export function inflaterFromEnv(env: Readonly<Record<string, string | undefined>>): InflaterChoice | undefined {
  const value = env[INFLATER_ENV];
  return value === undefined || value === '' ? undefined : parseInflaterChoice(value, INFLATER_ENV);
}

/** The gunzip decoder a choice resolves to on this machine: one in this process, or an external program. */
export type GunzipDecoder = { readonly kind: 'isal' | 'zlib' | 'parallel' } | (ExternalInflater & { readonly kind: 'igzip' | 'pigz' });

/** What {@link resolveGunzip} looks at besides the choice: where programs are, whether the ISA-L addon loads. For tests. */
export interface GunzipLookup {
  /** Where each external program is looked for; default {@link INFLATER_PATHS}. */
  paths?: Readonly<Record<ExternalInflater['kind'], readonly string[]>>;
  /** Whether the in-process ISA-L inflater can run; default {@link isalAvailable}(). */
  isal?: boolean;
}

/**
 * The decoder `choice` resolves to here: 'auto' takes the first of {@link AUTO_GUNZIP} that can
 * run. An explicit 'isal', 'igzip' or 'pigz' that cannot run is INVALID_ARGUMENT saying why.
 * @example
 * const d = resolveGunzip('auto');
 * console.log('path' in d ? `gzip layers via ${d.path}` : `gzip layers via ${d.kind}, in process`);
 */
export function resolveGunzip(choice: InflaterChoice = DEFAULT_INFLATER, lookup: GunzipLookup = {}): GunzipDecoder {
  const paths = lookup.paths ?? INFLATER_PATHS;
  const isal = (): boolean => lookup.isal ?? isalAvailable();
  switch (choice) {
    case 'zlib':
    case 'parallel':
      return { kind: choice };
    case 'isal':
      if (isal()) return { kind: 'isal' };
      throw new FastpullError(
        'INVALID_ARGUMENT',
        `inflater isal was asked for but is not available: ${isalUnavailableReason() ?? 'its addon is not loaded'}; use auto or zlib instead`,
        { details: { inflater: choice } },
      );
    case 'auto':
      return { kind: AUTO_GUNZIP.find((k) => k !== 'isal' || isal()) ?? 'zlib' };
    case 'igzip':
    case 'pigz': {
      const path = paths[choice].find(isExecutableFile);
      if (path !== undefined) return { kind: choice, path };
      const hint = choice === 'igzip' ? ' (Debian/Ubuntu package isal)' : ' (package pigz)';
      throw new FastpullError(
        'INVALID_ARGUMENT',
        `inflater ${choice} was asked for but is not installed: no executable at ${paths[choice].join(', ')}${hint}; use auto or zlib instead`,
        { details: { inflater: choice, paths: paths[choice] } },
      );
    }
    default:
      // Only a value from untyped code gets here; parseInflaterChoice throws INVALID_ARGUMENT for it.
      parseInflaterChoice(String(choice));
      return { kind: 'zlib' };
  }
}

/**
 * The external program `choice` resolves to ({@link resolveGunzip}), or undefined for a decoder in
 * this process ('auto', 'zlib', 'parallel', 'isal'). An explicit choice that cannot run is
 * INVALID_ARGUMENT. `paths` is for tests.
 * @example
 * const tool = findInflater('igzip');
 * console.log(`gzip layers via ${tool?.path}`);
 */
export function findInflater(
  choice: InflaterChoice = DEFAULT_INFLATER,
  paths: Readonly<Record<ExternalInflater['kind'], readonly string[]>> = INFLATER_PATHS,
): ExternalInflater | undefined {
  const decoder = resolveGunzip(choice, { paths });
  return 'path' in decoder ? decoder : undefined;
}

/**
 * The external zstd decoder for `choice`: `zstd -dc` when installed, unless the choice is 'zlib'
 * or 'parallel' (the built-in decoders only). Undefined means the built-in one (fzstd).
 */
export function findZstd(
  choice: InflaterChoice = DEFAULT_INFLATER,
  paths: Readonly<Record<ExternalInflater['kind'], readonly string[]>> = INFLATER_PATHS,
): ExternalInflater | undefined {
  return choice === 'zlib' || choice === 'parallel' ? undefined : locate('zstd', paths);
}

function locate(kind: ExternalInflater['kind'], paths: Readonly<Record<ExternalInflater['kind'], readonly string[]>>): ExternalInflater | undefined {
  const path = paths[kind].find(isExecutableFile);
  return path === undefined ? undefined : { kind, path };
}

/**
 * A stream stage that gunzips through `tool`: what is written goes to the child's stdin, what the child
 * writes to stdout is read, with backpressure both ways. The readable side ends only after the child
 * has exited with status 0; a non-zero status or a signal destroys the stage with INVALID_LAYER, quoting
 * the child's stderr (at most {@link INFLATER_STDERR_LIMIT} bytes). Destroying the stage (an aborted
 * pipeline, a failing neighbour) kills the child with SIGKILL and finishes only once it is reaped.
 *
 * Parity with node:zlib: concatenated members, empty members, corrupt and truncated streams, trailing
 * zeros all behave alike, and the output is the same bytes. The gaps, pinned by inflater.test.ts:
 * - igzip and pigz stop at the first thing after a member that is not a gzip header and exit 0, so
 *   trailing bytes that are not zeros are ignored here where node:zlib fails ("incorrect header
 *   check"). What the child left unread is still consumed and dropped, so the blob is hashed in full.
 *   Nothing can hide in those bytes: the blob digest covers them and the diffID covers the output.
 * - pigz also exits 0 when a member after the first is cut inside its header (igzip and node:zlib
 *   fail); the output then lacks that member, which the diffID check catches. 'auto' never picks pigz.
 */
export function createExternalGunzip(tool: ExternalInflater): Transform {
  return new ExternalGunzip(tool);
}

/** How the child ended: exit status or signal, or the error that kept it from starting. */
type ChildEnd = { code: number | null; signal: NodeJS.Signals | null } | { spawnError: Error };

class ExternalGunzip extends Transform {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly stderr: Buffer[] = [];
  private stderrBytes = 0;
  private spawnError: Error | undefined;
  private ended: ChildEnd | undefined;
  /** The callback of a write the child's stdin has not taken yet. */
  private pendingWrite: TransformCallback | undefined;
  /** Called once the child has ended: a pending flush, or a destroy waiting for the reap. */
  private readonly onEnd: (() => void)[] = [];
  /** zstd frames are checked here first: a window over the limit never reaches the program. */
  private readonly guard: ZstdFrameGuard | undefined;

  constructor(private readonly tool: ExternalInflater) {
    super({ readableHighWaterMark: EXTERNAL_HIGH_WATER_MARK, writableHighWaterMark: EXTERNAL_HIGH_WATER_MARK });
    this.guard = tool.kind === 'zstd' ? new ZstdFrameGuard() : undefined;
    // An empty environment: pigz reads options from $PIGZ, and nothing else is wanted from ours.
    this.child = childProcess().spawn(tool.path, [...INFLATER_ARGS[tool.kind]], { stdio: ['pipe', 'pipe', 'pipe'], shell: false, env: {} });
    const { stdin, stdout, stderr } = this.child;
    stdout.on('data', (chunk: Buffer) => {
      if (!this.destroyed && !this.push(chunk)) stdout.pause();
    });
    stderr.on('data', (chunk: Buffer) => {
      // Keeps reading past the limit so a chatty child never blocks on a full stderr pipe.
      if (this.stderrBytes < INFLATER_STDERR_LIMIT) this.stderr.push(chunk.subarray(0, INFLATER_STDERR_LIMIT - this.stderrBytes));
      this.stderrBytes += chunk.length;
    });
    // EPIPE when the child exits before taking all input: its exit status, seen on 'close', is the verdict.
    stdin.on('error', () => {});
    stdin.on('drain', () => this.releaseWrite());
    this.child.on('error', (e) => {
      this.spawnError ??= e;
    });
    // 'close' comes after the exit and after stdout and stderr have ended, so all output has been pushed.
    this.child.on('close', (code, signal) => this.childClosed(code, signal));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.ended) {
      // The child finished its last member and stopped reading: the rest is trailing data (see above).
      callback(this.endError());
      return;
    }
    try {
      this.guard?.check(chunk);
    } catch (e) {
      callback(e as Error);
      return;
    }
    const stdin = this.child.stdin;
    if (stdin.destroyed || stdin.writableEnded) {
      this.pendingWrite = callback; // released by childClosed
    } else if (stdin.write(chunk)) {
      callback();
    } else {
      this.pendingWrite = callback;
    }
  }

  override _flush(callback: TransformCallback): void {
    this.child.stdin.end();
    if (this.ended) callback(this.endError());
    else
      this.onEnd.push(() => {
        if (!this.destroyed) callback(this.endError());
      });
  }

  override _read(size: number): void {
    this.child.stdout.resume();
    super._read(size);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const { stdin, stdout, stderr } = this.child;
    stdin.destroy();
    stdout.destroy();
    stderr.destroy();
    if (this.ended) {
      callback(error);
      return;
    }
    this.child.kill('SIGKILL');
    this.onEnd.push(() => callback(error));
  }

  private releaseWrite(error?: Error): void {
    const callback = this.pendingWrite;
    this.pendingWrite = undefined;
    callback?.(error);
  }

  private childClosed(code: number | null, signal: NodeJS.Signals | null): void {
    this.ended = this.spawnError ? { spawnError: this.spawnError } : { code, signal };
    const error = this.endError();
    for (const f of this.onEnd.splice(0)) f();
    if (this.destroyed) return;
    if (error) this.destroy(error);
    else this.releaseWrite();
  }

  /** The error the child's end means, or undefined for a clean exit (or while it runs). */
  private endError(): FastpullError | undefined {
    const end = this.ended;
    if (end === undefined) return undefined;
    const { kind, path } = this.tool;
    if ('spawnError' in end) {
      return new FastpullError('INTERNAL', `inflating with ${kind}: cannot run ${path}: ${end.spawnError.message}`, {
        cause: end.spawnError,
        details: { inflater: kind, path },
      });
    }
    if (end.code === 0) return undefined;
    const how = end.signal === null ? `exited with status ${end.code}` : `was killed by ${end.signal}`;
    const stderr = Buffer.concat(this.stderr).toString('utf8').trim();
    const more = this.stderrBytes > INFLATER_STDERR_LIMIT ? ` [${this.stderrBytes - INFLATER_STDERR_LIMIT} more bytes]` : '';
    return new FastpullError(
      'INVALID_LAYER',
      `corrupt ${kind === 'zstd' ? 'zstd' : 'gzip'} stream: ${kind} (${path}) ${how}${stderr === '' ? '' : `: ${stderr}${more}`}`,
      {
        details: { inflater: kind, path, exitCode: end.code, signal: end.signal, stderr },
      },
    );
  }
}

/**
 * node:child_process, loaded on first use: every unpack worker imports this module, and only the
 * external decoders need it (with it come net, dgram and their streams, compiled in each worker).
 */
function childProcess(): typeof import('node:child_process') {
  return (loadedChildProcess ??= createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process'));
}
let loadedChildProcess: typeof import('node:child_process') | undefined;
