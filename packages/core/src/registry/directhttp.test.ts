// DirectConnections against loopback servers that write the exact bytes of their answers (node:net),
// and one over TLS: a 206's body handed to `take` as views of the read buffer, kept-alive connections
// and their replacement, answers read whole, successes without a length as streams, failures,
// timeouts and aborts; and parseHead.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { Socket, createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { NodeHttpPoolOptions } from './connections.js';
import { DirectConnections, type DirectBody, type RegistryResponse } from './directhttp.js';
import { parseHead } from './http1.js';

const servers: (TcpServer | HttpsServer)[] = [];
const serverSockets: Socket[] = [];
const clients: DirectConnections[] = [];

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  for (const s of serverSockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) {
    (s as HttpsServer).closeAllConnections?.();
    s.close();
  }
});

const tick = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Waits (a bounded while) until `cond` holds; fails when it never does. */
async function until(cond: () => boolean, what: string, ms = 1_500): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await tick(5);
  }
}

interface RawServer {
  url: string;
  port: number;
  /** Connections accepted, in order. */
  sockets: Socket[];
  /** How many of them closed. */
  closed(): number;
  /** Request heads received (request line and headers), in order, across connections. */
  requests: string[];
}

/**
 * A TCP server that hands each request head it reads to `onRequest` with the connection and the
 * request's number on that connection (0 for the first); what it answers is written by hand.
 */
async function rawServer(onRequest: (s: Socket, head: string, nth: number) => void): Promise<RawServer> {
  const sockets: Socket[] = [];
  const requests: string[] = [];
  let closed = 0;
  const server = createTcpServer((s) => {
    sockets.push(s);
    serverSockets.push(s);
    s.on('error', () => {});
    s.on('close', () => closed++);
    let pending = Buffer.alloc(0);
    let nth = 0;
    s.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.subarray(0, end).toString('latin1');
        pending = pending.subarray(end + 4);
        requests.push(head);
        onRequest(s, head, nth++);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, port, sockets, closed: () => closed, requests };
}

function client(options: Partial<NodeHttpPoolOptions> = {}): DirectConnections {
  const c = new DirectConnections({ connections: 4, idleTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, dialTimeoutMs: 5_000, ...options });
  clients.push(c);
  return c;
}

/** A response head with these header lines. */
function head(status: string, lines: string[] = []): Buffer {
  return Buffer.from(`HTTP/1.1 ${status}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, 'latin1');
}

/** Writes `bytes` in writes of odd sizes (1 byte to about 100 KiB). */
function writeOdd(s: Socket, bytes: Buffer): void {
  const sizes = [1, 3, 7, 4093, 65_537, 12_345, 100_003, 509, 33_333];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, bytes.length - at);
    s.write(bytes.subarray(at, at + n));
    at += n;
  }
}

function get(c: DirectConnections, url: string, headers: Record<string, string> = {}, signal: AbortSignal | null = null): Promise<RegistryResponse> {
  return c.request(new URL(url), headers, signal);
}

/** The body taken whole, each piece copied in `take` (which returns nothing). */
async function collect(d: DirectBody, seen?: Buffer[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  await d.consume((chunk) => {
    seen?.push(chunk);
    parts.push(Buffer.from(chunk));
    return undefined;
  });
  return Buffer.concat(parts);
}

/** The body taken whole, each piece copied only after `take` waited `ms`: the piece must stay valid until then. */
async function collectAfterWaits(d: DirectBody, ms: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  await d.consume(async (chunk) => {
    await tick(ms);
    parts.push(Buffer.from(chunk));
  });
  return Buffer.concat(parts);
}

async function text(body: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(c as Buffer);
  return Buffer.concat(parts).toString();
}

/** A 206 of `body` for every request: head in its own write, then the body in odd-sized writes. */
function serve206(body: Buffer, extra: string[] = []) {
  return (s: Socket): void => {
    s.write(head('206 Partial Content', [`Content-Length: ${body.length}`, `Content-Range: bytes 0-${body.length - 1}/${body.length}`, ...extra]));
    writeOdd(s, body);
  };
}

describe('DirectConnections: a 206 read straight off the socket', () => {
  it('hands the body to take in order as views of one read buffer, gives its length and headers, and reuses the connection', async () => {
    const body = randomBytes(3 * 1024 * 1024 + 17);
    const srv = await rawServer(serve206(body));
    const c = client();
    const res = await get(c, `${srv.url}/v2/x/blobs/sha256:ab?n=1`, { range: `bytes=0-${body.length - 1}`, Host: 'ignored.example' });
    expect(res.statusCode).toBe(206);
    expect(res.headers['content-range']).toBe(`bytes 0-${body.length - 1}/${body.length}`);
    expect(res.direct).toBeDefined();
    expect(res.direct!.length).toBe(body.length);
    const seen: Buffer[] = [];
    const got = await collect(res.direct!, seen);
    expect(got.length).toBe(body.length);
    expect(got.equals(body)).toBe(true);
    expect(seen.length).toBeGreaterThan(1);
    // Pieces are views of the connection's read buffer (plus, at most, a copy of what came with the head).
    expect(new Set(seen.map((p) => p.buffer)).size).toBeLessThanOrEqual(2);
    expect(Math.max(...seen.map((p) => p.length))).toBeLessThanOrEqual(128 * 1024);

    const again = await get(c, `${srv.url}/v2/x/blobs/sha256:ab`);
    expect((await collect(again.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(1);
    expect(srv.requests.length).toBe(2);
    const [line, ...headerLines] = srv.requests[0]!.split('\r\n');
    expect(line).toBe('GET /v2/x/blobs/sha256:ab?n=1 HTTP/1.1');
    expect(headerLines).toContain(`host: 127.0.0.1:${srv.port}`);
    expect(headerLines).toContain(`range: bytes=0-${body.length - 1}`);
    // The caller's Host is not sent: the URL's is.
    expect(headerLines.filter((l) => /^host:/i.test(l))).toEqual([`host: 127.0.0.1:${srv.port}`]);
  });

  it('keeps each piece valid until the promise take returned settles, with reads going on into another buffer', async () => {
    const body = randomBytes(2 * 1024 * 1024 + 5);
    const srv = await rawServer(serve206(body));
    const res = await get(client(), srv.url);
    const parts: Buffer[] = [];
    const buffers = new Set<ArrayBufferLike>();
    let n = 0;
    await res.direct!.consume((chunk) => {
      buffers.add(chunk.buffer);
      // Every other piece is copied only after a wait: its view must still hold the same bytes.
      if (n++ % 2 === 1) {
        parts.push(Buffer.from(chunk));
        return undefined;
      }
      return tick(2).then(() => {
        parts.push(Buffer.from(chunk));
      });
    });
    const got = Buffer.concat(parts);
    expect(got.length).toBe(body.length);
    expect(got.equals(body)).toBe(true);
    expect(n).toBeGreaterThan(2);
    // The connection's two read buffers (and perhaps a copy of what came with the head, or of reads while paused).
    expect(buffers.size).toBeGreaterThanOrEqual(2);
  });

  it('keeps a piece valid across a wait when every take waits', async () => {
    const body = randomBytes(2 * 1024 * 1024);
    const srv = await rawServer(serve206(body));
    const res = await get(client(), srv.url);
    expect((await collectAfterWaits(res.direct!, 1)).equals(body)).toBe(true);
  });

  it('keeps body bytes that came in the same write as the head until consume is called later', async () => {
    const small = randomBytes(1000);
    const large = randomBytes(1024 * 1024 + 3);
    const srv = await rawServer((s, h) => {
      const body = h.startsWith('GET /small') ? small : large;
      s.write(Buffer.concat([head('206 Partial Content', [`Content-Length: ${body.length}`]), body]));
    });
    const c = client();
    const a = await get(c, `${srv.url}/small`);
    await tick(50);
    expect((await collect(a.direct!)).equals(small)).toBe(true);
    const b = await get(c, `${srv.url}/large`);
    await tick(50);
    expect((await collect(b.direct!)).equals(large)).toBe(true);
    expect(srv.sockets.length).toBe(1);
  });

  it('skips 1xx answers before the real one', async () => {
    const body = randomBytes(5000);
    const srv = await rawServer((s) => {
      s.write(Buffer.concat([head('100 Continue'), head('103 Early Hints', ['Link: </x>; rel=preload'])]));
      s.write(Buffer.concat([head('206 Partial Content', [`Content-Length: ${body.length}`]), body]));
    });
    const res = await get(client(), srv.url);
    expect(res.statusCode).toBe(206);
    expect(res.headers.link).toBeUndefined();
    expect((await collect(res.direct!)).equals(body)).toBe(true);
  });

  it('reads a 200 with a Content-Length directly too, and an empty one', async () => {
    const body = randomBytes(70_000);
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /empty')) s.write(head('200 OK', ['Content-Length: 0']));
      else serve206(body)(s);
    });
    const c = client();
    const empty = await get(c, `${srv.url}/empty`);
    expect(empty.statusCode).toBe(200);
    expect(empty.direct!.length).toBe(0);
    const take = vi.fn(() => undefined);
    await empty.direct!.consume(take);
    expect(take).not.toHaveBeenCalled();
    const full = await get(c, `${srv.url}/full`);
    expect((await collect(full.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(1);
  });

  it('refuses a second consume, and does not keep a connection whose answer said Connection: close', async () => {
    const body = randomBytes(10_000);
    const srv = await rawServer(serve206(body, ['Connection: close']));
    const c = client();
    const res = await get(c, srv.url);
    const first = collect(res.direct!);
    await expect(res.direct!.consume(() => undefined)).rejects.toThrow(/consumed already/);
    expect((await first).equals(body)).toBe(true);
    await until(() => srv.closed() === 1, 'the server to see the connection closed');
    const again = await get(c, srv.url);
    expect((await collect(again.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('drops the connection of a body destroyed unread, or dumped through its stub body', async () => {
    const body = randomBytes(1024 * 1024);
    const srv = await rawServer(serve206(body));
    const c = client();
    const a = await get(c, srv.url);
    a.direct!.destroy();
    await until(() => srv.closed() === 1, 'the first connection closed');
    await expect(a.direct!.consume(() => undefined)).rejects.toThrow(/dropped/);
    const b = await get(c, srv.url);
    await (b.body as Readable & { dump(): Promise<void> }).dump();
    await until(() => srv.closed() === 2, 'the second connection closed');
    const d = await get(c, srv.url);
    expect((await collect(d.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(3);
  });
});

describe('DirectConnections: other answers, read whole', () => {
  it('gives a 401, a chunked 404, a 301, a 204 and a 304 as ordinary responses, with lower-cased headers, and keeps the connection', async () => {
    const json = JSON.stringify({ errors: [{ code: 'UNAUTHORIZED', message: 'authentication required' }] });
    const srv = await rawServer((s, h) => {
      const path = h.split(' ')[1];
      if (path === '/401') {
        s.write(
          head('401 Unauthorized', [
            'Content-Type: application/json',
            `Content-Length: ${Buffer.byteLength(json)}`,
            'WWW-Authenticate: Bearer realm="https://auth.example/token",service="registry"',
          ]),
        );
        writeOdd(s, Buffer.from(json));
      } else if (path === '/404') {
        s.write(head('404 Not Found', ['Transfer-Encoding: chunked', 'X-A: one', 'X-A: two']));
        writeOdd(s, Buffer.from('5;ext=1\r\nhello\r\n1\r\n \r\nA\r\nnot found!\r\n0\r\nX-Trailer: t\r\n\r\n'));
      } else if (path === '/301') {
        s.write(head('301 Moved Permanently', ['Location: https://cdn.example/blob?sig=1', 'Content-Length: 0']));
      } else if (path === '/204') {
        s.write(head('204 No Content'));
      } else if (path === '/304') {
        s.write(head('304 Not Modified', ['ETag: "x"']));
      } else {
        s.write(Buffer.concat([head('206 Partial Content', ['Content-Length: 3']), Buffer.from('abc')]));
      }
    });
    const c = client();
    const ask = (path: string) => c.request(new URL(`${srv.url}${path}`), {}, null);

    const r401 = await ask('/401');
    expect(r401.statusCode).toBe(401);
    expect(r401.direct).toBeUndefined();
    expect(r401.headers['www-authenticate']).toBe('Bearer realm="https://auth.example/token",service="registry"');
    expect(r401.headers['content-type']).toBe('application/json');
    expect(JSON.parse(await text(r401.body))).toEqual(JSON.parse(json));

    const r404 = await ask('/404');
    expect(r404.statusCode).toBe(404);
    expect(r404.headers['x-a']).toEqual(['one', 'two']);
    expect(await text(r404.body)).toBe('hello not found!');

    const r301 = await ask('/301');
    expect(r301.statusCode).toBe(301);
    expect(r301.headers.location).toBe('https://cdn.example/blob?sig=1');
    expect(await text(r301.body)).toBe('');

    const r204 = await ask('/204');
    expect(r204.statusCode).toBe(204);
    await (r204.body as Readable & { dump(): Promise<void> }).dump();

    const r304 = await ask('/304');
    expect(r304.statusCode).toBe(304);
    expect(await text(r304.body)).toBe('');

    // The connection is still in step: a 206 after them all.
    const ok = await ask('/206');
    expect((await collect(ok.direct!)).toString()).toBe('abc');
    expect(srv.sockets.length).toBe(1);
    expect(srv.requests.length).toBe(6);
  });

  it('keeps only the first 64 KiB of a large error body and does not reuse its connection', async () => {
    const big = Buffer.alloc(200 * 1024, 0x61);
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /big')) {
        s.write(head('500 Internal Server Error', [`Content-Length: ${big.length}`]));
        writeOdd(s, big);
      } else s.write(Buffer.concat([head('404 Not Found', ['Content-Length: 2']), Buffer.from('no')]));
    });
    const c = client();
    const res = await get(c, `${srv.url}/big`);
    expect(res.statusCode).toBe(500);
    const got = await text(res.body);
    expect(got.length).toBeGreaterThanOrEqual(64 * 1024);
    expect(got.length).toBeLessThan(big.length);
    expect(/^a+$/.test(got)).toBe(true);
    await until(() => srv.closed() === 1, 'the connection of the large body closed');
    const next = await get(c, `${srv.url}/small`);
    expect(await text(next.body)).toBe('no');
    expect(srv.sockets.length).toBe(2);
  });

  it('reads an error body without a length up to the close, and the body of a connection lost mid-way fails', async () => {
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /toclose')) s.end(Buffer.concat([head('502 Bad Gateway', ['Connection: close']), Buffer.from('upstream gone')]));
      else {
        s.write(Buffer.concat([head('503 Service Unavailable', ['Content-Length: 100']), Buffer.from('partial')]));
        setTimeout(() => s.destroy(), 20);
      }
    });
    const c = client();
    const a = await get(c, `${srv.url}/toclose`);
    expect(a.statusCode).toBe(502);
    expect(await text(a.body)).toBe('upstream gone');
    const b = await get(c, `${srv.url}/cut`);
    expect(b.statusCode).toBe(503);
    await expect(text(b.body)).rejects.toThrow(/closed/);
  });
});

describe('DirectConnections: a success without a length', () => {
  it('reads a chunked 200 as a stream on its own connection, keeps the connection, and reads a 200 to the close', async () => {
    const big = randomBytes(200_000);
    const srv = await rawServer((s, h) => {
      const chunked = Buffer.concat([
        Buffer.from('3;ext=1\r\nabc\r\n'),
        Buffer.from(`${big.length.toString(16)}\r\n`),
        big,
        Buffer.from('\r\n0\r\nX-Trailer: t\r\n\r\n'),
      ]);
      if (h.startsWith('GET /chunked')) writeOdd(s, Buffer.concat([head('200 OK', ['Transfer-Encoding: chunked']), chunked]));
      else if (h.startsWith('GET /both'))
        s.write(Buffer.concat([head('200 OK', ['Transfer-Encoding: chunked', 'Content-Length: 2']), Buffer.from('4\r\nbody\r\n0\r\n\r\n')]));
      else s.end(Buffer.concat([head('200 OK', ['Connection: close']), Buffer.from('to the close')]));
    });
    const c = client();
    const bytes = async (body: Readable): Promise<Buffer> => {
      const parts: Buffer[] = [];
      for await (const chunk of body) parts.push(chunk as Buffer);
      return Buffer.concat(parts);
    };
    for (let i = 0; i < 2; i++) {
      const a = await get(c, `${srv.url}/chunked`);
      expect(a.statusCode).toBe(200);
      expect(a.direct).toBeUndefined();
      expect((await bytes(a.body)).equals(Buffer.concat([Buffer.from('abc'), big]))).toBe(true);
    }
    // Both on one connection: a chunked body ends at its last chunk, in step.
    expect(srv.sockets).toHaveLength(1);
    // Framed both ways: read per Transfer-Encoding, then the connection is closed, never reused.
    const both = await get(c, `${srv.url}/both`);
    expect(await text(both.body)).toBe('body');
    await until(() => srv.closed() === 1, 'the connection of the doubly framed success closed');
    const b = await get(c, `${srv.url}/toclose`);
    expect(await text(b.body)).toBe('to the close');
    expect(srv.sockets).toHaveLength(2);
    expect(srv.requests.map((r) => r.split(' ')[1])).toEqual(['/chunked', '/chunked', '/both', '/toclose']);
  });

  it('fails the body of a chunked 200 with a malformed chunk, and of one cut before its last chunk', async () => {
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /bad')) s.write(Buffer.concat([head('200 OK', ['Transfer-Encoding: chunked']), Buffer.from('3\r\nabc\r\nzz\r\n')]));
      else s.end(Buffer.concat([head('200 OK', ['Transfer-Encoding: chunked']), Buffer.from('3\r\nabc\r\n')]));
    });
    const c = client();
    await expect(text((await get(c, `${srv.url}/bad`)).body)).rejects.toThrow(/malformed chunk size/);
    await expect(text((await get(c, `${srv.url}/cut`)).body)).rejects.toThrow(/closed/);
  });
});

describe('DirectConnections: failures', () => {
  it('fails consume when the server closes mid-body', async () => {
    const body = randomBytes(300_000);
    const srv = await rawServer((s) => {
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      s.end(body.subarray(0, 100_000));
    });
    const res = await get(client(), srv.url);
    const parts: Buffer[] = [];
    await expect(res.direct!.consume((c) => void parts.push(Buffer.from(c)))).rejects.toThrow(/closed/);
    // What came before the close was handed over, in order.
    expect(Buffer.concat(parts).equals(body.subarray(0, 100_000))).toBe(true);
  });

  it('delivers the body whole when the server sends more than its Content-Length after consume began, and does not reuse that connection', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s, h) => {
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      if (h.startsWith('GET /over')) setTimeout(() => s.write(Buffer.concat([body, Buffer.from('EXTRA BYTES')])), 50);
      else s.write(body);
    });
    const c = client();
    const res = await get(c, `${srv.url}/over`);
    const got = collect(res.direct!);
    // Settles (does not hang) with the body up to its length.
    expect((await Promise.race([got, tick(1_000).then(() => 'hung')])) instanceof Buffer).toBe(true);
    expect((await got).equals(body)).toBe(true);
    await until(() => srv.closed() === 1, 'the out-of-step connection closed');
    const next = await get(c, `${srv.url}/fine`);
    expect((await collect(next.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('delivers the body whole when more than its Content-Length came with the head, and does not reuse that connection', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s, h) => {
      const extra = h.startsWith('GET /over') ? Buffer.from('HTTP/1.1 200 OK\r\n') : Buffer.alloc(0);
      s.write(Buffer.concat([head('206 Partial Content', [`Content-Length: ${body.length}`]), body, extra]));
    });
    const c = client();
    const res = await get(c, `${srv.url}/over`);
    expect((await collect(res.direct!)).equals(body)).toBe(true);
    await until(() => srv.closed() === 1, 'the out-of-step connection closed');
    const next = await get(c, `${srv.url}/fine`);
    expect((await collect(next.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('delivers the body whole when more than its Content-Length came while a take waited', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s) => {
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      s.write(body.subarray(0, 500));
      setTimeout(() => s.write(Buffer.concat([body.subarray(500), Buffer.from('EXTRA')])), 30);
    });
    const res = await get(client(), srv.url);
    expect((await collectAfterWaits(res.direct!, 60)).equals(body)).toBe(true);
  });

  it('rejects a malformed status line, a malformed header, an invalid Content-Length and an oversized head', async () => {
    const srv = await rawServer((s, h) => {
      const path = h.split(' ')[1];
      if (path === '/status') s.write('HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n');
      else if (path === '/header') s.write('HTTP/1.1 206 Partial Content\r\nno colon here\r\n\r\n');
      else if (path === '/length') s.write('HTTP/1.1 206 Partial Content\r\nContent-Length: 5, 6\r\n\r\nhello');
      else s.write(`HTTP/1.1 206 Partial Content\r\nX-Big: ${'b'.repeat(70 * 1024)}`);
    });
    const c = client();
    await expect(get(c, `${srv.url}/status`)).rejects.toThrow(/not an HTTP\/1\.x status line: "HTTP\/2 200 OK"/);
    await expect(get(c, `${srv.url}/header`)).rejects.toThrow(/malformed header line/);
    await expect(get(c, `${srv.url}/length`)).rejects.toThrow(/invalid Content-Length/);
    await expect(get(c, `${srv.url}/head`)).rejects.toThrow(/response head larger than 65536 bytes/);
    await until(() => srv.closed() === 4, 'every failed connection closed');
  });

  it('refuses a header value with a line break without sending it', async () => {
    const srv = await rawServer((s) => s.write(head('200 OK', ['Content-Length: 0'])));
    await expect(get(client(), srv.url, { 'x-evil': 'a\r\nhost: other' })).rejects.toThrow(/line break/);
    // No socket was ever opened for it: the next connection the server sees is the next request's.
    expect(srv.sockets).toHaveLength(0);
    await get(client(), `${srv.url}/next`);
    expect(srv.sockets).toHaveLength(1);
    expect(srv.requests.map((h) => h.split('\r\n')[0])).toEqual(['GET /next HTTP/1.1']);
  });

  it('fails a request whose server sends nothing for the idle timeout, before the head and mid-body', async () => {
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /mid')) s.write(Buffer.concat([head('206 Partial Content', ['Content-Length: 100000']), Buffer.alloc(10_000, 7)]));
      // Then nothing more.
    });
    const c = client({ idleTimeoutMs: 300 });
    let t0 = Date.now();
    await expect(get(c, `${srv.url}/never`)).rejects.toThrow(/timeout: no data from 127\.0\.0\.1:\d+ for 300 ms/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    const res = await get(c, `${srv.url}/mid`);
    t0 = Date.now();
    let taken = 0;
    await expect(res.direct!.consume((chunk) => void (taken += chunk.length))).rejects.toThrow(/timeout: no data from 127\.0\.0\.1:\d+ for 300 ms/);
    expect(taken).toBe(10_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
  });

  it('fails a TLS connection whose handshake does not end within the dial timeout', async () => {
    // A TCP server that accepts and never answers the TLS ClientHello.
    const tcp = createTcpServer((s) => {
      serverSockets.push(s);
      s.on('error', () => {});
    });
    servers.push(tcp);
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const port = (tcp.address() as AddressInfo).port;
    const t0 = Date.now();
    await expect(get(client({ dialTimeoutMs: 300, idleTimeoutMs: 10_000 }), `https://127.0.0.1:${port}/v2/`)).rejects.toThrow(
      /connect timeout: no connection to 127\.0\.0\.1:\d+ within 300 ms/,
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  });

  it('fails a request to a port nothing listens on', async () => {
    const tcp = createTcpServer();
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const port = (tcp.address() as AddressInfo).port;
    await new Promise<void>((resolve) => tcp.close(() => resolve()));
    await expect(get(client(), `http://127.0.0.1:${port}/`)).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('DirectConnections: framing', () => {
  it('fails an error body cut before its first byte at once, instead of never ending', async () => {
    const srv = await rawServer((s) => s.end(head('500 Internal Server Error', ['Content-Length: 7'])));
    const res = await get(client(), `${srv.url}/cut`);
    expect(res.statusCode).toBe(500);
    await expect(text(res.body)).rejects.toThrow(/closed/);
  });

  it('reads no body for a 204, whatever its fields say', async () => {
    const srv = await rawServer((s, h) => {
      if (h.startsWith('GET /204')) s.write(head('204 No Content', ['Transfer-Encoding: chunked']));
      else s.write(Buffer.concat([head('404 Not Found', ['Content-Length: 2']), Buffer.from('no')]));
    });
    const c = client();
    const r = await get(c, `${srv.url}/204`);
    expect(r.statusCode).toBe(204);
    expect(await text(r.body)).toBe('');
    // The connection waited for no chunk: the next answer on it is read whole.
    expect(await text((await get(c, `${srv.url}/next`)).body)).toBe('no');
    expect(srv.sockets).toHaveLength(1);
  });

  it('reads a response with both Transfer-Encoding and Content-Length per its Transfer-Encoding, then closes its connection: the next request goes out on a new one', async () => {
    const srv = await rawServer((s, h) => {
      // The Content-Length (3) is a lie the chunked framing overrides; after the last chunk, bytes a
      // reused connection would read as the next answer.
      if (h.startsWith('GET /both'))
        s.write(Buffer.concat([head('404 Not Found', ['Transfer-Encoding: chunked', 'Content-Length: 3']), Buffer.from('5\r\nhello\r\n0\r\n\r\n')]));
      else s.write(Buffer.concat([head('404 Not Found', ['Content-Length: 5']), Buffer.from('plain')]));
    });
    const c = client();
    // The control: a framed 404 leaves its connection for the next request.
    expect(await text((await get(c, `${srv.url}/one`)).body)).toBe('plain');
    expect(await text((await get(c, `${srv.url}/two`)).body)).toBe('plain');
    expect(srv.sockets).toHaveLength(1);
    const both = await get(c, `${srv.url}/both`);
    expect(both.statusCode).toBe(404);
    expect(await text(both.body)).toBe('hello');
    await until(() => srv.closed() === 1, 'the connection of the doubly framed response closed');
    expect(await text((await get(c, `${srv.url}/after`)).body)).toBe('plain');
    expect(srv.sockets).toHaveLength(2);
    expect(srv.requests.map((r) => r.split(' ')[1])).toEqual(['/one', '/two', '/both', '/after']);
  });
});

describe('DirectConnections: aborts', () => {
  it('rejects with an AbortError when the signal aborted already, or aborts before the head', async () => {
    const srv = await rawServer(() => {});
    const c = client();
    const pre = new AbortController();
    pre.abort();
    await expect(get(c, srv.url, {}, pre.signal)).rejects.toMatchObject({ name: 'AbortError' });
    expect(srv.sockets.length).toBe(0);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    await expect(get(c, srv.url, {}, ac.signal)).rejects.toMatchObject({ name: 'AbortError' });
    await until(() => srv.closed() === 1, 'the aborted connection closed');
  });

  it('fails consume on an abort mid-body, and takes nothing after', async () => {
    let writes = 0;
    const srv = await rawServer((s) => {
      s.write(head('206 Partial Content', [`Content-Length: ${1024 * 1024}`]));
      const timer = setInterval(() => {
        if (s.destroyed || ++writes > 300) clearInterval(timer);
        else s.write(Buffer.alloc(1024, 1));
      }, 3);
    });
    const ac = new AbortController();
    const res = await get(client(), srv.url, {}, ac.signal);
    let takes = 0;
    const consuming = res.direct!.consume(() => {
      if (++takes === 3) setTimeout(() => ac.abort(), 0);
      return undefined;
    });
    await expect(consuming).rejects.toMatchObject({ name: 'AbortError' });
    const at = takes;
    expect(at).toBeGreaterThanOrEqual(3);
    await until(() => srv.closed() === 1, 'the aborted connection closed');
    await tick(50);
    expect(takes).toBe(at);
  });

  it('fails consume on an abort while a take waits, once that take settled, and takes nothing after', async () => {
    const srv = await rawServer(serve206(randomBytes(1024 * 1024)));
    const ac = new AbortController();
    const res = await get(client(), srv.url, {}, ac.signal);
    let takes = 0;
    let settledAt = 0;
    const consuming = res.direct!.consume(() => {
      takes++;
      if (takes === 1) {
        setTimeout(() => ac.abort(), 10);
        return tick(60).then(() => void (settledAt = Date.now()));
      }
      return undefined;
    });
    await expect(consuming).rejects.toMatchObject({ name: 'AbortError' });
    expect(settledAt).toBeGreaterThan(0);
    expect(takes).toBe(1);
    await tick(50);
    expect(takes).toBe(1);
  });

  it('leaves a finished body alone when its signal aborts afterwards, and keeps its connection', async () => {
    const body = randomBytes(5000);
    const srv = await rawServer(serve206(body));
    const c = client();
    const ac = new AbortController();
    const res = await get(c, srv.url, {}, ac.signal);
    expect((await collect(res.direct!)).equals(body)).toBe(true);
    ac.abort();
    await tick(20);
    const again = await get(c, srv.url);
    expect((await collect(again.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(1);
    expect(srv.closed()).toBe(0);
  });
});

describe('DirectConnections: kept-alive connections', () => {
  it('opens a new connection when the server closed the kept one while it sat idle (body read as it came)', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s) => {
      // The body comes after consume began: the connection reads on, and so sees the close while idle.
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      setTimeout(() => s.write(body), 30);
      setTimeout(() => s.end(), 60);
    });
    const c = client();
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    await until(() => srv.closed() === 1, 'the idle connection closed on both sides');
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
    expect(srv.requests.length).toBe(2);
  });

  it('opens a new connection when the server closed the kept one while it sat idle (body that came with the head)', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s) => {
      s.write(Buffer.concat([head('206 Partial Content', [`Content-Length: ${body.length}`]), body]));
      setTimeout(() => s.end(), 20);
    });
    const c = client();
    const first = await get(c, srv.url);
    await tick(5);
    expect((await collect(first.direct!)).equals(body)).toBe(true);
    await tick(60);
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('sends the request again, once, on a new connection when the kept one closes before any byte of the answer', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer((s, _h, nth) => {
      // The second request on a connection: closed unanswered, as a server that timed it out just then.
      if (nth === 1) s.destroy();
      else serve206(body)(s);
    });
    const c = client();
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    const res = await get(c, srv.url);
    expect((await collect(res.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
    expect(srv.requests.length).toBe(3);
  });

  it('does not send again when a new connection closes unanswered, nor more than once for a kept one', async () => {
    const body = randomBytes(100);
    let answerFirst = true;
    const srv = await rawServer((s, _h, nth) => {
      if (nth === 0 && answerFirst) {
        answerFirst = false;
        serve206(body)(s);
      } else s.destroy();
    });
    const c = client();
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    // Kept connection closed unanswered, then the new one too: fails, after two connections.
    await expect(get(c, srv.url)).rejects.toThrow(/closed/);
    expect(srv.sockets.length).toBe(2);
    expect(srv.requests.length).toBe(3);
    // A new connection closed unanswered: fails at once.
    await expect(get(c, srv.url)).rejects.toThrow(/closed/);
    expect(srv.sockets.length).toBe(3);
    expect(srv.requests.length).toBe(4);
  });

  it('does not send again when the kept connection closes after part of the answer', async () => {
    const body = randomBytes(100);
    const srv = await rawServer((s, _h, nth) => {
      if (nth === 0) serve206(body)(s);
      else s.end('HTTP/1.1 206 Part');
    });
    const c = client();
    await collect((await get(c, srv.url)).direct!);
    await expect(get(c, srv.url)).rejects.toThrow(/closed/);
    expect(srv.sockets.length).toBe(1);
  });

  it('drops a kept connection on bytes its server sends outside of a response', async () => {
    const body = randomBytes(100);
    const srv = await rawServer((s, _h, nth) => {
      // The body comes after consume began (the connection reads on while idle), then bytes of nothing.
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      setTimeout(() => s.write(body), 30);
      if (nth === 0) setTimeout(() => s.write('garbage'), 60);
    });
    const c = client();
    await collect((await get(c, srv.url)).direct!);
    await until(() => srv.closed() === 1, 'the out-of-step connection closed');
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('drops a kept connection on bytes its server sends after a body that came with the head (the connection paused for it)', async () => {
    const body = randomBytes(100);
    const srv = await rawServer((s, _h, nth) => {
      // Head and body in one write: they are taken from copies, so the socket sat paused until then.
      s.write(Buffer.concat([head('206 Partial Content', [`Content-Length: ${body.length}`]), body]));
      if (nth === 0) setTimeout(() => s.write('garbage'), 30);
    });
    const c = client();
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    await until(() => srv.closed() === 1, 'the out-of-step connection closed');
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('opens at most `connections` connections per origin: later requests wait for one to come free or go, an aborted wait takes none', async () => {
    const body = randomBytes(1000);
    const held: Socket[] = [];
    const srv = await rawServer((s) => held.push(s));
    const answer = (s: Socket) => {
      s.write(head('206 Partial Content', [`Content-Length: ${body.length}`]));
      s.write(body);
    };
    const c = client({ connections: 2 });
    const reqs = Array.from({ length: 4 }, () => get(c, srv.url));
    const aborted = new AbortController();
    const gaveUp = get(c, srv.url, {}, aborted.signal);
    await until(() => held.length === 2, 'two requests reached the server');
    await tick(50);
    expect(srv.sockets.length).toBe(2);
    aborted.abort();
    await expect(gaveUp).rejects.toMatchObject({ name: 'AbortError' });
    // The first two are answered; each connection then carries a waiting request.
    for (const s of held.splice(0)) answer(s);
    const first = await Promise.all(reqs.slice(0, 2));
    for (const r of first) expect((await collect(r.direct!)).equals(body)).toBe(true);
    await until(() => held.length === 2, 'the waiting requests reached the server');
    expect(srv.sockets.length).toBe(2);
    // One connection is lost unanswered: its request goes out again, on a new connection in its place.
    const lost = held.shift()!;
    lost.destroy();
    answer(held.shift()!);
    await until(() => held.length === 1, 'the lost request sent again');
    expect(srv.sockets.length).toBe(3);
    answer(held.shift()!);
    for (const r of await Promise.all(reqs.slice(2))) expect((await collect(r.direct!)).equals(body)).toBe(true);
    // Two connections live, both idle: the next two requests take them.
    const again = get(c, srv.url);
    const more = get(c, srv.url);
    await until(() => held.length === 2, 'two more requests reached the server');
    for (const s of held.splice(0)) answer(s);
    for (const r of await Promise.all([again, more])) expect((await collect(r.direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(3);
  });

  it('closes a connection idle in the pool for the keep-alive timeout', async () => {
    const body = randomBytes(100);
    const srv = await rawServer(serve206(body));
    const c = client({ keepAliveTimeoutMs: 150 });
    await collect((await get(c, srv.url)).direct!);
    const t0 = Date.now();
    await until(() => srv.closed() === 1, 'the idle connection closed');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
    expect(srv.sockets.length).toBe(2);
  });

  it('keeps one connection per origin and uses them apart', async () => {
    const a = await rawServer(serve206(Buffer.from('from a')));
    const b = await rawServer(serve206(Buffer.from('from b')));
    const c = client();
    const [ra, rb] = await Promise.all([get(c, a.url), get(c, b.url)]);
    expect((await collect(ra.direct!)).toString()).toBe('from a');
    expect((await collect(rb.direct!)).toString()).toBe('from b');
    // Two at once on one origin: two connections; then both kept.
    const [x, y] = await Promise.all([get(c, a.url), get(c, a.url)]);
    await Promise.all([collect(x.direct!), collect(y.direct!)]);
    const [z, w] = await Promise.all([get(c, a.url), get(c, a.url)]);
    expect((await collect(z.direct!)).toString()).toBe('from a');
    expect((await collect(w.direct!)).toString()).toBe('from a');
    expect(a.sockets.length).toBe(2);
    expect(b.sockets.length).toBe(1);
  });
});

describe('DirectConnections: take failing', () => {
  for (const how of ['throws', 'rejects'] as const) {
    it(`rejects consume with the very error take ${how} with, and drops the connection`, async () => {
      const body = randomBytes(1024 * 1024);
      const srv = await rawServer(serve206(body));
      const c = client();
      const res = await get(c, srv.url);
      const boom = new Error(`take ${how}`);
      let takes = 0;
      await expect(
        res.direct!.consume(() => {
          if (++takes < 2) return undefined;
          if (how === 'throws') throw boom;
          return tick(5).then(() => Promise.reject(boom));
        }),
      ).rejects.toBe(boom);
      expect(takes).toBe(2);
      await until(() => srv.closed() === 1, 'the server to see the connection closed');
      await tick(20);
      expect(takes).toBe(2);
      // The next request goes out on a new connection.
      expect((await collect((await get(c, srv.url)).direct!)).equals(body)).toBe(true);
      expect(srv.sockets.length).toBe(2);
    });
  }
});

describe('DirectConnections over TLS', () => {
  let dir: string;
  let tls: { key: Buffer; cert: Buffer };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fastpull-direct-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'server.key'),
        '-out',
        join(dir, 'server.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    tls = { key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.pem')) };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function httpsServer(body: Buffer): Promise<{ url: string; connections: () => number }> {
    let connections = 0;
    const server = createHttpsServer({ ...tls, keepAliveTimeout: 5_000 }, (_req, res) => {
      res.writeHead(206, { 'content-length': String(body.length), 'content-range': `bytes 0-${body.length - 1}/${body.length}` });
      for (let at = 0, i = 0; at < body.length; i++) {
        const n = Math.min([7, 70_001, 16_385, 1][i % 4]!, body.length - at);
        res.write(body.subarray(at, at + n));
        at += n;
      }
      res.end();
    });
    server.on('secureConnection', () => connections++);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v2/x/blobs/sha256:ab`, connections: () => connections };
  }

  it('reads a 206 over https with the CA it is given, with takes that return nothing or wait, on one connection', async () => {
    const body = randomBytes(3 * 1024 * 1024 + 11);
    const srv = await httpsServer(body);
    const c = client({ ca: [tls.cert] });
    const res = await get(c, srv.url);
    expect(res.statusCode).toBe(206);
    expect(res.direct!.length).toBe(body.length);
    expect((await collect(res.direct!)).equals(body)).toBe(true);
    const again = await get(c, srv.url);
    const parts: Buffer[] = [];
    let n = 0;
    await again.direct!.consume((chunk) => {
      if (n++ % 3 !== 0) return void parts.push(Buffer.from(chunk));
      return tick(1).then(() => void parts.push(Buffer.from(chunk)));
    });
    expect(Buffer.concat(parts).equals(body)).toBe(true);
    expect(srv.connections()).toBe(1);
  });

  it('refuses an unknown certificate unless told not to verify', async () => {
    const body = randomBytes(100_000);
    const srv = await httpsServer(body);
    await expect(get(client(), srv.url)).rejects.toThrow(/self[- ]signed|certificate/i);
    const res = await get(client({ rejectUnauthorized: false }), srv.url);
    expect((await collect(res.direct!)).equals(body)).toBe(true);
  });
});

describe('DirectConnections: closing', () => {
  it('keeps nothing alive: a kept connection does not hold the process, and close() ends every connection', async () => {
    const body = randomBytes(1000);
    const srv = await rawServer(serve206(body));
    // The client's sockets (to the server's port) among the handles that keep the process alive.
    const holding = () =>
      (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().filter((h) => h instanceof Socket && h.remotePort === srv.port).length;
    const c = client();
    const res = await get(c, srv.url);
    // Under way: the connection holds the process.
    expect(holding()).toBe(1);
    await collect(res.direct!);
    // Kept in the pool: it does not.
    expect(holding()).toBe(0);
    expect(srv.closed()).toBe(0);
    c.close();
    await until(() => srv.closed() === 1, 'the server to see the connection closed');
    expect(holding()).toBe(0);
    await expect(get(c, srv.url)).rejects.toThrow(/closed/);
  });

  it('fails a body under way when the pool closes', async () => {
    const srv = await rawServer((s) => s.write(Buffer.concat([head('206 Partial Content', ['Content-Length: 100000']), Buffer.alloc(100, 1)])));
    const c = client();
    const res = await get(c, srv.url);
    const consuming = res.direct!.consume(() => undefined);
    await tick(20);
    c.close();
    await expect(consuming).rejects.toThrow(/the connection pool is closed/);
    await until(() => srv.closed() === 1, 'the server to see the connection closed');
  });
});

describe('parseHead', () => {
  it('gives the status, lower-cased header names, lists for repeated headers and trimmed values', () => {
    const h = parseHead('HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nX-A: one\r\nx-a:two \r\nX-A:  three\r\nWWW-Authenticate: Bearer realm="r"');
    expect(h.status).toBe(206);
    expect(h.headers).toEqual({ 'content-length': '10', 'x-a': ['one', 'two', 'three'], 'www-authenticate': 'Bearer realm="r"' });
    expect(h.keepAlive).toBe(true);
    expect(parseHead('HTTP/1.1 404').status).toBe(404);
    expect(parseHead('HTTP/1.1 200 ').headers).toEqual({});
  });

  it('keeps HTTP/1.1 alive unless told to close, and HTTP/1.0 only when told to keep alive', () => {
    expect(parseHead('HTTP/1.1 200 OK').keepAlive).toBe(true);
    expect(parseHead('HTTP/1.1 200 OK\r\nConnection: close').keepAlive).toBe(false);
    expect(parseHead('HTTP/1.1 200 OK\r\nConnection: Close').keepAlive).toBe(false);
    expect(parseHead('HTTP/1.1 200 OK\r\nConnection: keep-alive').keepAlive).toBe(true);
    expect(parseHead('HTTP/1.0 200 OK').keepAlive).toBe(false);
    expect(parseHead('HTTP/1.0 200 OK\r\nConnection: Keep-Alive').keepAlive).toBe(true);
    expect(parseHead('HTTP/1.0 200 OK\r\nConnection: close').keepAlive).toBe(false);
  });

  it('throws on a malformed status line or header line', () => {
    expect(() => parseHead('HTTP/2 200 OK')).toThrow(/not an HTTP\/1\.x status line/);
    expect(() => parseHead('HTTP/1.1 20 OK')).toThrow(/status line/);
    expect(() => parseHead('HTTP/1.1 2000 OK')).toThrow(/status line/);
    expect(() => parseHead('ICY 200 OK')).toThrow(/status line/);
    expect(() => parseHead('')).toThrow(/status line/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\nno colon')).toThrow(/malformed header line/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\n: empty name')).toThrow(/malformed header line/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\nA: b\r\n folded')).toThrow(/malformed header line/);
    expect(() => parseHead('HTTP/1.1 200 OK\r\nbad name: x')).toThrow(/malformed header name/);
  });
});
