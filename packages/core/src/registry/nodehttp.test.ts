// The registry client's own connections (node:http and node:https) against loopback servers: what a
// request sends and what its response looks like, connection reuse and limits, timeouts, aborts.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeHttpPool, type NodeHttpPoolOptions } from './nodehttp.js';

const servers: (Server | TcpServer)[] = [];
const pools: NodeHttpPool[] = [];

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
  for (const s of servers.splice(0)) {
    (s as Server).closeAllConnections?.();
    s.close();
  }
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; sockets: Set<Socket>; peak: () => number }> {
  const server = createServer(handler);
  const sockets = new Set<Socket>();
  let open = 0;
  let peak = 0;
  server.on('connection', (s) => {
    sockets.add(s);
    peak = Math.max(peak, ++open);
    s.on('close', () => open--);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets, peak: () => peak };
}

function pool(options: Partial<NodeHttpPoolOptions> = {}): NodeHttpPool {
  const p = new NodeHttpPool({ connections: 4, idleTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, dialTimeoutMs: 5_000, ...options });
  pools.push(p);
  return p;
}

const tick = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function text(body: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(c);
  return Buffer.concat(parts).toString();
}

describe('NodeHttpPool', () => {
  it('sends the method, path, query, headers and body, and gives the status, lower-case headers (a repeated one as a list) and body', async () => {
    const { url } = await serve((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        res.setHeader('X-One', 'a');
        res.setHeader('WWW-Authenticate', ['Bearer realm="r"', 'Basic realm="b"']);
        res.statusCode = 201;
        res.end(`${req.method} ${req.url} ${req.headers['x-test']} ${req.headers['content-length']} ${body}`);
      });
    });
    const res = await pool().request(new URL(`${url}/v2/x/blobs/sha256:ab?n=1&last=b`), {
      method: 'POST',
      headers: { 'x-test': 'yes' },
      body: 'a=1&b=2',
      signal: null,
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-one']).toBe('a');
    expect(res.headers['www-authenticate']).toEqual(['Bearer realm="r"', 'Basic realm="b"']);
    expect(await text(res.body as AsyncIterable<Buffer>)).toBe('POST /v2/x/blobs/sha256:ab?n=1&last=b yes 7 a=1&b=2');
  });

  it('reads a blob GET straight off the socket, or through node:http when the tuning says directRanges: false', async () => {
    const { url } = await serve((_req, res) => {
      res.setHeader('Content-Length', '5');
      res.end('hello');
    });
    const blob = new URL(`${url}/v2/x/blobs/sha256:ab`);
    const direct = await pool().requestBlob(blob, { method: 'GET', headers: {}, signal: null });
    expect(direct.statusCode).toBe(200);
    expect(direct.direct).toBeDefined();
    direct.direct!.destroy();
    const plain = await pool({ directRanges: false }).requestBlob(blob, { method: 'GET', headers: {}, signal: null });
    expect(plain.statusCode).toBe(200);
    expect(plain.direct).toBeUndefined();
    expect(await text(plain.body as AsyncIterable<Buffer>)).toBe('hello');
  });

  it('keeps a connection after a read or dumped body, closes it after a dump past the limit, and opens at most `connections` at once', async () => {
    const { url, sockets, peak } = await serve((req, res) => {
      const n = Number(new URL(req.url!, 'http://x').searchParams.get('n'));
      setTimeout(() => res.end(Buffer.alloc(n, 1)), 20);
    });
    const p = pool({ connections: 2 });
    const a = await p.request(new URL(`${url}/?n=10`), { method: 'GET', headers: {}, signal: null });
    expect((await text(a.body as AsyncIterable<Buffer>)).length).toBe(10);
    const b = await p.request(new URL(`${url}/?n=1000`), { method: 'GET', headers: {}, signal: null });
    await b.body.dump({ limit: 4096 });
    expect(sockets.size).toBe(1);
    const c = await p.request(new URL(`${url}/?n=${4 * 1024 * 1024}`), { method: 'GET', headers: {}, signal: null });
    await c.body.dump({ limit: 4096 });
    const d = await p.request(new URL(`${url}/?n=10`), { method: 'GET', headers: {}, signal: null });
    await d.body.dump();
    expect(sockets.size).toBe(2);
    const many = await Promise.all(
      Array.from({ length: 6 }, () =>
        p.request(new URL(`${url}/?n=100`), { method: 'GET', headers: {}, signal: null }).then((r) => text(r.body as AsyncIterable<Buffer>)),
      ),
    );
    expect(many.every((t) => t.length === 100)).toBe(true);
    expect(peak()).toBeLessThanOrEqual(2);
  });

  it('fails a request whose server sends nothing for the idle timeout, before the headers and mid-body', async () => {
    const { url } = await serve((req, res) => {
      if (req.url === '/mid') {
        res.writeHead(200, { 'content-length': '100' });
        res.write('x'.repeat(10));
      }
      // Then nothing more.
    });
    const p = pool({ idleTimeoutMs: 200 });
    await expect(p.request(new URL(`${url}/never`), { method: 'GET', headers: {}, signal: null })).rejects.toThrow(/no data from 127\.0\.0\.1:\d+ for 200 ms/);
    const res = await p.request(new URL(`${url}/mid`), { method: 'GET', headers: {}, signal: null });
    expect(res.statusCode).toBe(200);
    await expect(text(res.body as AsyncIterable<Buffer>)).rejects.toThrow();
  });

  it('fails a TLS connection whose handshake does not end within the dial timeout', async () => {
    // A TCP server that accepts and never answers the TLS ClientHello.
    const held: Socket[] = [];
    const tcp = createTcpServer((s) => held.push(s));
    servers.push(tcp);
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const port = (tcp.address() as AddressInfo).port;
    await expect(
      pool({ dialTimeoutMs: 150, idleTimeoutMs: 10_000 }).request(new URL(`https://127.0.0.1:${port}/v2/`), { method: 'GET', headers: {}, signal: null }),
    ).rejects.toThrow(/connect timeout: no connection to 127\.0\.0\.1:\d+ within 150 ms/);
    for (const s of held) s.destroy();
  });

  it('stops a body when its signal is aborted, and refuses requests once closed', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': String(1 << 20) });
      res.write(Buffer.alloc(1024));
    });
    const p = pool();
    const ac = new AbortController();
    const res = await p.request(new URL(url), { method: 'GET', headers: {}, signal: ac.signal });
    const reading = text(res.body as AsyncIterable<Buffer>);
    setTimeout(() => ac.abort(), 50);
    await expect(reading).rejects.toThrow();
    const aborted = new AbortController();
    aborted.abort();
    await expect(p.request(new URL(url), { method: 'GET', headers: {}, signal: aborted.signal })).rejects.toThrow(/abort/i);
    await p.close();
    await expect(p.request(new URL(url), { method: 'GET', headers: {}, signal: null })).rejects.toThrow(/closed/);
  });

  it('leaves a response that was read, or dumped unread, alone when its signal is aborted afterwards: no error, its connection kept', async () => {
    const { url, sockets } = await serve((req, res) => {
      res.writeHead(req.url === '/error' ? 416 : 200, { 'content-length': '5' });
      res.end('hello');
    });
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      const p = pool();
      const read = new AbortController();
      const a = await p.request(new URL(`${url}/ok`), { method: 'GET', headers: {}, signal: read.signal });
      expect(await text(a.body as AsyncIterable<Buffer>)).toBe('hello');
      read.abort();
      const dumped = new AbortController();
      const b = await p.request(new URL(`${url}/error`), { method: 'GET', headers: {}, signal: dumped.signal });
      // As a failed range does: the body dumped in the background while the download is aborted.
      const dumping = b.body.dump();
      dumped.abort();
      await dumping;
      await tick(50);
      const c = await p.request(new URL(`${url}/ok`), { method: 'GET', headers: {}, signal: null });
      expect(await text(c.body as AsyncIterable<Buffer>)).toBe('hello');
      expect(uncaught).toEqual([]);
      expect(sockets.size).toBeLessThanOrEqual(2);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });

  it('talks TLS: trusts the CA it is given (else refuses an unknown certificate unless told to skip verification) and presents its client certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastpull-tls-'));
    try {
      const cert = (name: string, cn: string) => {
        execFileSync(
          'openssl',
          [
            'req',
            '-x509',
            '-newkey',
            'rsa:2048',
            '-nodes',
            '-keyout',
            join(dir, `${name}.key`),
            '-out',
            join(dir, `${name}.pem`),
            '-days',
            '1',
            '-subj',
            `/CN=${cn}`,
            '-addext',
            'subjectAltName=IP:127.0.0.1',
          ],
          { stdio: 'ignore' },
        );
        return { key: readFileSync(join(dir, `${name}.key`)), cert: readFileSync(join(dir, `${name}.pem`)) };
      };
      const server = cert('server', '127.0.0.1');
      const client = cert('client', 'fastpull-client');
      // The server asks for a client certificate signed by (here: equal to) the client's own.
      const https = createTlsServer({ ...server, ca: [client.cert], requestCert: true, rejectUnauthorized: true }, (req, res) => {
        const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate();
        res.end(`hello ${peer.subject?.CN ?? 'nobody'}`);
      });
      servers.push(https);
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
      const url = new URL(`https://127.0.0.1:${(https.address() as AddressInfo).port}/v2/`);
      const get = (p: NodeHttpPool) => p.request(url, { method: 'GET', headers: {}, signal: null }).then((r) => text(r.body as AsyncIterable<Buffer>));
      // The system's CAs do not know the server's certificate.
      await expect(get(pool({ cert: client.cert, key: client.key }))).rejects.toThrow(/self[- ]signed|certificate/i);
      // Its CA given but no client certificate: the server ends the handshake.
      await expect(get(pool({ ca: [server.cert] }))).rejects.toThrow();
      expect(await get(pool({ ca: [server.cert], cert: client.cert, key: client.key }))).toBe('hello fastpull-client');
      expect(await get(pool({ rejectUnauthorized: false, cert: client.cert, key: client.key }))).toBe('hello fastpull-client');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
