// containerd's registry host configuration (`<config_path>/<host>/hosts.toml`): which mirrors to try
// for a registry, in which order, for which operations, with which TLS files and headers.
//
// Format: containerd docs/hosts.md (and core/remotes/docker/config/hosts.go, whose behaviour is
// mirrored where the docs are silent). The TOML is read by smol-toml; this file gives its values
// their meaning and refuses wrong ones by key path (`host."https://m".capabilities: ...`).
import { createRequire } from 'node:module';
import { readdir, readFile, stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { FastpullError, fromFsError, throwIfAborted } from '../errors.js';
import { registryEndpoint } from './hosts.js';

/** What a host may be used for (containerd's HostCapabilities). */
export type HostCapability = 'pull' | 'resolve' | 'push';

/** One place a registry's content can be fetched from, as configured in hosts.toml. */
export interface RegistryHost {
  /** Scheme, host and API path prefix: `/v2` appended unless the path already ends in it or `override_path` is set. */
  readonly url: URL;
  /** `pull`: blobs and manifests by digest; `resolve`: tags to digests; `push`. */
  readonly capabilities: ReadonlySet<HostCapability>;
  /** Extra CA certificate files (PEM), absolute paths. */
  readonly ca: readonly string[];
  /** Client certificate files with their key files (a key may be missing: then the cert file holds it). */
  readonly client: ReadonlyArray<readonly [cert: string, key?: string]>;
  /** Skip TLS certificate verification. */
  readonly skipVerify: boolean;
  /** Headers sent with every request to this host; names as written in the file. */
  readonly headers: Readonly<Record<string, readonly string[]>>;
  /** Connection timeout. */
  readonly dialTimeoutMs: number;
  /** True for the upstream (`server`, or the registry itself by default), which is always last. */
  readonly isServer: boolean;
}

/** containerd's default transport dials with a 30 s timeout; hosts.toml may lower it (Spegel uses 200 ms). */
export const DEFAULT_DIAL_TIMEOUT_MS = 30_000;
/** The file read in each host directory. */
export const HOSTS_FILE = 'hosts.toml';
/** The longest delay a Node timer holds (2^31-1 ms); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** The directory consulted when a registry has none of its own. */
export const DEFAULT_HOST_DIR = '_default';
/** Real files are a few hundred bytes; this only keeps a wrong path from being read into memory. */
const HOSTS_FILE_SIZE_LIMIT = 1024 * 1024;
/** Deepest nesting of inline arrays and tables parsed: hosts.toml needs 2 (client = [["cert", "key"]]). */
const MAX_NESTING = 16;
const ALL_CAPABILITIES: readonly HostCapability[] = ['pull', 'resolve', 'push'];
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Options of {@link loadHostsConfig}. */
export interface HostsConfigOptions {
  /** Talk plain HTTP to the registry itself when hosts.toml names no `server` (as RegistryClientOptions.plainHttp). */
  readonly plainHttp?: boolean;
  /** Aborts reading the files (ABORTED). */
  readonly signal?: AbortSignal;
}

/**
 * The directory names looked up for `registry` under the config directory, in order: for
 * `host:port` first `host_port_` (the form containerd uses on Windows, where `:` cannot appear in
 * a file name), then `host:port` (the form containerd uses on Linux), then `_default`.
 * @example hostDirCandidates('127.0.0.1:5000') // ['127.0.0.1_5000_', '127.0.0.1:5000', '_default']
 */
export function hostDirCandidates(registry: string): string[] {
  checkRegistryName(registry);
  const out: string[] = [];
  const m = /^(.+):(\d+)$/.exec(registry);
  if (m) out.push(`${m[1]}_${m[2]}_`);
  out.push(registry, DEFAULT_HOST_DIR);
  return out;
}

/**
 * Loads the hosts for `registry` from containerd's config directory (e.g. `/etc/containerd/certs.d`).
 * The first directory of `hostDirCandidates` that exists is used; undefined when none does (then
 * the caller uses the registry itself). A directory without hosts.toml (or with an empty one) is
 * read the docker way, as containerd does: `*.crt` files are CAs, `*.cert` files client
 * certificates with the matching `*.key`, all for the registry itself.
 *
 * The result is in the order hosts are tried: `[host."..."]` tables in file order, then the server.
 * Relative `ca` and `client` paths are resolved against the host directory. Throws
 * INVALID_ARGUMENT for a file it cannot read or parse (naming the file, and the line or the key),
 * INVALID_REFERENCE for a bad registry name, ABORTED when `signal` fires.
 * @example
 * const hosts = await loadHostsConfig('/etc/containerd/certs.d', 'docker.io');
 * for (const h of hosts ?? []) console.log(h.url.href, [...h.capabilities]);
 */
export async function loadHostsConfig(configDir: string, registry: string, options: HostsConfigOptions = {}): Promise<RegistryHost[] | undefined> {
  const what = `loading registry host configuration for ${registry}`;
  for (const name of hostDirCandidates(registry)) {
    throwIfAborted(options.signal, what);
    const dir = join(configDir, name);
    try {
      const st = await stat(dir);
      if (!st.isDirectory()) throw new FastpullError('INVALID_ARGUMENT', `${what}: ${dir} is not a directory`, { details: { path: dir } });
    } catch (e) {
      if ((e as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') continue;
      throw fromFsError(e, `${what}: ${dir}`, 'INVALID_ARGUMENT');
    }
    const file = join(dir, HOSTS_FILE);
    let text: string | undefined;
    try {
      const st = await stat(file);
      if (st.size > HOSTS_FILE_SIZE_LIMIT)
        throw new FastpullError('INVALID_ARGUMENT', `${what}: ${file} is larger than ${HOSTS_FILE_SIZE_LIMIT} bytes`, { details: { file } });
      text = await readFile(file, { encoding: 'utf8', ...(options.signal ? { signal: options.signal } : {}) });
    } catch (e) {
      if ((e as NodeJS.ErrnoException | undefined)?.code !== 'ENOENT') {
        if ((e as Error | undefined)?.name === 'AbortError') throw new FastpullError('ABORTED', `${what}: aborted`, { cause: e });
        throw fromFsError(e, `${what}: ${file}`, 'INVALID_ARGUMENT');
      }
    }
    if (text === undefined || text.length === 0) return [await certDirHost(dir, registry, options, what)];
    return parseHostsConfig(text, { registry, baseDir: dir, file, ...(options.plainHttp === undefined ? {} : { plainHttp: options.plainHttp }) });
  }
  return undefined;
}

/**
 * Parses one hosts.toml. Pure: paths are resolved against `baseDir` but nothing is read.
 * Keys this module does not know are ignored, as containerd ignores them. Throws INVALID_ARGUMENT:
 * for TOML it cannot parse, naming `file`, line and column (`details.line`, `details.column`); for
 * a value of the wrong kind, naming `file` and the key path (`details.key`).
 * @example
 * const hosts = parseHostsConfig('server = "https://registry.example"\n[host."https://mirror.local"]\ncapabilities = ["pull"]\n', {
 *   registry: 'registry.example',
 *   baseDir: '/etc/containerd/certs.d/registry.example',
 * });
 */
export function parseHostsConfig(text: string, options: { registry: string; baseDir: string; file?: string; plainHttp?: boolean }): RegistryHost[] {
  const file = options.file ?? join(options.baseDir, HOSTS_FILE);
  const root = readToml(text, file);
  const ctx: EntryContext = { file, baseDir: options.baseDir };
  const hosts: RegistryHost[] = [];
  const hostTable = root.host;
  if (hostTable !== undefined) {
    if (!isTable(hostTable)) throw invalid(file, 'host', 'want a table of [host."<url>"] tables');
    // Tables keep their keys in file order, which is the order mirrors are tried in. (A key that is
    // an array index, `[host."1"]`, would come first: no URL of a mirror looks like one.)
    for (const [key, value] of Object.entries(hostTable)) {
      const where = keyPath('host', key);
      if (!isTable(value)) throw invalid(file, where, 'want a table');
      hosts.push(hostEntry(key, value, where, false, ctx));
    }
  }
  const server = root.server;
  if (server !== undefined) {
    if (typeof server !== 'string') throw invalid(file, 'server', 'want a string');
    hosts.push(hostEntry(server, root, '', true, ctx));
  } else {
    // Without `server`, containerd talks to the registry itself with every capability and the /v2
    // path, whatever the top-level `capabilities` or `override_path` say; the TLS keys, headers and
    // dial timeout at the top level still apply to it.
    const origin = registryEndpoint(options.registry, options.plainHttp ? { plainHttp: true } : {}).origin;
    const base = hostEntry(origin, root, '', true, ctx);
    hosts.push({ ...base, url: new URL(`${origin}/v2`), capabilities: new Set(ALL_CAPABILITIES) });
  }
  return hosts;
}

/**
 * The hosts to try for an operation, in order. Resolving a tag needs `pull` and `resolve` (as in
 * containerd's resolver); fetching blobs or manifests by digest needs `pull` only. So a mirror
 * without `resolve` serves only content addressed by digest.
 * @example
 * const forTags = hostsFor(hosts, 'resolve');
 */
export function hostsFor(hosts: readonly RegistryHost[], op: 'resolve' | 'pull'): RegistryHost[] {
  return hosts.filter((h) => h.capabilities.has('pull') && (op === 'pull' || h.capabilities.has('resolve')));
}

/**
 * Parses a Go duration (`time.ParseDuration`: "200ms", "1.5s", "1m30s"; units ns, us, µs, ms, s,
 * m, h) into milliseconds. Undefined when `s` is not one.
 */
export function parseGoDuration(s: string): number | undefined {
  let rest = s.startsWith('+') ? s.slice(1) : s;
  if (rest === '0') return 0;
  if (rest === '') return undefined;
  const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * unitMs[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// TOML values

/** A TOML table as smol-toml gives it (an object without prototype, keys in file order). */
type Table = Record<string, unknown>;

function isTable(v: unknown): v is Table {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function stringArray(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x): x is string => typeof x === 'string') ? v : undefined;
}

type SmolToml = typeof import('smol-toml');
let toml: SmolToml | undefined;

/**
 * The TOML parser, required when the first hosts.toml is read: most pulls have none, and loading it
 * (nine modules) is paid at every start otherwise.
 */
function smolToml(): SmolToml {
  return (toml ??= createRequire(import.meta.url)('smol-toml') as SmolToml);
}

/** Parses the TOML, or fails naming file, line and column. */
function readToml(text: string, file: string): Table {
  const { parse: parseToml, TomlError } = smolToml();
  try {
    return parseToml(text, { maxDepth: MAX_NESTING });
  } catch (e) {
    if (e instanceof TomlError) {
      // The first line is the reason; the rest quotes the file, which the line and column point into.
      const reason = e.message.split('\n', 1)[0]!.replace(/^Invalid TOML document: /, '');
      throw new FastpullError('INVALID_ARGUMENT', `${file}:${e.line}:${e.column}: invalid TOML: ${reason}`, {
        cause: e,
        details: { file, line: e.line, column: e.column },
      });
    }
    // Keys dotted thousands deep recurse past the stack in the parser.
    if (e instanceof RangeError) throw new FastpullError('INVALID_ARGUMENT', `${file}: invalid TOML: keys nested too deep`, { details: { file } });
    throw e;
  }
}

/** A key path as the file would spell it: `host."https://m:5000".header.x-a`. */
function keyPath(parent: string, key: string): string {
  const part = /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
  return parent === '' ? part : `${parent}.${part}`;
}

function invalid(file: string, key: string, message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `${file}: ${key}: ${message}`, { details: { file, key } });
}

// ---------------------------------------------------------------------------------------------
// Host entries

interface EntryContext {
  readonly file: string;
  readonly baseDir: string;
}

/** One host from its table: `where` is the table's key path ('' for the top level, which describes the server). */
function hostEntry(urlText: string, t: Table, where: string, isServer: boolean, ctx: EntryContext): RegistryHost {
  const { file } = ctx;
  const key = (k: string) => keyPath(where, k);

  const overridePath = optionalBoolean(t, 'override_path', key, file) ?? false;
  const url = hostUrl(urlText, overridePath, () =>
    invalid(file, where === '' ? 'server' : where, `${JSON.stringify(urlText)} is not an http(s) URL with a host`),
  );

  let capabilities = new Set<HostCapability>(ALL_CAPABILITIES);
  if (t.capabilities !== undefined) {
    const list = stringArray(t.capabilities);
    if (list === undefined) throw invalid(file, key('capabilities'), 'want an array of strings');
    // As containerd: an empty list means the default, every capability.
    if (list.length > 0) {
      capabilities = new Set();
      for (const c of list) {
        const cap = c.toLowerCase();
        if (cap !== 'pull' && cap !== 'resolve' && cap !== 'push') {
          throw invalid(file, key('capabilities'), `unknown capability ${JSON.stringify(c)} (known: pull, resolve, push)`);
        }
        capabilities.add(cap);
      }
    }
  }

  const abs = (p: string) => (isAbsolute(p) ? p : join(ctx.baseDir, p));
  let ca: string[] = [];
  if (t.ca !== undefined) {
    const list = typeof t.ca === 'string' ? [t.ca] : stringArray(t.ca);
    if (list === undefined) throw invalid(file, key('ca'), 'want a string or an array of strings');
    ca = list.map(abs);
  }

  const client: Array<readonly [string, string?]> = [];
  if (t.client !== undefined) {
    const bad = () => invalid(file, key('client'), 'want a path, an array of paths, or an array of [cert, key] pairs');
    const items: unknown[] | undefined = typeof t.client === 'string' ? [t.client] : Array.isArray(t.client) ? t.client : undefined;
    if (items === undefined) throw bad();
    for (const item of items) {
      if (typeof item === 'string') client.push([abs(item)]);
      else {
        const pair = stringArray(item);
        if (pair === undefined || pair.length !== 2) throw bad();
        client.push([abs(pair[0]!), abs(pair[1]!)]);
      }
    }
  }

  const skipVerify = optionalBoolean(t, 'skip_verify', key, file) ?? false;
  const headers = hostHeaders(t.header, key('header'), file);

  let dialTimeoutMs = DEFAULT_DIAL_TIMEOUT_MS;
  if (t.dial_timeout !== undefined) {
    const ms = typeof t.dial_timeout === 'string' ? parseGoDuration(t.dial_timeout) : undefined;
    if (ms === undefined || ms <= 0) throw invalid(file, key('dial_timeout'), 'want a positive duration such as "200ms", "30s" or "1m"');
    // Sub-millisecond timeouts round up: a zero timeout would mean none at all. Longer than a timer
    // holds (about 24.8 days) is as good as no timeout, and Node would run a longer timer after 1 ms.
    dialTimeoutMs = Math.min(Math.ceil(ms), MAX_TIMER_MS);
  }

  return { url, capabilities, ca, client, skipVerify, headers, dialTimeoutMs, isServer };
}

/** The `header` table: names checked as HTTP tokens, values a string or strings without CR, LF or NUL. */
function hostHeaders(value: unknown, where: string, file: string): Record<string, string[]> {
  // No prototype: `header.__proto__ = [...]` must be a header, not a new prototype for the object.
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  if (value === undefined) return headers;
  if (!isTable(value)) throw invalid(file, where, 'want a table');
  for (const [name, v] of Object.entries(value)) {
    const hwhere = keyPath(where, name);
    if (!HEADER_NAME.test(name)) throw invalid(file, hwhere, 'not a valid HTTP header name');
    const values = typeof v === 'string' ? [v] : stringArray(v);
    if (values === undefined) throw invalid(file, hwhere, 'want a string or an array of strings');
    if (values.some((s) => /[\r\n\0]/.test(s))) throw invalid(file, hwhere, 'header values cannot hold CR, LF or NUL');
    headers[name] = values;
  }
  return headers;
}

/** containerd's URL rule: no scheme means https; `/v2` is appended unless present or overridden. */
function hostUrl(text: string, overridePath: boolean, bad: () => FastpullError): URL {
  const s = text.trim();
  const hasScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(s);
  let u: URL;
  try {
    u = new URL(hasScheme ? s : `https://${s}`);
  } catch {
    throw bad();
  }
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.host === '' || u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '') {
    throw bad();
  }
  // Unlike containerd (which would make `https://m/` into `//v2`), a trailing slash is dropped.
  let path = u.pathname.replace(/\/+$/, '');
  if (!overridePath && !path.endsWith('/v2')) path += '/v2';
  return new URL(`${u.protocol}//${u.host}${path}`);
}

function optionalBoolean(t: Table, name: string, key: (k: string) => string, file: string): boolean | undefined {
  const v = t[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw invalid(file, key(name), 'want true or false');
  return v;
}

/** The docker certs.d layout: `*.crt` CAs, `*.cert` client certificates with `*.key` keys. */
async function certDirHost(dir: string, registry: string, options: HostsConfigOptions, what: string): Promise<RegistryHost> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (e) {
    throw fromFsError(e, `${what}: ${dir}`, 'INVALID_ARGUMENT');
  }
  const files = new Set(entries.filter((e) => !e.isDirectory()).map((e) => e.name));
  const names = [...files].sort();
  const ca = names.filter((n) => n.endsWith('.crt')).map((n) => join(dir, n));
  const client = names
    .filter((n) => n.endsWith('.cert'))
    .map((n): readonly [string, string?] => {
      const key = `${n.slice(0, -'.cert'.length)}.key`;
      return files.has(key) ? [join(dir, n), join(dir, key)] : [join(dir, n)];
    });
  const origin = registryEndpoint(registry, options.plainHttp ? { plainHttp: true } : {}).origin;
  return {
    url: new URL(`${origin}/v2`),
    capabilities: new Set(ALL_CAPABILITIES),
    ca,
    client,
    skipVerify: false,
    headers: {},
    dialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS,
    isServer: true,
  };
}

function checkRegistryName(registry: string): void {
  // registryEndpoint checks the characters; a name made of dots would climb out of the config dir.
  registryEndpoint(registry);
  if (registry.startsWith('.')) throw new FastpullError('INVALID_REFERENCE', `invalid registry host ${JSON.stringify(registry)}`);
}
