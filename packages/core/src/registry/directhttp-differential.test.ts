// The range client's HTTP/1.1 response parsing, differential: fast-check generates answers, well
// formed and then mutated (repeated or conflicting Content-Length, Transfer-Encoding with
// Content-Length, bad chunk sizes, obs-fold, bare LF, huge headers, truncated bodies), a loopback
// server writes each byte for byte and closes, and three readings must agree: the parser alone
// (http1.ts, fed the whole answer), the range client's connections (DirectConnections, which read
// a 200's or 206's body by its own length bookkeeping), and Node's own HTTP client (llhttp). Each
// gives the status, the headers a registry client acts on and the body's bytes, or refuses.
//
// Where the range client deliberately differs from Node, the rule is written in `deliberate` below
// and the case must fall under it; anything else that differs fails the test.
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectConnections } from './directhttp.js';
import { BodyDecoder, framingOf, HeadReader, MAX_HEAD_BYTES } from './http1.js';

/** The headers a registry client acts on, compared as lists of values. */
const MATTERS = ['content-type', 'content-range', 'location', 'www-authenticate', 'docker-content-digest', 'retry-after', 'x-test'] as const;

type Read = { status: number; headers: Record<string, string[]>; body: string };
type Outcome = Read | 'refused' | 'hung';

function pick(headers: Record<string, string | string[] | undefined>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const name of MATTERS) {
    const v = headers[name];
    if (v !== undefined) out[name] = (Array.isArray(v) ? v : [v]).map(shown);
  }
  return out;
}

/** A long value as its length and digest, so that a failure's report stays readable. */
function shown(v: string): string {
  return v.length <= 80 ? v : `${v.slice(0, 16)}... (${v.length} chars, sha256 ${createHash('sha256').update(v).digest('hex').slice(0, 16)})`;
}

/** `p`, or 'hung' when it has not settled after `ms` (a guard that names the case, not a time limit on it). */
function guarded(p: Promise<Outcome>, ms = 10_000): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<Outcome>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)))]).finally(() => clearTimeout(timer));
}

/** Node's reading of the answer at `url`: what its http client gives, or 'refused'. */
function nodeReads(url: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () =>
        resolve(res.complete ? { status: res.statusCode!, headers: pick(res.headersDistinct), body: Buffer.concat(parts).toString('latin1') } : 'refused'),
      );
      res.on('error', () => resolve('refused'));
      res.on('aborted', () => resolve('refused'));
    });
    req.on('error', () => resolve('refused'));
    req.end();
  });
}

/** The parser's reading of the whole answer, the server's close after it, and how many bytes came after the answer's end. */
function parserReads(bytes: Buffer): { outcome: Outcome; extra: number } {
  try {
    const got = new HeadReader().push(bytes);
    if (got === undefined) return { outcome: 'refused', extra: 0 };
    const decoder = new BodyDecoder(framingOf(got.head));
    const out = decoder.push(got.rest);
    if (!out.done && !decoder.closeEnds()) return { outcome: 'refused', extra: 0 };
    return { outcome: { status: got.head.status, headers: pick(got.head.headers), body: Buffer.concat(out.data).toString('latin1') }, extra: out.extra };
  } catch {
    return { outcome: 'refused', extra: 0 };
  }
}

/** The range client's reading of the same answer through its connections. */
async function connectionReads(c: DirectConnections, url: string): Promise<Outcome> {
  try {
    const res = await c.request(new URL(url), {}, null);
    const parts: Buffer[] = [];
    if (res.direct) await res.direct.consume((chunk) => void parts.push(Buffer.from(chunk)));
    else for await (const chunk of res.body) parts.push(chunk as Buffer);
    return { status: res.statusCode, headers: pick(res.headers), body: Buffer.concat(parts).toString('latin1') };
  } catch {
    return 'refused';
  }
}

const framings = ['length', 'chunked', 'chunked-extension', 'until-close', 'none'] as const;
const mutations = [
  'none',
  'two-lengths-same',
  'two-lengths-differ',
  'length-list',
  'bad-length',
  'te-and-length',
  'te-not-chunked',
  'bad-chunk-size',
  'chunk-size-overflow',
  'chunk-no-crlf',
  'obs-fold',
  'bare-lf',
  'space-before-colon',
  'huge-header',
  'truncate',
] as const;
type Framing = (typeof framings)[number];
type Mutation = (typeof mutations)[number];
const FRAMING_MUTATIONS: ReadonlySet<Mutation> = new Set([
  'two-lengths-same',
  'two-lengths-differ',
  'length-list',
  'bad-length',
  'te-and-length',
  'te-not-chunked',
  'bad-chunk-size',
  'chunk-size-overflow',
  'chunk-no-crlf',
]);

interface Case {
  status: number;
  version: string;
  framing: Framing;
  mutation: Mutation;
  body: Buffer;
  headers: [string, string][];
  /** For 'truncate': where the answer is cut, as a fraction of its length. */
  cut: number;
  /** For 'huge-header': its size in KiB. */
  hugeKiB: number;
  badLength: string;
}

function chunk(b: Buffer, ext = ''): Buffer {
  return b.length === 0 ? Buffer.from('0\r\n\r\n') : Buffer.concat([Buffer.from(`${b.length.toString(16)}${ext}\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]);
}

/** The answer's bytes. */
function answer(c: Case): Buffer {
  const lines = [`HTTP/${c.version} ${c.status} X`, ...c.headers.map(([n, v]) => `${n}: ${v}`)];
  let payload = c.body;
  // A mutation of the framing replaces the generated one.
  const framing = FRAMING_MUTATIONS.has(c.mutation) ? 'none' : c.framing;
  switch (framing) {
    case 'length':
      lines.push(`Content-Length: ${c.body.length}`);
      break;
    case 'chunked':
      lines.push('Transfer-Encoding: chunked');
      payload = chunk(c.body);
      break;
    case 'chunked-extension':
      lines.push('Transfer-Encoding: chunked');
      payload = chunk(c.body, ';name=value');
      break;
    case 'until-close':
      break;
    case 'none':
      payload = Buffer.alloc(0);
      break;
  }
  switch (c.mutation) {
    case 'two-lengths-same':
      lines.push(`Content-Length: ${c.body.length}`, `Content-Length: ${c.body.length}`);
      payload = c.body;
      break;
    case 'two-lengths-differ':
      lines.push(`Content-Length: ${c.body.length}`, `Content-Length: ${c.body.length + 1}`);
      payload = c.body;
      break;
    case 'length-list':
      lines.push(`Content-Length: ${c.body.length}, ${c.body.length}`);
      payload = c.body;
      break;
    case 'bad-length':
      lines.push(`Content-Length: ${c.badLength}`);
      payload = c.body;
      break;
    case 'te-and-length':
      lines.push('Transfer-Encoding: chunked', `Content-Length: ${c.body.length}`);
      payload = chunk(c.body);
      break;
    case 'te-not-chunked':
      lines.push('Transfer-Encoding: gzip', `Content-Length: ${c.body.length}`);
      payload = c.body;
      break;
    case 'bad-chunk-size':
      lines.push('Transfer-Encoding: chunked');
      payload = Buffer.concat([Buffer.from(`${c.badLength}\r\n`), c.body, Buffer.from('\r\n0\r\n\r\n')]);
      break;
    case 'chunk-size-overflow':
      lines.push('Transfer-Encoding: chunked');
      payload = Buffer.concat([Buffer.from('1000000000000000000003\r\n'), c.body, Buffer.from('\r\n0\r\n\r\n')]);
      break;
    case 'chunk-no-crlf':
      lines.push('Transfer-Encoding: chunked');
      payload = Buffer.concat([Buffer.from(`${(c.body.length + 1).toString(16)}\r\n`), c.body, Buffer.from('0\r\n\r\n')]);
      break;
    case 'obs-fold':
      lines.push('X-Test: first', ' folded');
      break;
    case 'space-before-colon':
      lines.push('X-Test : spaced');
      break;
    case 'huge-header':
      lines.push(`X-Test: ${'h'.repeat(c.hugeKiB * 1024)}`);
      break;
    default:
      break;
  }
  let head = `${lines.join('\r\n')}\r\n\r\n`;
  // One line break of the head a bare LF (the last header line's, or the status line's).
  if (c.mutation === 'bare-lf') head = `${lines.slice(0, -1).join('\r\n')}${lines.length > 1 ? '\n' : ''}${lines.at(-1)}\r\n\r\n`;
  const bytes = Buffer.concat([Buffer.from(head, 'latin1'), payload]);
  return c.mutation === 'truncate' ? bytes.subarray(0, Math.floor(bytes.length * c.cut)) : bytes;
}

/**
 * Where the range client deliberately reads otherwise than Node: the rule that covers a case whose
 * readings differ, and, where one exists, the answer Node must read as the range client read this
 * one; undefined when no rule covers it (then the readings must agree).
 */
function deliberate(c: Case, bytes: Buffer, ours: Outcome, extra: number, theirs: Outcome): { rule: string; nodeReadsAlike?: Buffer } | undefined {
  if (theirs !== 'refused' || ours === 'refused') return undefined;
  const rules: string[] = [];
  let alike = bytes;
  // Bytes after a complete answer: Node refuses the answer; the range client takes it and closes
  // its connection (never used again: it is out of step with its server). As Node reads the answer
  // without them.
  if (extra > 0) {
    rules.push('bytes after the answer');
    alike = alike.subarray(0, alike.length - extra);
  }
  // Transfer-Encoding with Content-Length: Node refuses; RFC 9112 (6.3) has Transfer-Encoding
  // override the length, and the range client reads the answer so, then closes the connection. As
  // Node reads the answer without its Content-Length.
  if (c.mutation === 'te-and-length' || c.mutation === 'te-not-chunked') {
    rules.push('Transfer-Encoding overrides Content-Length');
    alike = Buffer.from(alike.toString('latin1').replace(/\r\nContent-Length: \d+/, ''), 'latin1');
  }
  // Node refuses a head over its header limit (16 KiB by default); the range client takes heads up
  // to MAX_HEAD_BYTES, as a registry's long Link or WWW-Authenticate fields may need more. (Node
  // refuses such a head however it is framed: no answer of it is for Node to read alike.)
  const headBytes = bytes.indexOf('\r\n\r\n');
  if (headBytes > 16 * 1024 && headBytes <= MAX_HEAD_BYTES) return { rule: [...rules, 'larger heads'].join(', ') };
  return rules.length > 0 ? { rule: rules.join(', '), nodeReadsAlike: alike } : undefined;
}

describe('the range client reads HTTP/1.1 answers as Node does, or as a written rule says where it differs on purpose (differential, fast-check)', () => {
  const answers = new Map<string, Buffer>();
  let server: Server;
  let base = '';
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
      let head = '';
      s.on('data', (d: Buffer) => {
        head += d.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' ', head.indexOf(' ') + 1));
        head = head.slice(end + 4);
        // Every answer ends with the connection, so that a client reading until the close ends too.
        s.end(answers.get(path) ?? Buffer.from('HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n'));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const headerName = fc.constantFrom('Content-Type', 'Location', 'WWW-Authenticate', 'Docker-Content-Digest', 'Retry-After', 'X-Test', 'X-Other');
  const headerValue = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((n) => String.fromCharCode(n)), minLength: 1, maxLength: 40 });
  const cases = fc.record({
    status: fc.constantFrom(200, 206, 204, 304, 401, 404, 500, 301),
    version: fc.constantFrom('1.1', '1.0'),
    framing: fc.constantFrom(...framings),
    mutation: fc.constantFrom(...mutations),
    body: fc.uint8Array({ minLength: 0, maxLength: 3000 }).map((b) => Buffer.from(b)),
    headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }),
    cut: fc.double({ min: 0, max: 0.999, noNaN: true }),
    hugeKiB: fc.constantFrom(8, 20, 70),
    badLength: fc.constantFrom('abc', '-1', '1 2', '+5', '0x10', ' 12 ', '99999999999999999999', 'z3', '3 ;x'),
  });

  it('agrees on every generated answer: the same status, headers and body, or a refusal', async () => {
    let n = 0;
    // A fixed seed and number of runs: the same cases on every run, in bounded time.
    const seed = 20261207;
    // fast-check's failure names the seed and the path of the smallest case found (its options
    // `seed` and `path` replay it), with the case and what differed.
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const path = `/case/${n++}`;
        const bytes = answer(c);
        answers.set(path, bytes);
        const client = new DirectConnections({ connections: 2, idleTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, dialTimeoutMs: 5_000 });
        try {
          const [theirs, conn] = await Promise.all([guarded(nodeReads(`${base}${path}`)), guarded(connectionReads(client, `${base}${path}`))]);
          const { outcome: ours, extra } = parserReads(bytes);
          const the = { ...c, body: `${c.body.length} bytes` };
          // The connections read as the parser does, whatever the answer.
          expect({ the, conn }).toEqual({ the, conn: ours });
          const deliberately = deliberate(c, bytes, ours, extra, theirs);
          if (deliberately === undefined) expect({ the, ours }).toEqual({ the, ours: theirs });
          else if (deliberately.nodeReadsAlike) {
            const alike = `${path}/alike`;
            answers.set(alike, deliberately.nodeReadsAlike);
            const theirsAlike = await guarded(nodeReads(`${base}${alike}`));
            answers.delete(alike);
            expect({ the, rule: deliberately.rule, ours }).toEqual({ the, rule: deliberately.rule, ours: theirsAlike });
          }
        } finally {
          client.close();
          answers.delete(path);
        }
      }),
      { numRuns: 400, seed },
    );
  }, 120_000);
});
