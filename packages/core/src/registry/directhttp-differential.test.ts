// The range client's HTTP/1.1 response parsing, differential: fast-check generates answers from
// well-formed and mutated heads and bodies (framings by length, by chunks, both, neither; lengths
// short, long, malformed, repeated; chunk sizes malformed), a loopback server writes each byte for
// byte and closes, and the range client must read each as RFC 9112 says, and Node's own parser
// (llhttp), wherever it reads one at all, the same.
import { request as httpRequest } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import fc from 'fast-check';
import type { Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectConnections } from './directhttp.js';

type Outcome = { status: number; body: string } | 'refused' | 'hung';

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
      res.on('end', () => resolve(res.complete ? { status: res.statusCode!, body: Buffer.concat(parts).toString('latin1') } : 'refused'));
      res.on('error', () => resolve('refused'));
      res.on('aborted', () => resolve('refused'));
    });
    req.on('error', () => resolve('refused'));
    req.end();
  });
}

async function drain(body: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(c as Buffer);
  return Buffer.concat(parts).toString('latin1');
}

/** The range client's reading of the same answer (its fallback for bodies without a length is Node's own). */
async function oursReads(c: DirectConnections, url: string): Promise<Outcome> {
  const fallback = async (): Promise<Dispatcher.ResponseData> => {
    const o = await nodeReads(url);
    if (typeof o === 'string') throw new Error('refused by node:http');
    const { Readable } = await import('node:stream');
    return { statusCode: o.status, headers: {}, body: Readable.from([Buffer.from(o.body, 'latin1')]) } as unknown as Dispatcher.ResponseData;
  };
  try {
    const res = await c.request(new URL(url), {}, null, fallback);
    if (res.direct) {
      const parts: Buffer[] = [];
      await res.direct.consume((chunk) => void parts.push(Buffer.from(chunk)));
      return { status: res.statusCode, body: Buffer.concat(parts).toString('latin1') };
    }
    return { status: res.statusCode, body: await drain(res.body as unknown as Readable) };
  } catch {
    return 'refused';
  }
}

const framings = ['length', 'short-length', 'long-length', 'bad-length', 'two-lengths-same', 'two-lengths-differ', 'chunked', 'chunked-bad-size', 'chunked-no-crlf', 'chunked-extension', 'chunked-and-length', 'until-close'] as const;
type Framing = (typeof framings)[number];

/** An answer's bytes: a status line, a framing of `body`, and the body framed so. */
function answer(status: number, version: string, framing: Framing, body: Buffer, badLength: string): Buffer {
  const lines = [`HTTP/${version} ${status} X`];
  let payload = body;
  const chunked = (b: Buffer, size = b.length.toString(16), crlf = '\r\n', ext = ''): Buffer =>
    Buffer.concat([Buffer.from(`${size}${ext}${crlf}`), b, Buffer.from(`${crlf}0${crlf}${crlf}`)]);
  switch (framing) {
    case 'length': lines.push(`Content-Length: ${body.length}`); break;
    case 'short-length': lines.push(`Content-Length: ${Math.max(0, body.length - 3)}`); break;
    case 'long-length': lines.push(`Content-Length: ${body.length + 7}`); break;
    case 'bad-length': lines.push(`Content-Length: ${badLength}`); break;
    case 'two-lengths-same': lines.push(`Content-Length: ${body.length}`, `Content-Length: ${body.length}`); break;
    case 'two-lengths-differ': lines.push(`Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`); break;
    case 'chunked': lines.push('Transfer-Encoding: chunked'); payload = body.length === 0 ? Buffer.from('0\r\n\r\n') : chunked(body); break;
    case 'chunked-bad-size': lines.push('Transfer-Encoding: chunked'); payload = chunked(body, `z${body.length.toString(16)}`); break;
    case 'chunked-no-crlf': lines.push('Transfer-Encoding: chunked'); payload = Buffer.concat([Buffer.from(`${(body.length + 1).toString(16)}\r\n`), body, Buffer.from('0\r\n\r\n')]); break;
    case 'chunked-extension': lines.push('Transfer-Encoding: chunked'); payload = body.length === 0 ? Buffer.from('0\r\n\r\n') : chunked(body, undefined, '\r\n', ';name=value'); break;
    case 'chunked-and-length': lines.push('Transfer-Encoding: chunked', `Content-Length: ${body.length}`); payload = body.length === 0 ? Buffer.from('0\r\n\r\n') : chunked(body); break;
    case 'until-close': break;
  }
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), payload]);
}

/**
 * What RFC 9112 (section 6) makes of an answer the server ends with its connection: 204 ends at its
 * head; Transfer-Encoding with Content-Length is read per Transfer-Encoding; a chunked body
 * is decoded, and refused when malformed or cut; a Content-Length of digits (copies that agree,
 * optional whitespace around) takes that many bytes, refused when fewer came; no framing: to the close.
 */
function rfcReading(status: number, framing: Framing, body: Buffer, badLength: string): Outcome {
  const ok = (b: Buffer): Outcome => ({ status, body: b.toString('latin1') });
  if (status === 204) return ok(Buffer.alloc(0));
  const byLength = (n: number): Outcome => (body.length >= n ? ok(body.subarray(0, n)) : 'refused');
  switch (framing) {
    case 'length':
    case 'two-lengths-same':
      return ok(body);
    case 'short-length':
      return byLength(Math.max(0, body.length - 3));
    case 'long-length':
    case 'two-lengths-differ':
    case 'chunked-bad-size':
      return 'refused';
    case 'chunked-and-length':
      // Transfer-Encoding overrides Content-Length (RFC 9112, 6.3): the range client reads the
      // chunks, where Node refuses; a success without a length goes to the fallback (node:http here).
      return status === 200 || status === 206 ? 'refused' : ok(body);
    case 'bad-length':
      return /^\d{1,15}$/.test(badLength.trim()) ? byLength(Number(badLength.trim())) : 'refused';
    case 'chunked':
    case 'chunked-extension':
    case 'until-close':
      return ok(body);
    case 'chunked-no-crlf':
      // The size line counts one byte more than the chunk has: the decoder reads into the last
      // chunk's line and then finds no CRLF where it must be.
      return 'refused';
  }
}

describe('the range client reads HTTP/1.1 answers as RFC 9112 says, and as Node does where Node reads them (differential, fast-check)', () => {
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

  it('agrees on every generated answer: the same status and body, or a refusal', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(200, 206, 204, 404, 500, 301),
        fc.constantFrom('1.1', '1.0'),
        fc.constantFrom(...framings),
        fc.uint8Array({ minLength: 0, maxLength: 3000 }),
        fc.constantFrom('abc', '-1', '1 2', '+5', '0x10', ' 12 ', '99999999999999999999'),
        async (status, version, framing, bytes, badLength) => {
          const path = `/case/${n++}`;
          answers.set(path, answer(status, version, framing, Buffer.from(bytes), badLength));
          const c = new DirectConnections({ connections: 2, idleTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, dialTimeoutMs: 5_000 });
          try {
            const [theirs, ours] = await Promise.all([guarded(nodeReads(`${base}${path}`)), guarded(oursReads(c, `${base}${path}`))]);
            const rfc = rfcReading(status, framing, Buffer.from(bytes), badLength);
            const the = { status, version, framing, badLength };
            // The range client reads as the RFC says; Node, where it reads at all, reads the same
            // (it refuses more: bytes after a complete answer, repeated Content-Length, any 204
            // with more after its head).
            expect({ ...the, ours }).toEqual({ ...the, ours: rfc });
            if (theirs !== 'refused') expect({ ...the, theirs }).toEqual({ ...the, theirs: rfc });
          } finally {
            c.close();
            answers.delete(path);
          }
        },
      ),
      { numRuns: 300, seed: 20261207 },
    );
  }, 300_000);
});
