// Credentials from Docker's client config (`config.json`): inline `auths` entries and credential helpers.
//
// Which source answers for a registry follows the Docker CLI (cli/config/configfile/file.go,
// GetCredentialsStore): a per-registry `credHelpers` entry first, else the global `credsStore`,
// else the inline `auths` entry. The choice is exclusive: once a helper is configured for a
// registry, its answer is final and `auths` is not consulted, even when the helper has nothing
// (after `docker login` with a store, `auths` keeps only an empty marker entry). So a
// configuration that works with `docker pull` gives the same credentials here.
//
// Secrets never appear in errors, their details or their causes: messages name the config file,
// the registry and the helper, nothing the file or a helper says about a password.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { FastpullError, fromFsError } from '../errors.js';
import { IDENTITY_TOKEN_USERNAME, type Credentials, type CredentialsProvider } from './auth.js';

/** Docker Hub's name in references. */
const DOCKER_HUB = 'docker.io';
/** The key Docker stores Hub credentials under, and the server URL it hands helpers for Hub. */
export const DOCKER_HUB_AUTH_KEY = 'https://index.docker.io/v1/';
/** Host names that all mean Docker Hub, in references and in `auths` keys of other tools. */
const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);
/** A helper that has not answered by then is killed: helpers that prompt or hang must not stall a pull. */
const HELPER_TIMEOUT_MS = 10_000;
/** Helper output is a small JSON object; anything larger is not an answer. */
const HELPER_OUTPUT_CAP = 64 * 1024;
/** Real config files are kilobytes; this only keeps a wrong path from being read into memory. */
const DOCKER_CONFIG_SIZE_LIMIT = 4 * 1024 * 1024;
/** What docker-credential-helpers prints when it has no entry ("credentials not found in native keychain"). */
const NOT_FOUND_PATTERN = /credentials not found/i;
const HELPER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Options of {@link dockerConfigCredentials}. */
export interface DockerConfigOptions {
  /** The config file. Default: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. */
  readonly configPath?: string;
  /** Environment for locating the file and helpers (`DOCKER_CONFIG`, `HOME`, `PATH`) and for running helpers. Default: `process.env`. */
  readonly env?: NodeJS.ProcessEnv;
  /** Directories searched for `docker-credential-<name>` before those on `PATH`. */
  readonly helperDirs?: readonly string[];
  /** Kill a helper after this many milliseconds. Default 10 s. */
  readonly helperTimeoutMs?: number;
}

/** The parts of config.json this module reads. */
interface DockerConfigFile {
  readonly path: string;
  /** `auths` entries in file order. */
  readonly auths: ReadonlyArray<readonly [key: string, entry: AuthEntry]>;
  readonly credsStore: string | undefined;
  /** `credHelpers` entries in file order. */
  readonly credHelpers: ReadonlyArray<readonly [key: string, helper: string]>;
}

interface AuthEntry {
  readonly auth?: unknown;
  readonly username?: unknown;
  readonly password?: unknown;
  readonly identitytoken?: unknown;
}

/**
 * A CredentialsProvider backed by Docker's config.json. The file is read on first use; a missing
 * file means no credentials. Answers (including "none") are cached per registry for the
 * provider's lifetime; failures are not cached, so a later call tries again.
 *
 * Credentials come back only for the registry asked: `auths` keys are compared by host (scheme and
 * path stripped, so `https://ghcr.io/v2/` counts for `ghcr.io`), and Docker Hub (`docker.io`) is
 * found under `https://index.docker.io/v1/` (Docker's key) or the host names `docker.io`,
 * `index.docker.io`, `registry-1.docker.io`. An `identitytoken` comes back as password with
 * user name `<token>`, Docker's convention for OAuth refresh tokens.
 *
 * The provider rejects with INVALID_ARGUMENT for a config file it cannot read or parse, and with
 * UNAUTHORIZED when a credential helper fails; neither message holds a secret.
 * @example
 * await pull('ghcr.io/org/app:1', { root, credentials: dockerConfigCredentials() });
 */
export function dockerConfigCredentials(options: DockerConfigOptions = {}): CredentialsProvider {
  const env = options.env ?? process.env;
  const configPath = options.configPath ?? defaultConfigPath(env);
  const helperDirs = options.helperDirs ?? [];
  const timeoutMs = options.helperTimeoutMs ?? HELPER_TIMEOUT_MS;
  let config: Promise<DockerConfigFile | undefined> | undefined;
  const cache = new Map<string, Promise<Credentials | undefined>>();

  return (registry: string) => {
    const key = canonicalRegistry(registry);
    let answer = cache.get(key);
    if (answer === undefined) {
      if (config === undefined) {
        const loading = loadDockerConfig(configPath);
        // A failed read is not remembered either: the next call reads the file again.
        loading.catch(() => {
          if (config === loading) config = undefined;
        });
        config = loading;
      }
      answer = config.then((c) => (c === undefined ? undefined : lookup(c, key, { env, helperDirs, timeoutMs })));
      const pending = answer;
      pending.catch(() => {
        if (cache.get(key) === pending) cache.delete(key);
      });
      cache.set(key, pending);
    }
    return answer;
  };
}

/**
 * `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, as the Docker CLI looks.
 * @example
 * defaultConfigPath({ DOCKER_CONFIG: '/etc/docker' }) // '/etc/docker/config.json'
 */
export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DOCKER_CONFIG) return join(env.DOCKER_CONFIG, 'config.json');
  return join(env.HOME || homedir(), '.docker', 'config.json');
}

/**
 * The host an `auths` or `credHelpers` key stands for: scheme and path stripped, lower-cased.
 * @example authKeyHost('https://index.docker.io/v1/') // 'index.docker.io'
 */
export function authKeyHost(key: string): string {
  let rest = key.trim();
  const scheme = rest.indexOf('://');
  if (scheme >= 0) rest = rest.slice(scheme + 3);
  const slash = rest.indexOf('/');
  if (slash >= 0) rest = rest.slice(0, slash);
  return rest.toLowerCase();
}

function canonicalRegistry(registry: string): string {
  const host = registry.trim().toLowerCase();
  return DOCKER_HUB_ALIASES.has(host) ? DOCKER_HUB : host;
}

/** True when a config key names `registry` (already canonical). */
function keyMatches(key: string, registry: string): boolean {
  if (key === registry || (registry === DOCKER_HUB && key === DOCKER_HUB_AUTH_KEY)) return true;
  const host = authKeyHost(key);
  return registry === DOCKER_HUB ? DOCKER_HUB_ALIASES.has(host) : host === registry;
}

/** The first entry whose key names the registry, preferring the exact key Docker itself writes. */
function findEntry<T>(entries: ReadonlyArray<readonly [string, T]>, registry: string): T | undefined {
  const exact = registry === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : registry;
  const hit = entries.find(([k]) => k === exact) ?? entries.find(([k]) => keyMatches(k, registry));
  return hit?.[1];
}

interface HelperContext {
  readonly env: NodeJS.ProcessEnv;
  readonly helperDirs: readonly string[];
  readonly timeoutMs: number;
}

async function lookup(config: DockerConfigFile, registry: string, ctx: HelperContext): Promise<Credentials | undefined> {
  const helper = findEntry(config.credHelpers, registry) ?? config.credsStore;
  if (helper !== undefined && helper !== '') {
    // Docker hands helpers the Hub's legacy URL and every other registry's host name.
    const serverUrl = registry === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : registry;
    return runCredentialHelper(helper, serverUrl, { ...ctx, what: `reading credentials for ${registry} from ${config.path}` });
  }
  const entry = findEntry(config.auths, registry);
  return entry === undefined ? undefined : decodeAuthEntry(entry, registry, config.path);
}

function decodeAuthEntry(entry: AuthEntry, registry: string, path: string): Credentials | undefined {
  const bad = (field: string, why: string) =>
    new FastpullError('INVALID_ARGUMENT', `reading credentials for ${registry} from ${path}: "${field}" ${why}`, { details: { path, registry, field } });
  if (entry.identitytoken !== undefined && entry.identitytoken !== '') {
    if (typeof entry.identitytoken !== 'string') throw bad('identitytoken', 'is not a string');
    return { username: IDENTITY_TOKEN_USERNAME, password: entry.identitytoken };
  }
  if (entry.auth !== undefined && entry.auth !== '') {
    // Docker decodes `auth` over any username/password fields of the same entry.
    if (typeof entry.auth !== 'string') throw bad('auth', 'is not a string');
    const b64 = entry.auth.trim();
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 === 1) throw bad('auth', 'is not base64');
    const decoded = Buffer.from(b64, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw bad('auth', 'does not decode to user:password');
    // Docker trims NULs some old clients padded the password with.
    const password = decoded.slice(colon + 1).replace(/^\0+|\0+$/g, '');
    return { username: decoded.slice(0, colon), password };
  }
  if (entry.username === undefined && entry.password === undefined) return undefined;
  if (typeof entry.username !== 'string') throw bad('username', 'is missing or not a string');
  if (typeof entry.password !== 'string') throw bad('password', 'is missing or not a string');
  if (entry.username === '' && entry.password === '') return undefined;
  return { username: entry.username, password: entry.password };
}

/** Reads and checks config.json; undefined when it does not exist. */
async function loadDockerConfig(path: string): Promise<DockerConfigFile | undefined> {
  let text: string;
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new FastpullError('INVALID_ARGUMENT', `reading docker config ${path}: not a regular file`, { details: { path } });
    if (st.size > DOCKER_CONFIG_SIZE_LIMIT)
      throw new FastpullError('INVALID_ARGUMENT', `reading docker config ${path}: larger than ${DOCKER_CONFIG_SIZE_LIMIT} bytes`, { details: { path } });
    text = await readFile(path, 'utf8');
  } catch (e) {
    const errno = (e as NodeJS.ErrnoException | undefined)?.code;
    if (errno === 'ENOENT' || errno === 'ENOTDIR') return undefined;
    throw fromFsError(e, `reading docker config ${path}`, 'INVALID_ARGUMENT');
  }
  // Docker accepts an empty file as an empty config.
  if (text.trim() === '') return { path, auths: [], credsStore: undefined, credHelpers: [] };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    // No cause: V8's JSON errors quote the text around the fault, which may be a secret.
    throw new FastpullError('INVALID_ARGUMENT', `reading docker config ${path}: not valid JSON`, { details: { path } });
  }
  const bad = (what: string) => new FastpullError('INVALID_ARGUMENT', `reading docker config ${path}: ${what}`, { details: { path } });
  if (!isObject(raw)) throw bad('top level is not an object');

  const auths: Array<readonly [string, AuthEntry]> = [];
  if (raw.auths !== undefined && raw.auths !== null) {
    if (!isObject(raw.auths)) throw bad('"auths" is not an object');
    for (const [k, v] of Object.entries(raw.auths)) {
      if (!isObject(v)) throw bad(`"auths" entry ${JSON.stringify(k)} is not an object`);
      auths.push([k, v]);
    }
  }
  let credsStore: string | undefined;
  if (raw.credsStore !== undefined && raw.credsStore !== null) {
    if (typeof raw.credsStore !== 'string') throw bad('"credsStore" is not a string');
    credsStore = raw.credsStore;
  }
  const credHelpers: Array<readonly [string, string]> = [];
  if (raw.credHelpers !== undefined && raw.credHelpers !== null) {
    if (!isObject(raw.credHelpers)) throw bad('"credHelpers" is not an object');
    for (const [k, v] of Object.entries(raw.credHelpers)) {
      if (typeof v !== 'string') throw bad(`"credHelpers" entry ${JSON.stringify(k)} is not a string`);
      credHelpers.push([k, v]);
    }
  }
  return { path, auths, credsStore, credHelpers };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Runs `docker-credential-<helper> get` with `serverUrl` on stdin (the credential helper protocol of
 * docker/docker-credential-helpers) and returns its `{Username, Secret}`. "Credentials not found"
 * is undefined; any other failure is UNAUTHORIZED, and never quotes what the helper printed.
 */
export async function runCredentialHelper(
  helper: string,
  serverUrl: string,
  options: { env?: NodeJS.ProcessEnv; helperDirs?: readonly string[]; timeoutMs?: number; what?: string } = {},
): Promise<Credentials | undefined> {
  const env = options.env ?? process.env;
  const what = options.what ?? `reading credentials for ${serverUrl}`;
  const program = `docker-credential-${helper}`;
  if (!HELPER_NAME_PATTERN.test(helper)) {
    throw new FastpullError('INVALID_ARGUMENT', `${what}: invalid credential helper name ${JSON.stringify(helper)}`, { details: { helper } });
  }
  const file = await findExecutable(program, [...(options.helperDirs ?? []), ...(env.PATH ?? '').split(delimiter)]);
  if (file === undefined) {
    throw new FastpullError('UNAUTHORIZED', `${what}: credential helper ${program} not found on PATH`, { details: { helper: program } });
  }
  const result = await runHelper(file, serverUrl, env, options.timeoutMs ?? HELPER_TIMEOUT_MS);
  const fail = (why: string, extra: Record<string, unknown> = {}) =>
    new FastpullError('UNAUTHORIZED', `${what}: credential helper ${program} ${why}`, { details: { helper: program, ...extra } });
  if (result.spawnError !== undefined) throw fail(`could not be started (${result.spawnError})`);
  if (result.timedOut) throw fail(`did not answer within ${options.timeoutMs ?? HELPER_TIMEOUT_MS} ms`);
  if (result.overflow) throw fail(`printed more than ${HELPER_OUTPUT_CAP} bytes`);
  if (result.exitCode !== 0) {
    if (NOT_FOUND_PATTERN.test(result.stdout) || NOT_FOUND_PATTERN.test(result.stderr)) return undefined;
    throw fail(result.signal ? `was killed by ${result.signal}` : `exited with status ${result.exitCode}`, {
      exitCode: result.exitCode,
      signal: result.signal,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(result.stdout);
  } catch {
    throw fail('printed something other than JSON');
  }
  if (!isObject(parsed)) throw fail('printed something other than a JSON object');
  const username = parsed.Username ?? '';
  const secret = parsed.Secret ?? '';
  if (typeof username !== 'string' || typeof secret !== 'string') throw fail('printed a Username or Secret that is not a string');
  if (secret === '') return undefined;
  // Helpers hand back identity tokens with user name `<token>`, the same convention returned here.
  return { username, password: secret };
}

async function findExecutable(name: string, dirs: readonly string[]): Promise<string | undefined> {
  for (const dir of dirs) {
    // An empty or relative PATH entry means "the current directory": never run helpers from there.
    if (dir === '' || !isAbsolute(dir)) continue;
    const file = join(dir, name);
    try {
      const st = await stat(file);
      if (!st.isFile()) continue;
      await access(file, fsConstants.X_OK);
      return file;
    } catch {
      continue;
    }
  }
  return undefined;
}

interface HelperResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly overflow: boolean;
  readonly spawnError?: string;
}

function runHelper(file: string, input: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<HelperResult> {
  return new Promise((resolve) => {
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(file, ['get'], { shell: false, stdio: ['pipe', 'pipe', 'pipe'], env, windowsHide: true });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException | undefined)?.code;
      resolve({ stdout: '', stderr: '', exitCode: null, signal: null, timedOut: false, overflow: false, spawnError: code ?? 'spawn failed' });
      return;
    }
    let settled = false;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let timedOut = false;
    let overflow = false;
    let spawnError: string | undefined;
    // Gives up on the helper without waiting for 'close': a grandchild it left behind may hold the
    // pipes open long after the helper itself is gone.
    const abandon = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child.stdout.destroy();
      child.stderr.destroy();
      finish(child.exitCode, child.signalCode);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      abandon();
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > HELPER_OUTPUT_CAP) {
        overflow = true;
        abandon();
      } else out.push(chunk);
    });
    // stderr is kept only to recognise "credentials not found"; the rest is dropped.
    child.stderr.on('data', (chunk: Buffer) => {
      if (errBytes < HELPER_OUTPUT_CAP) err.push(chunk);
      errBytes += chunk.length;
    });
    // A helper may exit without reading stdin; that EPIPE is not the failure to report.
    child.stdin.on('error', () => {});
    function finish(code: number | null, signal: NodeJS.Signals | null): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        exitCode: code,
        signal,
        timedOut,
        overflow,
        ...(spawnError === undefined ? {} : { spawnError }),
      });
    }
    // Spawn failures (EACCES, ENOEXEC, ...) keep only their errno for the message.
    child.on('error', (e: NodeJS.ErrnoException) => {
      spawnError = e.code ?? 'spawn failed';
      abandon();
    });
    child.on('close', finish);
    child.stdin.end(input);
  });
}
