// Structure-aware generators of the hostile-input campaign: near-valid references, manifests,
// WWW-Authenticate headers, hosts.toml and config files, each from valid pieces and then mutated.
import fc from 'fast-check';
import { MediaTypes } from '@fastpull/core';
import { anyString, digestArb, hex, mutateString } from './harness.js';

/** Names that have tripped parsers that store keys in plain objects. */
export const TRICKY_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'] as const;

// --- references ---

const component = fc.oneof(
  fc.stringMatching(/^[a-z0-9]{1,8}(?:(?:[._]|__|-{1,3})[a-z0-9]{1,8}){0,2}$/),
  fc.constantFrom('library', 'ubuntu', 'a', 'x-y', 'a__b', 'a.b'),
);
const domain = fc.oneof(
  fc.constantFrom('docker.io', 'index.docker.io', 'registry-1.docker.io', 'localhost', 'ghcr.io', '127.0.0.1', '[::1]', 'Example.COM', 'a-b.c'),
  fc.tuple(fc.stringMatching(/^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,6}[a-zA-Z0-9])?$/), fc.constantFrom('.io', '.com', '.local', '')).map(([a, b]) => a + b),
);
const port = fc.oneof(fc.integer({ min: 0, max: 70000 }).map(String), fc.constantFrom('5000', '00080', '65535', '65536', ''));
const tag = fc.oneof(fc.stringMatching(/^[\w][\w.-]{0,20}$/), fc.constantFrom('latest', '1.0', 'v1-rc.2', 'a'.repeat(128), 'a'.repeat(129)));
const digestish = fc.oneof(
  digestArb,
  hex(128).map((h) => `sha512:${h}`),
  fc.constantFrom('sha256:../../etc/passwd', 'sha256:', 'SHA256:' + 'a'.repeat(64), 'sha256:' + 'A'.repeat(64), 'md5:' + 'a'.repeat(32)),
);

/** Near-valid references: valid shapes from valid pieces, then mutated. */
export const referenceArb: fc.Arbitrary<string> = mutateString(
  fc
    .record({
      domain: fc.option(fc.tuple(domain, fc.option(port)).map(([d, p]) => (p === null ? d : `${d}:${p}`))),
      path: fc.array(component, { minLength: 1, maxLength: 4 }),
      tag: fc.option(tag),
      digest: fc.option(digestish),
    })
    .map((r) => `${r.domain === null ? '' : `${r.domain}/`}${r.path.join('/')}${r.tag === null ? '' : `:${r.tag}`}${r.digest === null ? '' : `@${r.digest}`}`),
);

/** Digest-shaped strings: known and unknown algorithms, right and wrong lengths, path parts. */
export const digestStringArb: fc.Arbitrary<string> = mutateString(
  fc.oneof(
    digestish,
    fc.tuple(fc.constantFrom('sha256', 'sha512', 'sha384', 'blake3', ''), fc.constantFrom(':', '/', '::', ''), hex(64)).map((p) => p.join('')),
    fc.tuple(fc.constantFrom('sha256:', 'sha512:'), fc.nat({ max: 140 })).chain(([a, n]) => hex(n).map((h) => a + h)),
  ),
  '0123456789abcdefABCDEF:/.\0 \n',
);

// --- JSON documents: valid manifests and indexes, then mutated as values and as bytes ---

const mediaTypeArb = fc.oneof(
  fc.constantFrom(...Object.values(MediaTypes)),
  fc.constantFrom('application/json', 'application/octet-stream', 'text/plain', ''),
  fc.string({ maxLength: 300 }),
);

/** Any JSON value, small. */
const jsonValue: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 3 });

const descriptorArb = fc.record(
  {
    mediaType: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...Object.values(MediaTypes)) }, { weight: 1, arbitrary: mediaTypeArb }),
    digest: fc.oneof({ weight: 12, arbitrary: digestArb }, { weight: 1, arbitrary: digestStringArb }),
    size: fc.oneof({ weight: 12, arbitrary: fc.nat() }, { weight: 1, arbitrary: fc.constantFrom(-1, 2 ** 53, 2 ** 53 - 1, 1.5, Number.MAX_VALUE, '12', null) }),
    urls: fc.oneof(fc.array(fc.webUrl(), { maxLength: 2 }), jsonValue),
    annotations: fc.oneof(fc.dictionary(fc.oneof(fc.string(), fc.constantFrom(...TRICKY_KEYS)), fc.string(), { maxKeys: 3 }), jsonValue),
    platform: fc.oneof(
      fc.record(
        {
          os: fc.oneof(fc.constantFrom('linux', 'windows', 'Linux'), jsonValue),
          architecture: fc.oneof(fc.constantFrom('amd64', 'arm64', 'arm', 'x86_64', 'aarch64', '386', 'ppc64le'), jsonValue),
          variant: fc.oneof(fc.constantFrom('v7', 'v8', '8', 'v1', ''), jsonValue),
          'os.version': fc.string(),
          'os.features': jsonValue,
        },
        { requiredKeys: [] },
      ),
      jsonValue,
    ),
  },
  { requiredKeys: ['mediaType', 'digest', 'size'] },
);

const manifestObj = fc.record(
  {
    schemaVersion: fc.oneof({ weight: 6, arbitrary: fc.constant(2) }, { weight: 1, arbitrary: fc.constantFrom(1, '2', 3, null) }),
    mediaType: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(MediaTypes.OCI_MANIFEST, MediaTypes.DOCKER_MANIFEST) }, { weight: 1, arbitrary: mediaTypeArb }),
    config: fc.oneof({ weight: 6, arbitrary: descriptorArb }, { weight: 1, arbitrary: jsonValue }),
    layers: fc.oneof({ weight: 6, arbitrary: fc.array(descriptorArb, { maxLength: 5 }) }, { weight: 1, arbitrary: jsonValue }),
    annotations: fc.oneof(fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }), jsonValue),
  },
  { requiredKeys: ['schemaVersion', 'config', 'layers'] },
);

const indexObj = fc.record(
  {
    schemaVersion: fc.oneof({ weight: 6, arbitrary: fc.constant(2) }, { weight: 1, arbitrary: fc.constantFrom(1, '2', null) }),
    mediaType: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(MediaTypes.OCI_INDEX, MediaTypes.DOCKER_MANIFEST_LIST) },
      { weight: 1, arbitrary: mediaTypeArb },
    ),
    manifests: fc.oneof({ weight: 6, arbitrary: fc.array(descriptorArb, { maxLength: 5 }) }, { weight: 1, arbitrary: jsonValue }),
    annotations: fc.oneof(fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }), jsonValue),
  },
  { requiredKeys: ['schemaVersion', 'manifests'] },
);

const configObj = fc.record(
  {
    architecture: fc.oneof(fc.constantFrom('amd64', 'arm64'), jsonValue),
    os: fc.oneof(fc.constant('linux'), jsonValue),
    variant: fc.oneof(fc.constant('v8'), jsonValue),
    rootfs: fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({
          type: fc.oneof({ weight: 5, arbitrary: fc.constant('layers') }, { weight: 1, arbitrary: jsonValue }),
          diff_ids: fc.oneof(
            {
              weight: 5,
              arbitrary: fc.array(
                fc.oneof({ weight: 10, arbitrary: digestArb }, { weight: 1, arbitrary: digestStringArb }, { weight: 1, arbitrary: jsonValue }),
                { maxLength: 4 },
              ),
            },
            { weight: 1, arbitrary: jsonValue },
          ),
        }),
      },
      { weight: 1, arbitrary: jsonValue },
    ),
    config: jsonValue,
  },
  { requiredKeys: ['rootfs'] },
);

/** Bytes with up to a few bytes flipped, cut or inserted. */
export function mutateBytes(b: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  const edit = fc.record({ op: fc.constantFrom('flip', 'insert', 'delete', 'truncate', 'set'), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) });
  return fc.tuple(b, fc.array(edit, { maxLength: 4 })).map(([base, edits]) => {
    let out = Buffer.from(base);
    for (const e of edits) {
      const at = out.length === 0 ? 0 : e.at % out.length;
      if (e.op === 'flip' && out.length > 0) out[at] = out[at]! ^ (1 << (e.byte % 8));
      else if (e.op === 'set' && out.length > 0) out[at] = e.byte;
      else if (e.op === 'insert') out = Buffer.concat([out.subarray(0, at), Buffer.from([e.byte]), out.subarray(at)]);
      else if (e.op === 'delete') out = Buffer.concat([out.subarray(0, at), out.subarray(at + 1)]);
      else if (e.op === 'truncate') out = out.subarray(0, at);
    }
    return out;
  });
}

const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

/** Manifest and index documents: valid, with wrong values, as mutated bytes, or random bytes. */
export const manifestBytesArb: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: fc.oneof(manifestObj, indexObj).map(json) },
  { weight: 2, arbitrary: mutateBytes(fc.oneof(manifestObj, indexObj).map(json)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 400 }).map((a) => Buffer.from(a)) },
  { weight: 1, arbitrary: jsonValue.map(json) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('[', '{"schemaVersion":2,"manifests":[' + '['.repeat(5000), '{"a":' + '[{"b":'.repeat(2000) + '1', '\uFEFF{}', '')
      .map((s) => Buffer.from(s)),
  },
);

export const configBytesArb: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: configObj.map(json) },
  { weight: 2, arbitrary: mutateBytes(configObj.map(json)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
);

export const contentTypeArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.constantFrom('application/json', 'application/octet-stream', MediaTypes.OCI_MANIFEST, MediaTypes.OCI_INDEX) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      mediaTypeArb,
      mediaTypeArb.map((t) => `${t}; charset=utf-8`),
      fc.constantFrom(MediaTypes.DOCKER_MANIFEST_SCHEMA1_SIGNED, MediaTypes.DOCKER_MANIFEST_SCHEMA1),
    ),
  },
);

// --- WWW-Authenticate ---

const tokenChar = fc.constantFrom(..."abcxyzABCXYZ0123456789!#$%&'*+.^_`|~-");
const httpToken = fc.oneof(
  fc.string({ unit: tokenChar, minLength: 1, maxLength: 12 }),
  fc.constantFrom('realm', 'service', 'scope', 'error', 'Realm', ...TRICKY_KEYS),
);

/** One challenge as data: a scheme and its parameters, values as arbitrary text. */
export const challengeArb = fc.record({
  scheme: fc.oneof(fc.constantFrom('Bearer', 'Basic', 'bearer', 'Negotiate'), fc.string({ unit: tokenChar, minLength: 1, maxLength: 10 })),
  params: fc.array(
    fc.record({
      key: httpToken,
      value: fc.oneof(fc.string({ maxLength: 40 }), fc.webUrl(), fc.constantFrom('', 'a,b', 'x"y', 'a\\b', 'repository:a/b:pull,push')),
      quoted: fc.boolean(),
      space: fc.constantFrom('', ' ', '  '),
    }),
    { maxLength: 5 },
  ),
});

/** Serialises challenges as a registry would (quoting when needed, escaping `"` and `\`). */
export interface ChallengeSpec {
  scheme: string;
  params: Array<{ key: string; value: string; quoted: boolean; space: string }>;
}
export function formatChallenges(chs: readonly ChallengeSpec[]): string {
  return chs
    .map((c) => {
      const params = c.params.map((p) => {
        const needsQuote = p.quoted || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(p.value);
        const v = needsQuote ? `"${p.value.replace(/[\\"]/g, (m) => `\\${m}`)}"` : p.value;
        return `${p.key}${p.space}=${p.space}${v}`;
      });
      return params.length > 0 ? `${c.scheme} ${params.join(',' + (c.params.length % 2 ? ' ' : ''))}` : c.scheme;
    })
    .join(', ');
}

// --- hosts.toml ---

const tomlString = fc.oneof(
  fc.string({ maxLength: 30 }).map((s) => JSON.stringify(s)),
  fc
    .string({ maxLength: 30 })
    .filter((s) => !/['\n\r]/.test(s))
    .map((s) => `'${s}'`),
  fc.constantFrom('"\\u0041"', '"\\U0001F600"', '"\\x41"', '"\\uD800"', '"a\\tb"', "'''x'''", '"""y"""'),
);
const tomlValue = fc.oneof(
  tomlString,
  fc.constantFrom('true', 'false', '1', '-1', '1979-05-27', '{ a = "b" }', '[]', '["pull", "resolve"]', '["pull", 1]', '[["a", "b"]]', '[ "a", ]'),
  fc.array(tomlString, { maxLength: 3 }).map((a) => `[${a.join(', ')}]`),
);
const hostUrlArb = fc.oneof(
  fc.webUrl(),
  fc.constantFrom(
    'https://mirror.local',
    'http://127.0.0.1:5001/v2',
    'mirror:5000',
    'https://m/x/',
    'ftp://x',
    'https://u:p@x',
    'https://x?q',
    'https://',
    'https://[::1]:80',
    '//x',
  ),
);
const hostKey = fc.oneof(
  fc.constantFrom('capabilities', 'ca', 'client', 'skip_verify', 'override_path', 'dial_timeout', 'server', 'header', 'unknown_key'),
  fc.stringMatching(/^[a-z_]{1,10}$/),
);
const durationArb = fc.oneof(
  fc
    .tuple(
      fc.oneof(fc.nat({ max: 100000 }).map(String), fc.constantFrom('0', '1.5', '.5', '1.', '9'.repeat(400), '99999999999')),
      fc.constantFrom('ns', 'us', 'µs', 'ms', 's', 'm', 'h', '', 'd'),
    )
    .map(([n, u]) => `"${n}${u}"`),
  fc.constantFrom('"1m30s"', '"+5s"', '"-5s"', '""', '"0"', '"200ms"'),
);
const headerName = fc.oneof(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,10}$/), fc.constantFrom(...TRICKY_KEYS), fc.constantFrom('"x y"', '"a:b"', 'X-Ok'));
const hostLine = fc.oneof(
  fc.tuple(hostKey, tomlValue).map(([k, v]) => `${k} = ${v}`),
  durationArb.map((d) => `dial_timeout = ${d}`),
  fc
    .tuple(
      headerName,
      fc.oneof(
        tomlString,
        fc.array(tomlString, { maxLength: 2 }).map((a) => `[${a.join(',')}]`),
      ),
    )
    .map(([k, v]) => `header.${k} = ${v}`),
  fc.constantFrom('capabilities = ["pull", "resolve"]', 'skip_verify = true', 'ca = "ca.crt"', 'client = [["c.cert", "c.key"]]', '# comment', ''),
);

/** hosts.toml files: server lines and [host."..."] tables with good and bad keys, then mutated as text. */
export const hostsTomlArb: fc.Arbitrary<string> = mutateString(
  fc
    .record({
      server: fc.option(hostUrlArb),
      top: fc.array(hostLine, { maxLength: 3 }),
      hosts: fc.array(
        fc.record({
          url: hostUrlArb,
          lines: fc.array(hostLine, { maxLength: 4 }),
          headers: fc.option(
            fc.array(
              fc.tuple(headerName, tomlString).map(([k, v]) => `${k} = ${v}`),
              { maxLength: 2 },
            ),
          ),
        }),
        { maxLength: 3 },
      ),
    })
    .map((f) => {
      const out: string[] = [];
      if (f.server !== null) out.push(`server = ${JSON.stringify(f.server)}`);
      out.push(...f.top);
      for (const h of f.hosts) {
        out.push(`[host.${JSON.stringify(h.url)}]`, ...h.lines);
        if (h.headers !== null) out.push(`[host.${JSON.stringify(h.url)}.header]`, ...h.headers);
      }
      return out.join('\n') + '\n';
    }),
);

// --- docker config.json ---

/** A secret that must never surface: distinct marker text per run. */
export const secretArb = fc
  .tuple(fc.constantFrom('pw', 'tok', 's3cr3t'), fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'), minLength: 12, maxLength: 16 }))
  .map(([a, b]) => `${a}-${b}`);

const authKey = fc.oneof(
  fc.constantFrom(
    '127.0.0.1:5000',
    'https://index.docker.io/v1/',
    'docker.io',
    'https://127.0.0.1:5000/v2/',
    'ghcr.io',
    'HTTPS://127.0.0.1:5000',
    '',
    ...TRICKY_KEYS,
  ),
  fc.string({ maxLength: 20 }),
);

/** config.json texts holding `secret` in every place a secret goes, with wrong types and mutations. */
export function dockerConfigArb(secret: string): fc.Arbitrary<string> {
  const entry = fc.oneof(
    fc.constant({ auth: Buffer.from(`user:${secret}`).toString('base64') }),
    fc.constant({ username: 'user', password: secret }),
    fc.constant({ identitytoken: secret }),
    fc.constant({ auth: `${Buffer.from(`user:${secret}`).toString('base64')}!` }),
    fc.constant({ auth: Buffer.from(`${secret}`).toString('base64') }),
    fc.record(
      {
        auth: fc.oneof(fc.string(), fc.constant(secret), fc.jsonValue({ maxDepth: 1 })),
        username: fc.jsonValue({ maxDepth: 1 }),
        password: fc.oneof(fc.constant(secret), fc.jsonValue({ maxDepth: 1 })),
        identitytoken: fc.oneof(fc.constant(''), fc.jsonValue({ maxDepth: 1 })),
      },
      { requiredKeys: [] },
    ),
    fc.jsonValue({ maxDepth: 1 }),
  );
  const doc = fc.record(
    {
      auths: fc.oneof(
        { weight: 5, arbitrary: fc.array(fc.tuple(authKey, entry), { maxLength: 3 }).map((es) => Object.fromEntries(es)) },
        { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) },
      ),
      credsStore: fc.oneof(fc.constantFrom('', 'nonexistent-helper', '../../bin/sh', 'a b'), fc.jsonValue({ maxDepth: 1 })),
      credHelpers: fc.oneof(
        fc.dictionary(authKey, fc.oneof(fc.constantFrom('nonexistent', '/bin/sh', '', '..'), fc.jsonValue({ maxDepth: 1 })), { maxKeys: 2 }),
        fc.jsonValue({ maxDepth: 1 }),
      ),
    },
    { requiredKeys: [] },
  );
  return fc.oneof(
    { weight: 4, arbitrary: doc.map((d) => JSON.stringify(d, null, 1)) },
    { weight: 2, arbitrary: mutateString(doc.map((d) => JSON.stringify(d))) },
    { weight: 1, arbitrary: anyString(200) },
  );
}

// --- fastpulld's TOML config ---

const daemonKey = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'root',
      'socket',
      'snapshotter_socket',
      'containerd_socket',
      'group',
      'hosts_dir',
      'concurrency',
      'chunk_size',
      'keep_blobs',
      'sync',
      'unpack_concurrency',
      'metrics_address',
      'log_level',
      'shutdown_timeout',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom('unknown', 'Root', '"root"', ...TRICKY_KEYS) },
);
const daemonValue = fc.oneof(
  fc.constantFrom('"/var/lib/fastpull"', '"relative/dir"', '""', '"16MiB"', '"64KiB"', '"1K"', '"0"', '"10s"', '"500ms"', '"1m"', '"1.5s"'),
  fc.constantFrom(
    '"127.0.0.1:10271"',
    '"127.0.0.1:9464"',
    '"[::1]:0"',
    '"localhost:65536"',
    '"0.0.0.0:10271"',
    '"info"',
    '"silent"',
    '"verbose"',
    'true',
    'false',
    '"true"',
  ),
  fc.constantFrom(
    '0',
    '1',
    '-1',
    '16777216',
    '9007199254740993',
    '1e400',
    '1e10',
    '1e300',
    '3.5',
    'inf',
    'nan',
    '0x10',
    '1979-05-27T07:32:00Z',
    '[1, 2]',
    '{ a = 1 }',
    '[]',
  ),
  fc.constantFrom('"99999999999999999999G"', '"9007199254740991"', '"8388608G"', '"99999999999m"', '"2592000"', '"1e3"'),
  fc.integer().map(String),
  fc.double({ noNaN: false }).map((d) => (Number.isFinite(d) ? String(d) : 'inf')),
  fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s)),
);

/** fastpulld.toml texts: known keys with values of every TOML type, plus tables and garbage, mutated. */
export const daemonTomlArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 5,
    arbitrary: mutateString(
      fc
        .array(
          fc.tuple(daemonKey, daemonValue).map(([k, v]) => `${k} = ${v}`),
          { maxLength: 6 },
        )
        .map((ls) => ls.join('\n') + '\n'),
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(
        fc.tuple(daemonKey, daemonValue).map(([k, v]) => `[${k}]\nx = ${v}`),
        { maxLength: 2 },
      )
      .map((ls) => ls.join('\n')),
  },
  { weight: 1, arbitrary: anyString(200) },
);
