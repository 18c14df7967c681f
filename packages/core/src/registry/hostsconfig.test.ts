import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FastpullError, isFastpullError } from '../errors.js';
import { DEFAULT_DIAL_TIMEOUT_MS, hostDirCandidates, hostsFor, loadHostsConfig, parseGoDuration, parseHostsConfig, type RegistryHost } from './hostsconfig.js';

let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'fastpull-hosts-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function configDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(root, 'certs.d-'));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return dir;
}

const parse = (text: string, registry = 'docker.io') => parseHostsConfig(text, { registry, baseDir: '/etc/containerd/certs.d/x', file: '/cfg/hosts.toml' });

function parseError(text: string): FastpullError {
  try {
    parse(text);
  } catch (e) {
    expect(isFastpullError(e)).toBe(true);
    expect((e as FastpullError).code).toBe('INVALID_ARGUMENT');
    return e as FastpullError;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be refused`);
}

const urls = (hosts: readonly RegistryHost[]) => hosts.map((h) => h.url.href);

describe('host directory lookup', () => {
  it('tries host_port_, then host:port, then _default', () => {
    expect(hostDirCandidates('127.0.0.1:5000')).toEqual(['127.0.0.1_5000_', '127.0.0.1:5000', '_default']);
    expect(hostDirCandidates('[::1]:5000')).toEqual(['[::1]_5000_', '[::1]:5000', '_default']);
    expect(hostDirCandidates('docker.io')).toEqual(['docker.io', '_default']);
    expect(() => hostDirCandidates('..')).toThrow(FastpullError);
    expect(() => hostDirCandidates('a/../../etc')).toThrow(FastpullError);
  });

  it('uses the first directory that exists', async () => {
    const toml = (mirror: string) => `[host."https://${mirror}"]\n`;
    const dir = await configDir({
      'reg.example_5000_/hosts.toml': toml('underscore'),
      'reg.example:5000/hosts.toml': toml('colon'),
      'other.example:5000/hosts.toml': toml('colon-only'),
      '_default/hosts.toml': toml('default'),
    });
    expect(urls((await loadHostsConfig(dir, 'reg.example:5000'))!)).toEqual(['https://underscore/v2', 'https://reg.example:5000/v2']);
    expect(urls((await loadHostsConfig(dir, 'other.example:5000'))!)).toEqual(['https://colon-only/v2', 'https://other.example:5000/v2']);
    expect(urls((await loadHostsConfig(dir, 'ghcr.io'))!)).toEqual(['https://default/v2', 'https://ghcr.io/v2']);
    expect(urls((await loadHostsConfig(dir, 'docker.io'))!)).toEqual(['https://default/v2', 'https://registry-1.docker.io/v2']);
  });

  it('returns undefined when no directory applies, or the config dir is missing', async () => {
    const dir = await configDir({ 'ghcr.io/hosts.toml': '' });
    expect(await loadHostsConfig(dir, 'quay.io')).toBeUndefined();
    expect(await loadHostsConfig(join(root, 'does-not-exist'), 'quay.io')).toBeUndefined();
  });

  it('reads a directory without hosts.toml the docker certs.d way', async () => {
    const dir = await configDir({
      'reg.example:5000/ca.crt': 'x',
      'reg.example:5000/b-ca.crt': 'x',
      'reg.example:5000/client.cert': 'x',
      'reg.example:5000/client.key': 'x',
      'reg.example:5000/lonely.cert': 'x',
      '_default/hosts.toml': '[host."https://default"]\n',
    });
    const d = join(dir, 'reg.example:5000');
    const hosts = (await loadHostsConfig(dir, 'reg.example:5000'))!;
    expect(hosts).toHaveLength(1);
    expect(hosts[0]!.url.href).toBe('https://reg.example:5000/v2');
    expect(hosts[0]!.isServer).toBe(true);
    expect(hosts[0]!.ca).toEqual([join(d, 'b-ca.crt'), join(d, 'ca.crt')]);
    expect(hosts[0]!.client).toEqual([[join(d, 'client.cert'), join(d, 'client.key')], [join(d, 'lonely.cert')]]);
  });

  it('resolves relative ca and client paths against the host directory', async () => {
    const dir = await configDir({ 'ghcr.io/hosts.toml': 'ca = "ca.pem"\nclient = [["c.pem", "/abs/k.pem"]]\n' });
    const [server] = (await loadHostsConfig(dir, 'ghcr.io'))!;
    expect(server!.ca).toEqual([join(dir, 'ghcr.io', 'ca.pem')]);
    expect(server!.client).toEqual([[join(dir, 'ghcr.io', 'c.pem'), '/abs/k.pem']]);
  });

  it('names the file and key path of a wrong value, and the file, line and column of bad TOML', async () => {
    const dir = await configDir({
      'ghcr.io/hosts.toml': '# mirrors\n[host."https://m:5000"]\n  capabilities = ["pull", "fetch"]\n',
      'quay.io/hosts.toml': '# mirrors\n[host."https://m"]\n  capabilities = ["pull" "resolve"]\n',
    });
    const failure = (registry: string) =>
      loadHostsConfig(dir, registry).then(
        () => undefined,
        (err: unknown) => err as FastpullError,
      );
    const file = join(dir, 'ghcr.io', 'hosts.toml');
    const e = await failure('ghcr.io');
    expect(e?.code).toBe('INVALID_ARGUMENT');
    expect(e?.message).toBe(`${file}: host."https://m:5000".capabilities: unknown capability "fetch" (known: pull, resolve, push)`);
    expect(e?.details).toEqual({ file, key: 'host."https://m:5000".capabilities' });
    const bad = join(dir, 'quay.io', 'hosts.toml');
    const syntax = await failure('quay.io');
    expect(syntax?.code).toBe('INVALID_ARGUMENT');
    expect(syntax?.message.startsWith(`${bad}:3:`), syntax?.message).toBe(true);
    expect(syntax?.message).toContain(': invalid TOML: ');
    expect(syntax?.details).toMatchObject({ file: bad, line: 3 });
  });

  it('honours an aborted signal', async () => {
    const dir = await configDir({ 'ghcr.io/hosts.toml': '' });
    await expect(loadHostsConfig(dir, 'ghcr.io', { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'ABORTED' });
  });
});

describe('hosts.toml keys', () => {
  it('defaults the server to the registry itself, after the mirrors in file order', () => {
    const hosts = parse('[host."https://b.example"]\n[host."https://a.example"]\n[host."c.example:5000"]\n');
    expect(urls(hosts)).toEqual(['https://b.example/v2', 'https://a.example/v2', 'https://c.example:5000/v2', 'https://registry-1.docker.io/v2']);
    expect(hosts.map((h) => h.isServer)).toEqual([false, false, false, true]);
    for (const h of hosts) {
      expect([...h.capabilities].sort()).toEqual(['pull', 'push', 'resolve']);
      expect(h).toMatchObject({ ca: [], client: [], skipVerify: false, headers: {}, dialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS });
    }
    expect(urls(parse('', 'ghcr.io'))).toEqual(['https://ghcr.io/v2']);
    // Loopback registries speak plain HTTP, as everywhere in fastpull.
    expect(urls(parse('', '127.0.0.1:5000'))).toEqual(['http://127.0.0.1:5000/v2']);
    expect(urls(parseHostsConfig('', { registry: 'reg.internal', baseDir: '/x', plainHttp: true }))).toEqual(['http://reg.internal/v2']);
  });

  it('reads server with the top-level keys applying to it', () => {
    const hosts = parse(
      [
        'server = "https://registry-1.docker.io"',
        'capabilities = ["pull", "resolve"]',
        'skip_verify = true',
        'dial_timeout = "5s"',
        'ca = ["/a.pem", "/b.pem"]',
        '[header]',
        'x-via = "fastpull"',
      ].join('\n'),
    );
    expect(hosts).toHaveLength(1);
    expect(hosts[0]).toMatchObject({ isServer: true, skipVerify: true, dialTimeoutMs: 5000, ca: ['/a.pem', '/b.pem'], headers: { 'x-via': ['fastpull'] } });
    expect(hosts[0]!.url.href).toBe('https://registry-1.docker.io/v2');
    expect([...hosts[0]!.capabilities]).toEqual(['pull', 'resolve']);
  });

  it('appends /v2 unless the path has it or override_path is set', () => {
    const hosts = parse(
      [
        '[host."https://a.example/v2"]',
        '[host."https://b.example/prefix/"]',
        '[host."https://c.example/v2/proxy"]',
        '  override_path = true',
        '[host."http://d.example:8080"]',
        '  override_path = true',
        'server = "https://ignored-here"',
      ].join('\n'),
    );
    // `server` after [host...] belongs to that table: it is not the top-level server.
    expect(urls(hosts)).toEqual([
      'https://a.example/v2',
      'https://b.example/prefix/v2',
      'https://c.example/v2/proxy',
      'http://d.example:8080/',
      'https://registry-1.docker.io/v2',
    ]);
  });

  it('reads capabilities, ca, client, skip_verify, header and dial_timeout per host', () => {
    const [a, b, c] = parse(
      [
        '[host."https://a.example"]',
        '  capabilities = ["pull"]',
        '  ca = "/etc/certs/a.pem"',
        '  client = "/etc/certs/client.pem"',
        '  skip_verify = true',
        '  dial_timeout = "1m30s"',
        '[host."https://a.example".header]',
        '  x-one = "1"',
        '  x-many = ["a", "b"]',
        '[host."https://b.example"]',
        '  capabilities = ["PULL", "Resolve", "push"]',
        '  client = ["/c1.pem", ["/c2.pem", "/k2.pem"]]',
        '  skip_verify = false',
        '[host."https://c.example"]',
        '  capabilities = []',
        '  client = [["/c.pem", "k.pem"]]',
      ].join('\n'),
    );
    expect(a).toMatchObject({
      ca: ['/etc/certs/a.pem'],
      client: [['/etc/certs/client.pem']],
      skipVerify: true,
      dialTimeoutMs: 90_000,
      headers: { 'x-one': ['1'], 'x-many': ['a', 'b'] },
      isServer: false,
    });
    expect([...a!.capabilities]).toEqual(['pull']);
    expect([...b!.capabilities].sort()).toEqual(['pull', 'push', 'resolve']);
    expect(b!.client).toEqual([['/c1.pem'], ['/c2.pem', '/k2.pem']]);
    expect(b!.skipVerify).toBe(false);
    // An empty list means every capability, as in containerd.
    expect([...c!.capabilities].sort()).toEqual(['pull', 'push', 'resolve']);
    expect(c!.client).toEqual([['/c.pem', '/etc/containerd/certs.d/x/k.pem']]);
  });

  it('reads a Spegel file', () => {
    // As Spegel writes it (go-toml output: literal strings).
    const hosts = parse(
      [
        "server = 'https://registry-1.docker.io'",
        '',
        "[host.'http://127.0.0.1:30020']",
        "capabilities = ['pull', 'resolve']",
        "dial_timeout = '200ms'",
        '',
        "[host.'http://127.0.0.1:30021']",
        "capabilities = ['pull', 'resolve']",
        "dial_timeout = '200ms'",
        '',
      ].join('\n'),
    );
    expect(urls(hosts)).toEqual(['http://127.0.0.1:30020/v2', 'http://127.0.0.1:30021/v2', 'https://registry-1.docker.io/v2']);
    expect(hosts.map((h) => h.dialTimeoutMs)).toEqual([200, 200, DEFAULT_DIAL_TIMEOUT_MS]);
    expect([...hosts[0]!.capabilities]).toEqual(['pull', 'resolve']);
    expect(urls(hostsFor(hosts, 'resolve'))).toEqual(urls(hosts));
  });

  it('reads a Dragonfly file', () => {
    const hosts = parse(
      [
        'server = "https://index.docker.io"',
        '',
        '[host."http://127.0.0.1:4001"]',
        '  capabilities = ["pull", "resolve"]',
        '',
        '  [host."http://127.0.0.1:4001".header]',
        '    X-Dragonfly-Registry = ["https://index.docker.io"]',
      ].join('\r\n'),
    );
    expect(urls(hosts)).toEqual(['http://127.0.0.1:4001/v2', 'https://index.docker.io/v2']);
    expect(hosts[0]!.headers).toEqual({ 'X-Dragonfly-Registry': ['https://index.docker.io'] });
    expect(hosts[1]!.headers).toEqual({});
  });

  it('filters hosts by what an operation needs', () => {
    const hosts = parse(
      [
        '[host."https://blobs-only"]',
        'capabilities = ["pull"]',
        '[host."https://resolve-only"]',
        'capabilities = ["resolve"]',
        '[host."https://push-only"]',
        'capabilities = ["push"]',
        '[host."https://both"]',
        'capabilities = ["pull", "resolve"]',
      ].join('\n'),
    );
    expect(urls(hostsFor(hosts, 'resolve'))).toEqual(['https://both/v2', 'https://registry-1.docker.io/v2']);
    expect(urls(hostsFor(hosts, 'pull'))).toEqual(['https://blobs-only/v2', 'https://both/v2', 'https://registry-1.docker.io/v2']);
  });

  it('parses Go durations', () => {
    expect(parseGoDuration('200ms')).toBe(200);
    expect(parseGoDuration('30s')).toBe(30_000);
    expect(parseGoDuration('1m')).toBe(60_000);
    expect(parseGoDuration('1.5s')).toBe(1500);
    expect(parseGoDuration('1h2m3s')).toBe(3_723_000);
    expect(parseGoDuration('500us')).toBeCloseTo(0.5);
    expect(parseGoDuration('0')).toBe(0);
    for (const bad of ['', '10', 's', '1x', '-1s', '1 s', 'ms1']) expect(parseGoDuration(bad), bad).toBeUndefined();
  });
});

describe('malformed hosts.toml', () => {
  // Values of the wrong kind: the error names the key path as the file spells it.
  const wrong: Array<[string, string, string, string]> = [
    ['unknown capability', '[host."https://m"]\ncapabilities = ["pull", "pul"]', 'host."https://m".capabilities', 'unknown capability "pul"'],
    ['capabilities not an array', '[host."https://mirror:5000"]\ncapabilities = "pull"', 'host."https://mirror:5000".capabilities', 'want an array of strings'],
    ['top-level capabilities of numbers', 'server = "https://r"\ncapabilities = [1]', 'capabilities', 'want an array of strings'],
    ['ca of the wrong type', '[host."https://m"]\nca = true', 'host."https://m".ca', 'want a string or an array of strings'],
    [
      'client pair of three',
      '\n[host."https://m"]\nclient = [["a", "b", "c"]]',
      'host."https://m".client',
      'want a path, an array of paths, or an array of [cert, key] pairs',
    ],
    ['client as a table', '[host."https://m"]\nclient = { cert = "a" }', 'host."https://m".client', 'want a path'],
    ['skip_verify as a string', 'skip_verify = "true"', 'skip_verify', 'want true or false'],
    ['override_path as a string', '[host."https://m"]\noverride_path = "yes"', 'host."https://m".override_path', 'want true or false'],
    ['header not a table', '[host."https://m"]\nheader = "x"', 'host."https://m".header', 'want a table'],
    ['header value of the wrong type', '[host."https://m".header]\nx-a = [true]', 'host."https://m".header.x-a', 'want a string or an array of strings'],
    ['header name with a space', '[host."https://m".header]\n"x a" = "1"', 'host."https://m".header."x a"', 'not a valid HTTP header name'],
    ['header value with a newline', '[host."https://m".header]\nx-a = "1\\r\\nx-b: 2"', 'host."https://m".header.x-a', 'CR, LF or NUL'],
    ['bad duration', '[host."https://m"]\ndial_timeout = "200"', 'host."https://m".dial_timeout', 'want a positive duration'],
    ['zero duration', '[host."https://m"]\ndial_timeout = "0s"', 'host."https://m".dial_timeout', 'want a positive duration'],
    ['duration as a number', '[host."https://m"]\ndial_timeout = 200', 'host."https://m".dial_timeout', 'want a positive duration'],
    ['ftp host', '\n\n[host."ftp://m"]', 'host."ftp://m"', 'is not an http(s) URL'],
    ['URL with credentials', '[host."https://u:p@m"]', 'host."https://u:p@m"', 'is not an http(s) URL'],
    ['server without a host', 'server = "https://"', 'server', 'is not an http(s) URL'],
    ['server not a string', 'server = ["https://a"]', 'server', 'want a string'],
    ['host not a table', 'host = "https://m"', 'host', 'want a table of [host."<url>"] tables'],
    ['an array of host tables', '[[host]]\nserver = "https://m"', 'host', 'want a table of [host."<url>"] tables'],
    ['host entry not a table', '[host]\n"https://m" = true', 'host."https://m"', 'want a table'],
  ];
  it.each(wrong)('refuses %s, naming file and key path', (_name, text, key, fragment) => {
    const e = parseError(text);
    expect(e.message.startsWith(`/cfg/hosts.toml: ${key}: `), e.message).toBe(true);
    expect(e.message).toContain(fragment);
    expect(e.details).toEqual({ file: '/cfg/hosts.toml', key });
  });

  // TOML that does not parse: the error names the line and column where the parser stopped.
  const syntax: Array<[string, string, number]> = [
    ['unterminated string', 'server = "https://a', 1],
    ['unquoted string', 'server = https://a', 1],
    ['duplicate key', 'server = "https://a"\n# again\nserver = "https://b"', 3],
    ['table defined twice', '[host."https://m"]\n[host."https://n"]\n[host."https://m"]', 3],
    ['value then table', 'host = true\n[host."https://m"]', 2],
    ['missing =', '[host."https://m"]\ncapabilities ["pull"]', 2],
    ['missing value', 'server =\n', 1],
    ['garbage after value', 'server = "https://a" x', 1],
    ['unclosed header', '[host."https://m"\n', 1],
    ['unclosed array', 'ca = ["a", "b"\nserver = "x"', 2],
    ['bad escape', 'server = "a\\qb"', 1],
    ['control character', 'server = "a\u0001b"', 1],
    ['lone carriage return', 'server = "a"\rskip_verify = true', 1],
    ['empty key', '= "a"', 1],
    ['arrays nested past 16', `ca = ${'['.repeat(17)}${']'.repeat(17)}`, 1],
  ];
  it.each(syntax)('refuses %s, naming file, line and column', (_name, text, line) => {
    const e = parseError(text);
    expect(e.message, e.message).toMatch(new RegExp(`^/cfg/hosts\\.toml:${line}:\\d+: invalid TOML: [^\\n]+$`));
    expect(e.details).toMatchObject({ file: '/cfg/hosts.toml', line });
    expect(typeof e.details.column).toBe('number');
  });

  it('ignores an unknown key dotted very deep, or refuses it as INVALID_ARGUMENT where the stack runs out', () => {
    const text = `${'a.'.repeat(100_000)}a = 1`;
    try {
      expect(urls(parse(text))).toEqual(['https://registry-1.docker.io/v2']);
    } catch (e) {
      expect(isFastpullError(e), String(e)).toBe(true);
      expect((e as FastpullError).message).toBe('/cfg/hosts.toml: invalid TOML: keys nested too deep');
    }
  });
});

describe('TOML that containerd reads', () => {
  it('reads inline tables, multi-line and literal strings, dotted keys, comments and a byte order mark', () => {
    const hosts = parse(
      [
        '\uFEFF# leading comment',
        "server = '''https://registry-1.docker.io'''",
        'host."https://a.example" = { capabilities = ["pull"], header = { x-a = "1" } }',
        '[host."https://b.example"]',
        'ca = [ # comment in array',
        '  "/x.pem",',
        '',
        '  """/y.pem""",  # another',
        ']',
        'header.X-Tab = "tab\\there \\u00e9"',
        "client = [['C:\\no-escapes', '/k.pem']]",
      ].join('\n'),
    );
    expect(urls(hosts)).toEqual(['https://a.example/v2', 'https://b.example/v2', 'https://registry-1.docker.io/v2']);
    expect([...hosts[0]!.capabilities]).toEqual(['pull']);
    expect(hosts[0]!.headers).toEqual({ 'x-a': ['1'] });
    expect(hosts[1]!.ca).toEqual(['/x.pem', '/y.pem']);
    expect(hosts[1]!.headers).toEqual({ 'X-Tab': ['tab\there é'] });
    expect(hosts[1]!.client).toEqual([['/etc/containerd/certs.d/x/C:\\no-escapes', '/k.pem']]);
  });

  it('keeps host tables in file order, however they are written', () => {
    const hosts = parse(
      [
        '[host."https://z.example".header]',
        'x-a = "1"',
        '[host."https://a.example"]',
        '[host."https://m.example"]',
        '[host."https://z.example"]',
        'capabilities = ["pull"]',
      ].join('\n'),
    );
    // A host first named by its sub-table takes its place in the order there.
    expect(urls(hosts)).toEqual(['https://z.example/v2', 'https://a.example/v2', 'https://m.example/v2', 'https://registry-1.docker.io/v2']);
    expect(hosts[0]!.headers).toEqual({ 'x-a': ['1'] });
    expect([...hosts[0]!.capabilities]).toEqual(['pull']);
  });

  it('ignores keys it does not know, of any TOML type', () => {
    const hosts = parse('retries = 3\nwhen = 1979-05-27\n[host."https://m"]\nweight = 1.5\nextra = { a = [1, 2] }\n');
    expect(urls(hosts)).toEqual(['https://m/v2', 'https://registry-1.docker.io/v2']);
  });
});
