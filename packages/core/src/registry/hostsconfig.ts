// containerd's registry host configuration (`<config_path>/<host>/hosts.toml`): which mirrors to try
// for a registry, in which order, for which operations, with which TLS files and headers.
//
// Format: containerd docs/hosts.md (and core/remotes/docker/config/hosts.go, whose behaviour is
// mirrored where the docs are silent). Only the small TOML subset those files use is parsed here:
// basic and literal strings, booleans, arrays (also of arrays), tables with dotted and quoted
// headers, dotted keys and comments. Anything else is refused with the file and line.
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
 * INVALID_ARGUMENT for a file it cannot read or parse (naming file and line), INVALID_REFERENCE
 * for a bad registry name, ABORTED when `signal` fires.
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
      if (st.size > HOSTS_FILE_SIZE_LIMIT) throw new FastpullError('INVALID_ARGUMENT', `${what}: ${file} is larger than ${HOSTS_FILE_SIZE_LIMIT} bytes`, { details: { file } });
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
 * Keys this module does not know are ignored, as containerd ignores them. Throws INVALID_ARGUMENT,
 * naming `file` and the line, for what it cannot parse.
 * @example
 * const hosts = parseHostsConfig('server = "https://registry.example"\n[host."https://mirror.local"]\ncapabilities = ["pull"]\n', {
 *   registry: 'registry.example',
 *   baseDir: '/etc/containerd/certs.d/registry.example',
 * });
 */
export function parseHostsConfig(text: string, options: { registry: string; baseDir: string; file?: string; plainHttp?: boolean }): RegistryHost[] {
  const file = options.file ?? join(options.baseDir, HOSTS_FILE);
  const root = parseTomlSubset(text, file);
  const ctx: EntryContext = { file, baseDir: options.baseDir };
  const hosts: RegistryHost[] = [];
  const hostTable = root.entries.get('host');
  if (hostTable !== undefined) {
    if (!(hostTable instanceof TomlTable)) throw invalid(file, root.lineOf('host'), '"host" must be a table of [host."<url>"] tables');
    for (const [key, value] of hostTable.entries) {
      const where = `host.${formatKeyPart(key)}`;
      if (!(value instanceof TomlTable)) throw invalid(file, hostTable.lineOf(key), `${where} must be a table`);
      hosts.push(hostEntry(key, value, where, false, ctx));
    }
  }
  const server = root.entries.get('server');
  if (server !== undefined) {
    if (typeof server !== 'string') throw invalid(file, root.lineOf('server'), '"server" must be a string');
    hosts.push(hostEntry(server, root, 'server', true, ctx));
  } else {
    // Without `server`, containerd talks to the registry itself with every capability and the /v2
    // path, whatever the top-level `capabilities` or `override_path` say; the TLS keys, headers and
    // dial timeout at the top level still apply to it.
    const origin = registryEndpoint(options.registry, options.plainHttp ? { plainHttp: true } : {}).origin;
    const base = hostEntry(origin, root, 'server', true, ctx);
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
  const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
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
// Host entries

interface EntryContext {
  readonly file: string;
  readonly baseDir: string;
}

function hostEntry(urlText: string, t: TomlTable, where: string, isServer: boolean, ctx: EntryContext): RegistryHost {
  const { file } = ctx;
  const line = (key: string) => t.lineOf(key);
  const keyName = (key: string) => (where === 'server' ? key : `${where}.${key}`);
  const urlLine = where === 'server' ? t.lineOf('server') : t.line;

  const overridePath = optionalBoolean(t, 'override_path', keyName, file) ?? false;
  const url = hostUrl(urlText, overridePath, () => invalid(file, urlLine, `${where}: ${JSON.stringify(urlText)} is not an http(s) URL with a host`));

  let capabilities = new Set<HostCapability>(ALL_CAPABILITIES);
  const caps = t.entries.get('capabilities');
  if (caps !== undefined) {
    const list = stringArray(caps);
    if (list === undefined) throw invalid(file, line('capabilities'), `${keyName('capabilities')} must be an array of strings`);
    // As containerd: an empty list means the default, every capability.
    if (list.length > 0) {
      capabilities = new Set();
      for (const c of list) {
        const cap = c.toLowerCase();
        if (cap !== 'pull' && cap !== 'resolve' && cap !== 'push') {
          throw invalid(file, line('capabilities'), `${keyName('capabilities')}: unknown capability ${JSON.stringify(c)} (known: pull, resolve, push)`);
        }
        capabilities.add(cap);
      }
    }
  }

  const abs = (p: string) => (isAbsolute(p) ? p : join(ctx.baseDir, p));
  let ca: string[] = [];
  const caValue = t.entries.get('ca');
  if (caValue !== undefined) {
    const list = typeof caValue === 'string' ? [caValue] : stringArray(caValue);
    if (list === undefined) throw invalid(file, line('ca'), `${keyName('ca')} must be a string or an array of strings`);
    ca = list.map(abs);
  }

  const client: Array<readonly [string, string?]> = [];
  const clientValue = t.entries.get('client');
  if (clientValue !== undefined) {
    const bad = () => invalid(file, line('client'), `${keyName('client')} must be a path, an array of paths, or an array of [cert, key] pairs`);
    const items = typeof clientValue === 'string' ? [clientValue] : Array.isArray(clientValue) ? clientValue : undefined;
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

  const skipVerify = optionalBoolean(t, 'skip_verify', keyName, file) ?? false;

  // No prototype: `header.__proto__ = [...]` must be a header, not a new prototype for the object.
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  const headerValue = t.entries.get('header');
  if (headerValue !== undefined) {
    if (!(headerValue instanceof TomlTable)) throw invalid(file, line('header'), `${keyName('header')} must be a table`);
    for (const [name, value] of headerValue.entries) {
      const hline = headerValue.lineOf(name);
      const hwhere = `${keyName('header')}.${formatKeyPart(name)}`;
      if (!HEADER_NAME.test(name)) throw invalid(file, hline, `${hwhere}: not a valid HTTP header name`);
      const values = typeof value === 'string' ? [value] : stringArray(value);
      if (values === undefined) throw invalid(file, hline, `${hwhere} must be a string or an array of strings`);
      if (values.some((v) => /[\r\n\0]/.test(v))) throw invalid(file, hline, `${hwhere}: header values cannot hold CR, LF or NUL`);
      headers[name] = values;
    }
  }

  let dialTimeoutMs = DEFAULT_DIAL_TIMEOUT_MS;
  const dial = t.entries.get('dial_timeout');
  if (dial !== undefined) {
    const ms = typeof dial === 'string' ? parseGoDuration(dial) : undefined;
    if (ms === undefined || ms <= 0) {
      throw invalid(file, line('dial_timeout'), `${keyName('dial_timeout')} must be a positive duration such as "200ms", "30s" or "1m"`);
    }
    // Sub-millisecond timeouts round up: a zero timeout would mean none at all. Longer than a timer
    // holds (about 24.8 days) is as good as no timeout, and Node would run a longer timer after 1 ms.
    dialTimeoutMs = Math.min(Math.ceil(ms), MAX_TIMER_MS);
  }

  return { url, capabilities, ca, client, skipVerify, headers, dialTimeoutMs, isServer };
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

function optionalBoolean(t: TomlTable, key: string, keyName: (k: string) => string, file: string): boolean | undefined {
  const v = t.entries.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw invalid(file, t.lineOf(key), `${keyName(key)} must be true or false`);
  return v;
}

function stringArray(v: TomlValue): string[] | undefined {
  return Array.isArray(v) && v.every((x): x is string => typeof x === 'string') ? v : undefined;
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

function invalid(file: string, line: number, message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `${file}:${line}: ${message}`, { details: { file, line } });
}

// ---------------------------------------------------------------------------------------------
// The TOML subset (https://toml.io/en/v1.0.0)

/** A value of the TOML subset: strings, booleans, arrays and tables. */
export type TomlValue = string | boolean | TomlValue[] | TomlTable;

/** A TOML table that keeps its keys in file order and remembers the line of each. */
export class TomlTable {
  readonly entries = new Map<string, TomlValue>();
  private readonly lines = new Map<string, number>();

  constructor(
    /** How the table came to be: named in a `[header]`, created by a dotted key, or only implied by a longer header. */
    public definedBy: 'header' | 'dotted' | 'implicit',
    /** The line where the table first appeared. */
    readonly line: number,
  ) {}

  set(key: string, value: TomlValue, line: number): void {
    this.entries.set(key, value);
    this.lines.set(key, line);
  }

  /** The line where `key` was set (the table's own line when it was not). */
  lineOf(key: string): number {
    return this.lines.get(key) ?? this.line;
  }
}

/**
 * Parses the TOML subset hosts.toml files use. Refuses, naming file and line: numbers, dates,
 * inline tables, arrays of tables, multi-line strings, duplicate keys and tables defined twice.
 */
export function parseTomlSubset(text: string, file = '<hosts.toml>'): TomlTable {
  return new TomlParser(text, file).parse();
}

const BARE_KEY_CHAR = /[A-Za-z0-9_-]/;

/** Deepest array nesting parsed (hosts.toml needs 2). */
const MAX_ARRAY_DEPTH = 16;

class TomlParser {
  private pos = 0;
  private arrayDepth = 0;
  private line = 1;
  private readonly src: string;

  constructor(
    text: string,
    private readonly file: string,
  ) {
    this.src = text.startsWith('\uFEFF') ? text.slice(1) : text;
  }

  parse(): TomlTable {
    const root = new TomlTable('header', 1);
    let current = root;
    while (this.pos < this.src.length) {
      this.skipSpaces();
      const c = this.src[this.pos];
      if (c === '[') {
        if (this.src[this.pos + 1] === '[') throw this.error('arrays of tables ([[...]]) are not supported');
        this.pos++;
        this.skipSpaces();
        const keys = this.parseKey();
        this.skipSpaces();
        this.expect(']', `expected "]" to close the table header [${formatKey(keys)}]`);
        current = this.openTable(root, keys);
      } else if (c !== undefined && c !== '#' && c !== '\n' && c !== '\r') {
        const keys = this.parseKey();
        this.skipSpaces();
        this.expect('=', `expected "=" after key ${formatKey(keys)}`);
        this.skipSpaces();
        const line = this.line;
        const value = this.parseValue();
        this.assign(current, keys, value, line);
      }
      this.skipSpaces();
      if (this.src[this.pos] === '#') this.skipComment();
      this.endOfLine();
    }
    return root;
  }

  private openTable(root: TomlTable, keys: string[]): TomlTable {
    let t = root;
    keys.forEach((k, i) => {
      const last = i === keys.length - 1;
      const existing = t.entries.get(k);
      if (existing === undefined) {
        const created = new TomlTable(last ? 'header' : 'implicit', this.line);
        t.set(k, created, this.line);
        t = created;
      } else if (existing instanceof TomlTable) {
        if (last) {
          if (existing.definedBy === 'header') throw this.error(`table [${formatKey(keys)}] is defined twice (first on line ${existing.line})`);
          if (existing.definedBy === 'dotted') throw this.error(`table [${formatKey(keys)}] was already defined with dotted keys on line ${existing.line}`);
          existing.definedBy = 'header';
        }
        t = existing;
      } else {
        throw this.error(`key ${formatKey(keys.slice(0, i + 1))} already holds a value (line ${t.lineOf(k)}), not a table`);
      }
    });
    return t;
  }

  private assign(table: TomlTable, keys: string[], value: TomlValue, line: number): void {
    let t = table;
    for (let i = 0; i < keys.length - 1; i++) {
      const k = keys[i]!;
      const existing = t.entries.get(k);
      if (existing === undefined) {
        const created = new TomlTable('dotted', line);
        t.set(k, created, line);
        t = created;
      } else if (existing instanceof TomlTable && existing.definedBy === 'dotted') {
        t = existing;
      } else {
        const what = existing instanceof TomlTable ? 'is a table defined elsewhere' : 'already holds a value';
        throw this.error(`key ${formatKey(keys.slice(0, i + 1))} ${what} (line ${t.lineOf(k)})`, line);
      }
    }
    const last = keys[keys.length - 1]!;
    if (t.entries.has(last)) throw this.error(`duplicate key ${formatKey(keys)} (first on line ${t.lineOf(last)})`, line);
    t.set(last, value, line);
  }

  private parseKey(): string[] {
    const parts = [this.simpleKey()];
    for (;;) {
      const save = this.pos;
      this.skipSpaces();
      if (this.src[this.pos] !== '.') {
        this.pos = save;
        return parts;
      }
      this.pos++;
      this.skipSpaces();
      parts.push(this.simpleKey());
    }
  }

  private simpleKey(): string {
    const c = this.src[this.pos];
    if (c === '"' || c === "'") {
      if (this.src.startsWith(c.repeat(3), this.pos)) throw this.error('multi-line strings cannot be keys');
      return c === '"' ? this.basicString() : this.literalString();
    }
    const start = this.pos;
    while (this.pos < this.src.length && BARE_KEY_CHAR.test(this.src[this.pos]!)) this.pos++;
    if (this.pos === start) throw this.error(`expected a key, found ${this.describeHere()}`);
    return this.src.slice(start, this.pos);
  }

  private parseValue(): TomlValue {
    const c = this.src[this.pos];
    if (c === '"' || c === "'") {
      if (this.src.startsWith(c.repeat(3), this.pos)) throw this.error('multi-line strings are not supported');
      return c === '"' ? this.basicString() : this.literalString();
    }
    if (c === '[') return this.array();
    if (c === '{') throw this.error('inline tables ({...}) are not supported; use a [table] header');
    for (const word of ['true', 'false'] as const) {
      if (this.src.startsWith(word, this.pos) && !BARE_KEY_CHAR.test(this.src[this.pos + word.length] ?? '')) {
        this.pos += word.length;
        return word === 'true';
      }
    }
    if (c !== undefined && /[0-9+-]/.test(c)) throw this.error('numbers, dates and times are not supported; hosts.toml values are strings, booleans or arrays');
    if (c === undefined || c === '\n' || c === '\r' || c === '#') throw this.error('missing value after "="');
    throw this.error(`invalid value starting with ${this.describeHere()} (strings must be quoted)`);
  }

  private array(): TomlValue[] {
    // hosts.toml nests arrays two deep at most (client = [["cert", "key"]]); deeper nesting is
    // refused before it can exhaust the stack.
    if (++this.arrayDepth > MAX_ARRAY_DEPTH) throw this.error(`arrays nested more than ${MAX_ARRAY_DEPTH} deep`);
    const items: TomlValue[] = [];
    this.pos++;
    for (;;) {
      this.skipBlank();
      if (this.src[this.pos] === ']') break;
      items.push(this.parseValue());
      this.skipBlank();
      if (this.src[this.pos] === ',') {
        this.pos++;
        continue;
      }
      if (this.src[this.pos] === ']') break;
      throw this.error(`expected "," or "]" in array, found ${this.describeHere()}`);
    }
    this.pos++;
    this.arrayDepth--;
    return items;
  }

  private basicString(): string {
    const startLine = this.line;
    this.pos++;
    let out = '';
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === '\n' || c === '\r') throw this.error('unterminated string', startLine);
      this.pos++;
      if (c === '"') return out;
      if (c === '\\') {
        out += this.escape();
        continue;
      }
      this.checkStringChar(c);
      out += c;
    }
  }

  private escape(): string {
    const e = this.src[this.pos++];
    const simple: Record<string, string> = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', '"': '"', '\\': '\\' };
    if (e !== undefined && simple[e] !== undefined) return simple[e];
    if (e === 'u' || e === 'U') {
      const len = e === 'u' ? 4 : 8;
      const hex = this.src.slice(this.pos, this.pos + len);
      const cp = /^[0-9A-Fa-f]+$/.test(hex) && hex.length === len ? parseInt(hex, 16) : -1;
      if (cp < 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) throw this.error(`invalid unicode escape \\${e}${hex}`);
      this.pos += len;
      return String.fromCodePoint(cp);
    }
    throw this.error(`invalid escape sequence \\${e ?? ''} in string`);
  }

  private literalString(): string {
    const startLine = this.line;
    const start = ++this.pos;
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === '\n' || c === '\r') throw this.error('unterminated string', startLine);
      if (c === "'") break;
      this.checkStringChar(c);
      this.pos++;
    }
    return this.src.slice(start, this.pos++);
  }

  private checkStringChar(c: string): void {
    const code = c.charCodeAt(0);
    if ((code < 0x20 && c !== '\t') || code === 0x7f) throw this.error(`control character U+${code.toString(16).padStart(4, '0')} in string`);
  }

  private skipSpaces(): void {
    while (this.src[this.pos] === ' ' || this.src[this.pos] === '\t') this.pos++;
  }

  /** Spaces, newlines and comments: what may sit between array elements. */
  private skipBlank(): void {
    for (;;) {
      this.skipSpaces();
      const c = this.src[this.pos];
      if (c === '#') this.skipComment();
      else if (c === '\n' || c === '\r') this.endOfLine();
      else return;
    }
  }

  private skipComment(): void {
    while (this.pos < this.src.length && this.src[this.pos] !== '\n' && this.src[this.pos] !== '\r') {
      const code = this.src.charCodeAt(this.pos);
      if ((code < 0x20 && code !== 0x09) || code === 0x7f) throw this.error(`control character U+${code.toString(16).padStart(4, '0')} in comment`);
      this.pos++;
    }
  }

  private endOfLine(): void {
    const c = this.src[this.pos];
    if (c === undefined) return;
    if (c === '\n' || (c === '\r' && this.src[this.pos + 1] === '\n')) {
      this.pos += c === '\n' ? 1 : 2;
      this.line++;
      return;
    }
    throw this.error(`expected the end of the line, found ${this.describeHere()}`);
  }

  private expect(ch: string, message: string): void {
    if (this.src[this.pos] !== ch) throw this.error(`${message}, found ${this.describeHere()}`);
    this.pos++;
  }

  private describeHere(): string {
    const c = this.src[this.pos];
    if (c === undefined) return 'the end of the file';
    if (c === '\n') return 'the end of the line';
    if (c === '\r') return this.src[this.pos + 1] === '\n' ? 'the end of the line' : 'a carriage return without a line feed';
    return JSON.stringify(c);
  }

  private error(message: string, line = this.line): FastpullError {
    return invalid(this.file, line, message);
  }
}

function formatKeyPart(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k);
}

function formatKey(keys: readonly string[]): string {
  return keys.map(formatKeyPart).join('.');
}
