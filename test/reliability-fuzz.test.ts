// Reliability campaign 4, hostile input: property-based fuzzing (fast-check) of every parser that
// reads outside input. For random input and for near-valid input (valid documents mutated), each
// parser returns a result that satisfies its invariants (round-trips where they exist) or throws a
// FastpullError with its documented code (docs/errors.md); never another exception, never past a
// CPU-time ceiling per input. Layers go through the real applier into a snapshot directory inside a
// sentinel tree that must not change. Inputs that once failed are in test/fuzz/regressions.ts and
// run every time.
//
// Default: fixed seeds, about a minute. FASTPULL_RELIABILITY_LONG=1: 25 times the runs.
// FASTPULL_FUZZ_SEED=N: another seed (printed with every failure, with fast-check's own seed and path).
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  formatPlatform,
  formatReference,
  isDigest,
  normalizePlatform,
  parseDigest,
  parsePlatform,
  parseReference,
  selectPlatform,
  sha256Digest,
  validateDigest,
  type Platform,
} from '@fastpull/core';
import {
  dockerConfigCredentials,
  fetchBlob,
  FetchScheduler,
  parseChallenges,
  parseHostsConfig,
  parseImageConfig,
  parseManifest,
  RegistryClient,
} from '@fastpull/core/registry';
import { readConfigFile, resolveConfig } from '@fastpull/daemon';
import { anyString, check, LONG, params, parseAsync, parseSync, show, tallyReport } from './fuzz/harness.js';
import {
  challengeArb,
  configBytesArb,
  contentTypeArb,
  daemonTomlArb,
  digestStringArb,
  dockerConfigArb,
  formatChallenges,
  hostsTomlArb,
  manifestBytesArb,
  referenceArb,
  secretArb,
} from './fuzz/gen.js';
import { REGRESSIONS } from './fuzz/regressions.js';
import { chunked, chunkingArb, tarArb, type Aim } from './fuzz/tar.js';
import { TarReader } from '../packages/core/src/unpack/tar/tarreader.js';
import { unpackLayer } from '../packages/core/src/unpack/layer.js';

/**
 * CPU time a pure parser may use per input (the slowest real input takes a few ms; a blow-up is far
 * beyond it). CPU time, not wall time: on a loaded machine the wait for a core is not the parser's.
 */
const PURE_CEILING_MS = 500;
/** CPU time one layer applied to disk, or one HTTP exchange, may use; a hang is cut at 20 times it in wall time. */
const IO_CEILING_MS = 5_000;
// Wall time only cuts a hang (vitest.config.ts's default at least): the limits that matter are CPU time above.
const BUDGET = (ms: number) => Math.max(300_000, LONG ? ms * 30 : ms);

const tmp = mkdtempSync(join(tmpdir(), 'fastpull-fuzz-'));
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
  console.log(`hostile input, inputs tried per parser:\n${tallyReport()}`);
});

// --- references and digests ---

const REF_CODES = ['INVALID_REFERENCE'] as const;

function checkReference(input: string): void {
  const r = parseSync('reference', REF_CODES, PURE_CEILING_MS, input, () => parseReference(input));
  if (!r.ok) return;
  const ref = r.value;
  expect(ref.tag !== undefined || ref.digest !== undefined, show(input)).toBe(true);
  if (ref.digest !== undefined) expect(isDigest(ref.digest), show(input)).toBe(true);
  expect(`${ref.registry}/${ref.repository}`.length).toBeLessThanOrEqual(255);
  for (const c of ref.repository.split('/')) expect(c, show(input)).toMatch(/^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/);
  // The canonical form parses back to the same reference, and is a fixed point.
  const canonical = formatReference(ref);
  const again = parseSync('reference', [], PURE_CEILING_MS, canonical, () => parseReference(canonical));
  if (!again.ok) return;
  expect(again.value, `round trip of ${show(input)} via ${canonical}`).toEqual(ref);
  expect(formatReference(again.value)).toBe(canonical);
}

function checkDigest(input: string): void {
  const r = parseSync('digest', ['INVALID_DIGEST'], PURE_CEILING_MS, input, () => parseDigest(input));
  expect(isDigest(input), show(input)).toBe(r.ok);
  if (!r.ok) return;
  expect(r.value.digest).toBe(input);
  expect(`${r.value.algorithm}:${r.value.hex}`).toBe(input);
  expect(r.value.hex).toMatch(r.value.algorithm === 'sha256' ? /^[0-9a-f]{64}$/ : /^[0-9a-f]{128}$/);
  expect(validateDigest(input)).toBe(input);
}

describe('references', () => {
  it('parse to a reference that round-trips through its canonical form, or fail INVALID_REFERENCE', { timeout: BUDGET(30_000) }, async () => {
    await check(
      'near-valid references',
      fc.property(referenceArb, (s) => void checkReference(s)),
      params(1, 8000),
    );
    await check(
      'random strings as references',
      fc.property(anyString(300), (s) => void checkReference(s)),
      params(2, 4000),
    );
    await check(
      'long references',
      fc.property(fc.string({ minLength: 200, maxLength: 5000 }), (s) => void checkReference(s)),
      params(3, 100),
    );
  });
});

describe('digests', () => {
  it('validate exactly when parseDigest accepts, or fail INVALID_DIGEST', { timeout: BUDGET(20_000) }, async () => {
    await check(
      'digest-shaped strings',
      fc.property(digestStringArb, (s) => void checkDigest(s)),
      params(10, 6000),
    );
    await check(
      'random strings as digests',
      fc.property(anyString(200), (s) => void checkDigest(s)),
      params(11, 1000),
    );
    await check(
      'computed digests validate',
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        const d = sha256Digest(b);
        checkDigest(d);
        expect(isDigest(d)).toBe(true);
      }),
      params(12, 500),
    );
  });
});

// --- manifests, indexes, configs, platforms ---

const MANIFEST_CODES = ['INVALID_MANIFEST', 'UNSUPPORTED_MEDIA_TYPE'] as const;
const platforms: Platform[] = [
  { os: 'linux', architecture: 'amd64' },
  { os: 'linux', architecture: 'arm64' },
  { os: 'linux', architecture: 'arm', variant: 'v6' },
  { os: 'windows', architecture: 'amd64' },
];

function checkManifest(bytes: Buffer, contentType: string | undefined): void {
  const input = { body: bytes.toString('latin1').slice(0, 3000), contentType };
  const r = parseSync('manifest/index', MANIFEST_CODES, PURE_CEILING_MS, input, () => parseManifest(bytes, contentType, 'fuzz'));
  if (!r.ok) return;
  const descs = r.value.kind === 'index' ? r.value.index.manifests : [r.value.manifest.config, ...r.value.manifest.layers];
  for (const d of descs) {
    expect(isDigest(d.digest), show(input)).toBe(true);
    expect(Number.isSafeInteger(d.size) && d.size >= 0, show(input)).toBe(true);
    expect(typeof d.mediaType).toBe('string');
    if (d.platform) {
      expect(typeof d.platform.os).toBe('string');
      expect(typeof d.platform.architecture).toBe('string');
      // Normalising a platform an index names never throws, and formats to something parsePlatform reads back.
      const n = normalizePlatform(d.platform);
      expect(normalizePlatform(n)).toEqual(n);
    }
  }
  if (r.value.kind === 'index') {
    for (const want of platforms) {
      const picked = parseSync('platform selection', [], PURE_CEILING_MS, input, () =>
        selectPlatform(want, r.value.kind === 'index' ? r.value.index.manifests : []),
      );
      if (picked.ok && picked.value) expect(r.value.index.manifests).toContain(picked.value);
    }
  }
}

function checkConfig(bytes: Buffer): void {
  const input = bytes.toString('latin1');
  const r = parseSync('image config', MANIFEST_CODES, PURE_CEILING_MS, input, () => parseImageConfig(bytes, 'fuzz config'));
  if (!r.ok) return;
  for (const d of r.value.rootfs.diff_ids) expect(isDigest(d)).toBe(true);
  expect(typeof r.value.architecture).toBe('string');
  expect(typeof r.value.os).toBe('string');
}

function checkPlatform(spec: string): void {
  const r = parseSync('platform', ['INVALID_ARGUMENT'], PURE_CEILING_MS, spec, () => parsePlatform(spec));
  if (!r.ok) return;
  const text = formatPlatform(r.value);
  const again = parseSync('platform', [], PURE_CEILING_MS, text, () => parsePlatform(text));
  if (again.ok) expect(again.value, `${show(spec)} via ${text}`).toEqual(r.value);
}

describe('manifests and indexes', () => {
  it('parse to descriptors with valid digests and sizes, or fail INVALID_MANIFEST / UNSUPPORTED_MEDIA_TYPE', { timeout: BUDGET(30_000) }, async () => {
    await check(
      'manifest and index documents',
      fc.property(manifestBytesArb, contentTypeArb, (b, ct) => void checkManifest(b, ct)),
      params(20, 6000),
    );
    await check(
      'image configs',
      fc.property(configBytesArb, (b) => void checkConfig(b)),
      params(21, 3000),
    );
    const platformArb = fc.oneof(
      fc
        .tuple(
          fc.constantFrom('linux', 'Linux', 'windows', ''),
          fc.constantFrom('amd64', 'x86_64', 'aarch64', 'arm', 'armhf', 'arm64', 'AMD64', ''),
          fc.option(fc.constantFrom('v7', '8', 'V8', 'v1', '5', '', 'v8/x')),
        )
        .map(([o, a, v]) => [o, a, ...(v === null ? [] : [v])].join('/')),
      anyString(40),
    );
    await check(
      'platform specs',
      fc.property(platformArb, (s) => void checkPlatform(s)),
      params(22, 3000),
    );
  });
});

// --- WWW-Authenticate ---

describe('WWW-Authenticate headers', () => {
  it('never throw, and give back every challenge and parameter a registry wrote', { timeout: BUDGET(20_000) }, async () => {
    await check(
      'random headers',
      fc.property(anyString(400), (h) => {
        const r = parseSync('WWW-Authenticate', [], PURE_CEILING_MS, h, () => parseChallenges(h));
        if (!r.ok) return;
        for (const c of r.value) {
          expect(c.scheme).toMatch(/^[a-z0-9!#$%&'*+.^_`|~-]+$/);
          for (const k of Object.keys(c.params)) expect(k).toBe(k.toLowerCase());
        }
      }),
      params(30, 6000),
    );
    await check(
      'well-formed headers round-trip',
      fc.property(fc.array(challengeArb, { minLength: 1, maxLength: 3 }), (chs) => {
        const header = formatChallenges(chs);
        const r = parseSync('WWW-Authenticate', [], PURE_CEILING_MS, header, () => parseChallenges(header));
        if (!r.ok) return;
        expect(
          r.value.map((c) => c.scheme),
          header,
        ).toEqual(chs.map((c) => c.scheme.toLowerCase()));
        chs.forEach((c, i) => {
          const want: Record<string, string> = {};
          for (const p of c.params) Object.defineProperty(want, p.key.toLowerCase(), { value: p.value, enumerable: true, configurable: true, writable: true });
          const got = r.value[i]!.params;
          expect(Object.keys(got).sort(), header).toEqual(Object.keys(want).sort());
          for (const k of Object.keys(want)) expect(Object.getOwnPropertyDescriptor(got, k)?.value, `${header}: ${k}`).toBe(want[k]);
        });
      }),
      params(31, 6000),
    );
    await check(
      'huge headers stay bounded',
      fc.property(fc.constantFrom('"', '\\', ',', 'a=', 'Bearer ', 'x="\\'), fc.integer({ min: 1000, max: 40_000 }), (unit, n) => {
        const h = unit.repeat(Math.ceil(n / unit.length));
        parseSync('WWW-Authenticate', [], PURE_CEILING_MS, `${h.slice(0, 60)}... (${h.length})`, () => parseChallenges(h));
      }),
      params(32, 60),
    );
  });
});

// --- hosts.toml ---

function checkHostsToml(text: string): void {
  const r = parseSync('hosts.toml', ['INVALID_ARGUMENT'], PURE_CEILING_MS, text, () =>
    parseHostsConfig(text, { registry: 'registry.example:5000', baseDir: '/etc/containerd/certs.d/registry.example:5000' }),
  );
  if (!r.ok) {
    // Errors name the file and where in it: the line and column of TOML that does not parse, or
    // the key path of a value of the wrong kind.
    expect(r.error.message, show(text)).toMatch(
      /^\/etc\/containerd\/certs\.d\/registry\.example:5000\/hosts\.toml(?::\d+:\d+: invalid TOML: |: invalid TOML: keys nested too deep$|: (?:server|host|capabilities|ca|client|skip_verify|override_path|header|dial_timeout)\b.*?: )/,
    );
    return;
  }
  expect(r.value.length).toBeGreaterThan(0);
  expect(r.value.at(-1)!.isServer).toBe(true);
  for (const h of r.value) {
    expect(['http:', 'https:'], show(text)).toContain(h.url.protocol);
    expect(h.url.host).not.toBe('');
    for (const c of h.capabilities) expect(['pull', 'resolve', 'push']).toContain(c);
    for (const p of [...h.ca, ...h.client.flat()]) expect(p!.startsWith('/'), show(text)).toBe(true);
    // A dial timeout is a whole number of milliseconds a timer can hold (Node clamps longer ones to 1 ms).
    expect(
      Number.isSafeInteger(h.dialTimeoutMs) && h.dialTimeoutMs >= 1 && h.dialTimeoutMs <= 2 ** 31 - 1,
      `dialTimeoutMs ${h.dialTimeoutMs} from ${show(text)}`,
    ).toBe(true);
    expect(Object.getPrototypeOf(h.headers) === Object.prototype || Object.getPrototypeOf(h.headers) === null, show(text)).toBe(true);
    for (const [name, values] of Object.entries(h.headers)) {
      expect(name).toMatch(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/);
      for (const v of values) expect(v, show(text)).not.toMatch(/[\r\n\0]/);
    }
  }
}

describe('hosts.toml', () => {
  it('parses to usable hosts, or fails INVALID_ARGUMENT naming file and line or key', { timeout: BUDGET(30_000) }, async () => {
    await check(
      'near-valid hosts.toml',
      fc.property(hostsTomlArb, (t) => void checkHostsToml(t)),
      params(40, 6000),
    );
    await check(
      'random text as hosts.toml',
      fc.property(anyString(300), (t) => void checkHostsToml(t)),
      params(41, 3000),
    );
    await check(
      'deep and long hosts.toml',
      fc.property(
        fc.constantFrom('', 'a = ', 'client = ', 'x = [', '[host."https://m"]\nca = '),
        fc.constantFrom('[', 'a.', '"', '[[', 'a = [', '#', '\n', 'a = "\\', '["a", ', '[[]', '{a='),
        fc.integer({ min: 1000, max: 200_000 }),
        (prefix, unit, n) => void checkHostsToml(prefix + unit.repeat(n)),
      ),
      params(42, 40),
    );
  });
});

// --- docker config.json ---

describe('docker config.json', () => {
  it('gives credentials, or fails INVALID_ARGUMENT / UNAUTHORIZED without the secret in message, details or causes', { timeout: BUDGET(30_000) }, async () => {
    let n = 0;
    await check(
      'config.json files',
      fc.asyncProperty(
        secretArb.chain((s) => fc.tuple(fc.constant(s), dockerConfigArb(s))),
        fc.constantFrom('127.0.0.1:5000', 'docker.io', 'ghcr.io', 'other.example'),
        async ([secret, text], registry) => {
          const path = join(tmp, `config-${n++}.json`);
          writeFileSync(path, text);
          // No helper can be found: PATH is empty and no helper directory is given.
          const provider = dockerConfigCredentials({ configPath: path, env: { PATH: '' }, helperTimeoutMs: 2000 });
          const r = await parseAsync('docker config.json', ['INVALID_ARGUMENT', 'UNAUTHORIZED'], IO_CEILING_MS, { text, registry }, async () =>
            provider(registry),
          );
          rmSync(path, { force: true });
          if (r.ok) {
            if (r.value !== undefined) {
              expect(typeof r.value.username).toBe('string');
              expect(typeof r.value.password).toBe('string');
            }
            return;
          }
          const b64 = Buffer.from(`user:${secret}`).toString('base64');
          let e: unknown = r.error;
          for (let depth = 0; e !== undefined && depth < 10; depth++) {
            const err = e as Error & { details?: unknown };
            const text2 = `${err.message ?? String(e)} ${JSON.stringify(err.details ?? {})}`;
            expect(text2, `secret in error of ${show(text)}`).not.toContain(secret);
            expect(text2).not.toContain(b64);
            e = err.cause;
          }
        },
      ),
      params(50, 2500),
    );
  });
});

// --- fastpulld's config file ---

describe("fastpulld's TOML config", () => {
  it('resolves to checked values, or fails INVALID_ARGUMENT', { timeout: BUDGET(30_000) }, async () => {
    let n = 0;
    await check(
      'fastpulld.toml files',
      fc.property(daemonTomlArb, (text) => {
        const path = join(tmp, `fastpulld-${n++}.toml`);
        writeFileSync(path, text);
        const r = parseSync('fastpulld.toml', ['INVALID_ARGUMENT'], PURE_CEILING_MS, text, () =>
          resolveConfig(readConfigFile(path, true), {}, { HOME: tmp }, tmp),
        );
        rmSync(path, { force: true });
        if (!r.ok) return;
        const c = r.value;
        expect(c.root.startsWith('/') && c.socket.startsWith('/'), show(text)).toBe(true);
        if (c.snapshotterSocket !== undefined) expect(c.snapshotterSocket.startsWith('/'), show(text)).toBe(true);
        if (c.concurrency !== undefined) expect(Number.isSafeInteger(c.concurrency) && c.concurrency >= 1, show(text)).toBe(true);
        if (c.unpackConcurrency !== undefined) expect(Number.isSafeInteger(c.unpackConcurrency) && c.unpackConcurrency >= 1, show(text)).toBe(true);
        if (c.chunkSize !== undefined)
          expect(Number.isSafeInteger(c.chunkSize) && c.chunkSize >= 64 * 1024, `chunkSize ${c.chunkSize} from ${show(text)}`).toBe(true);
        // A timer can hold it (Node clamps longer ones to 1 ms: a huge timeout would mean none).
        expect(
          Number.isFinite(c.shutdownTimeoutMs) && c.shutdownTimeoutMs >= 0 && c.shutdownTimeoutMs <= 2 ** 31 - 1,
          `shutdownTimeoutMs ${c.shutdownTimeoutMs} from ${show(text)}`,
        ).toBe(true);
        expect(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).toContain(c.logLevel);
        expect(typeof c.keepBlobs).toBe('boolean');
        expect(typeof c.sync).toBe('boolean');
        if (c.group !== undefined) expect(typeof c.group).toBe('string');
      }),
      params(60, 4000),
    );
  });
});

// --- Content-Range: the real ranged download against a loopback server whose 206 answers carry fuzzed headers ---

/** A Content-Range value the way the download engine must take it: bytes FIRST-LAST/SIZE or /*, numbers compared exactly. */
function contentRangeMatches(header: string | null, start: number, end: number, size: number): boolean {
  if (header === null) return false;
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header.trim());
  if (!m) return false;
  return BigInt(m[1]!) === BigInt(start) && BigInt(m[2]!) === BigInt(end - 1) && (m[3] === '*' || BigInt(m[3]!) === BigInt(size));
}

describe('Content-Range', () => {
  it(
    'a ranged download completes with the right bytes exactly when every Content-Range matches its request, else fails REGISTRY_ERROR',
    { timeout: BUDGET(60_000) },
    async () => {
      const CHUNK = 64 * 1024;
      const blob = Buffer.alloc(CHUNK * 2 + 1000, 7);
      for (let i = 0; i < blob.length; i++) blob[i] = (i * 31 + 7) & 0xff;
      const digest = sha256Digest(blob);
      // Per range (by its first byte), what the server says: the true header, or this exchange's fuzzed one.
      let fuzzed: { at: number; header: string | null } = { at: -1, header: null };
      const server = createServer((req, res) => {
        const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
        if (!m) {
          res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(blob);
          return;
        }
        const start = Number(m[1]);
        const end = Math.min(Number(m[2]) + 1, blob.length);
        const header = start === fuzzed.at * CHUNK ? fuzzed.header : `bytes ${start}-${end - 1}/${blob.length}`;
        if (header !== null) res.setHeader('content-range', header);
        res.writeHead(206, { 'content-type': 'application/octet-stream' }).end(blob.subarray(start, end));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as AddressInfo).port;
      const client = new RegistryClient({ plainHttp: true });
      const ref = parseReference(`127.0.0.1:${port}/fuzz/app:1`);
      const desc = { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest, size: blob.length };
      const scheduler = new FetchScheduler();
      // Header text as a server can send it (HTTP field values: tab, printable ASCII, obs-text).
      const fieldChar = fc.oneof(
        fc.constantFrom(...'bytes 0123456789-/*,+.eE \t'),
        fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
        fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)),
      );
      const num = (n: number) =>
        fc.oneof(
          fc.constant(String(n)),
          fc.constantFrom(`0${n}`, `${n + 1}`, `${n - 1}`, `-${n}`, `${n}.0`, `+${n}`, '', '18446744073709551616', `${n}0`, String(n).padStart(30, '0')),
        );
      const ranges = [
        [0, CHUNK],
        [CHUNK, 2 * CHUNK],
        [2 * CHUNK, blob.length],
      ] as const;
      const headerArb = fc.integer({ min: 0, max: 2 }).chain((at) => {
        const [s, e] = ranges[at]!;
        return fc.record({
          at: fc.constant(at),
          header: fc.oneof(
            {
              weight: 4,
              arbitrary: fc
                .tuple(
                  fc.constantFrom('bytes ', 'bytes  ', 'Bytes ', 'bytes=', ' bytes ', 'items ', ''),
                  num(s),
                  fc.constantFrom('-', ' - ', '--'),
                  num(e - 1),
                  fc.constantFrom('/', ' /'),
                  fc.oneof(num(blob.length), fc.constantFrom('*', ' *', '**')),
                  fc.constantFrom('', ' ', '\t', ',', ' junk'),
                )
                .map((p) => p.join('')),
            },
            { weight: 2, arbitrary: fc.string({ unit: fieldChar, maxLength: 60 }) },
            {
              weight: 1,
              arbitrary: fc.constantFrom(null, `bytes ${s}-${e - 1}/${blob.length}`, `bytes ${s}-${e - 1}/*`, `  bytes ${s}-${e - 1}/${blob.length}  `),
            },
          ),
        });
      });
      try {
        await check(
          'Content-Range',
          fc.asyncProperty(headerArb, async (f) => {
            fuzzed = f;
            const got = Buffer.alloc(blob.length);
            const sink = { write: async (data: Uint8Array, position: number) => void got.set(data, position) };
            const r = await parseAsync('Content-Range (ranged download)', ['REGISTRY_ERROR'], IO_CEILING_MS, f, () =>
              fetchBlob(client, ref, desc, sink, { chunkSize: CHUNK, attempts: 1, scheduler }),
            );
            const [s, e] = ranges[f.at]!;
            expect(r.ok, `header ${show(f.header)} for bytes ${s}-${e - 1}`).toBe(contentRangeMatches(f.header, s, e, blob.length));
            if (r.ok) expect(got.equals(blob)).toBe(true);
          }),
          params(80, 800),
        );
      } finally {
        await client.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
  );
});

// --- tar: the reader alone, then the real unpacker into a snapshot inside a sentinel tree ---

const TAR_CODES = ['INVALID_LAYER'] as const;
const UNPACK_CODES = ['INVALID_LAYER', 'HOSTILE_LAYER', 'UNSUPPORTED_MEDIA_TYPE'] as const;

/** The sandbox: sentinel files and links around the snapshot directory `dest`, which is the only place a layer may write. */
const sandbox = join(tmp, 'sandbox');
const dest = join(sandbox, 'snapshots', '1', 'fs');
const aim: Aim = { sandbox, canary: `fastpull-fuzz-canary-${process.pid}` };
mkdirSync(join(sandbox, 'victim', 'dir'), { recursive: true });
mkdirSync(dest, { recursive: true });
mkdirSync(join(sandbox, 'snapshots', '2', 'fs'), { recursive: true });
writeFileSync(join(sandbox, 'victim', 'secret.txt'), 'do not touch\n');
writeFileSync(join(sandbox, 'snapshots', '2', 'fs', 'neighbour'), 'another snapshot\n');
symlinkSync(join(sandbox, 'victim'), join(sandbox, 'link-to-victim'));
const blobDir = mkdtempSync(join(tmp, 'blobs-'));

/** Everything in the sandbox but `dest`'s contents: type, mode, owner, size, mtime, link target, content hash. */
function fingerprint(): string {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const st = lstatSync(p);
      let extra = '';
      if (st.isSymbolicLink()) extra = readlinkSync(p);
      else if (st.isFile()) extra = createHash('sha256').update(readFileSync(p)).digest('hex');
      if (p === dest) continue; // the snapshot itself, the one place a layer writes (its root's mode and times too)
      out.push(`${p.slice(sandbox.length)} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.size} ${st.mtimeMs} ${extra}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(sandbox);
  return out.join('\n');
}
const baseline = fingerprint();

/** Fails when anything outside `dest` changed, or the canary name exists in any directory above it. */
function assertNothingOutside(input: unknown): void {
  const now = fingerprint();
  if (now !== baseline) expect.fail(`a layer changed the sandbox outside its snapshot: ${show(input)}\nbefore:\n${baseline}\nafter:\n${now}`);
  for (let d = dirname(dest); ; d = dirname(d)) {
    for (const name of [aim.canary, join('etc', aim.canary)]) if (existsSync(join(d, name))) expect.fail(`a layer wrote ${join(d, name)}: ${show(input)}`);
    if (d === dirname(d)) break;
  }
}

/** Empties the snapshot for the next input (names as bytes: a layer's names need not be UTF-8). */
function emptyDest(): void {
  for (const name of readdirSync(dest, { encoding: 'buffer' })) rmSync(Buffer.concat([Buffer.from(`${dest}/`), name]), { recursive: true, force: true });
  expect(readdirSync(dest)).toEqual([]);
}

/** Reads a whole stream with the tar reader, reading the data of some entries and skipping the rest. */
async function readTar(buf: Buffer, chunk: number, readData: boolean): Promise<number> {
  const reader = new TarReader(chunked(buf, chunk), { what: 'fuzz', maxHeaderBytes: 64 * 1024, maxTarBytes: 1 << 24 });
  let entries = 0;
  let lastOffset = -1;
  for (let e = await reader.next(); e !== null; e = await reader.next()) {
    entries++;
    expect(e.offset).toBeGreaterThan(lastOffset);
    lastOffset = e.offset;
    expect(Number.isSafeInteger(e.size) && e.size >= 0).toBe(true);
    if (e.sparse) for (const r of e.sparse) expect(r.offset >= 0 && r.length >= 0 && r.offset + r.length <= e.size).toBe(true);
    if (readData && entries % 2 === 1) for await (const piece of reader.data()) expect(piece.length).toBeGreaterThan(0);
  }
  await reader.drain();
  expect(reader.bytesRead).toBe(buf.length);
  return entries;
}

describe('tar streams', () => {
  it('the tar reader reads entries or fails INVALID_LAYER, whatever the stream and its chunking', { timeout: BUDGET(60_000) }, async () => {
    await check(
      'tar reader',
      fc.asyncProperty(tarArb(aim), chunkingArb, fc.boolean(), async (buf, chunk, readData) => {
        await parseAsync('tar reader', TAR_CODES, PURE_CEILING_MS, { tar: buf, chunk }, () => readTar(buf, chunk, readData));
      }),
      params(70, 6000),
    );
  });

  it('the unpacker writes only inside the snapshot, and fails INVALID_LAYER / HOSTILE_LAYER leaving it empty', { timeout: BUDGET(90_000) }, async () => {
    let n = 0;
    await check(
      'unpacker',
      fc.asyncProperty(tarArb(aim), fc.constantFrom('tar', 'tar', 'gzip'), async (buf, form) => {
        const blobPath = join(blobDir, `blob-${n++}`);
        writeFileSync(blobPath, form === 'gzip' ? gzipSync(buf) : buf);
        const mediaType = form === 'gzip' ? 'application/vnd.oci.image.layer.v1.tar+gzip' : 'application/vnd.oci.image.layer.v1.tar';
        try {
          const r = await parseAsync('unpacker (tar -> snapshot)', UNPACK_CODES, IO_CEILING_MS, { tar: buf, form }, () =>
            unpackLayer({ blobPath, mediaType, dest, inflater: 'zlib', limits: { maxPaxHeaderBytes: 64 * 1024, maxTotalBytes: 1 << 24 } }),
          );
          if (!r.ok) expect(readdirSync(dest), `failed apply left files behind: ${show(buf)}`).toEqual([]);
          else expect(r.value.uncompressedSize).toBe(buf.length);
          assertNothingOutside({ tar: buf, form });
        } finally {
          emptyDest();
          rmSync(blobPath, { force: true });
        }
      }),
      params(71, 2500),
    );
  });
});

// --- regressions: inputs that once failed, tried every run ---

describe('regressions', () => {
  it.each(REGRESSIONS.filter((r) => r.parser !== 'tar'))('$parser: $why', (r) => {
    if (r.parser === 'reference') checkReference(r.input);
    else if (r.parser === 'digest') checkDigest(r.input);
    else if (r.parser === 'manifest') checkManifest(Buffer.from(r.input), undefined);
    else if (r.parser === 'www-authenticate') {
      expect(JSON.stringify(parseChallenges(r.input))).toBe(r.expect);
    } else if (r.parser === 'hosts.toml') {
      checkHostsToml(r.input);
      if (r.expect !== undefined) {
        const hosts = parseHostsConfig(r.input, { registry: 'registry.example:5000', baseDir: '/etc/containerd/certs.d/registry.example:5000' });
        expect(Object.keys(hosts[0]!.headers)).toEqual(r.expect);
      }
    } else if (r.parser === 'fastpulld.toml') {
      const path = join(tmp, 'regression.toml');
      writeFileSync(path, r.input);
      const out = parseSync('fastpulld.toml', ['INVALID_ARGUMENT'], PURE_CEILING_MS, r.input, () =>
        resolveConfig(readConfigFile(path, true), {}, { HOME: tmp }, tmp),
      );
      if (r.expect !== undefined) expect(out.ok ? 'ok' : out.code).toBe(r.expect);
    } else throw new Error(`no runner for ${r.parser}`);
  });

  it.each(REGRESSIONS.filter((r) => r.parser === 'tar'))('tar: $why', async (r) => {
    const gz = Buffer.from(r.input, 'base64');
    const tar = gunzipSync(gz);
    for (const chunk of r.chunks ?? [512]) {
      const out = await parseAsync('tar reader', TAR_CODES, PURE_CEILING_MS, { tar, chunk }, () => readTar(tar, chunk, true));
      expect(out.ok ? 'ok' : out.code, `chunks of ${chunk}`).toBe(r.expect);
    }
    for (const [form, bytes] of [
      ['gzip', gz],
      ['tar', tar],
    ] as const) {
      const blobPath = join(blobDir, `regression-${form}`);
      writeFileSync(blobPath, bytes);
      const mediaType = form === 'gzip' ? 'application/vnd.oci.image.layer.v1.tar+gzip' : 'application/vnd.oci.image.layer.v1.tar';
      try {
        const out = await parseAsync('unpacker (tar -> snapshot)', UNPACK_CODES, IO_CEILING_MS, { tar, form }, () =>
          unpackLayer({ blobPath, mediaType, dest, inflater: 'zlib' }),
        );
        expect(out.ok ? 'ok' : out.code).toBe(r.expect);
        assertNothingOutside({ tar, form });
      } finally {
        emptyDest();
      }
    }
  });
});
