// A minimal loopback server for the fetch benchmark, run as its own process: it answers /v2/ and
// serves one file as the blob at any /v2/<name>/blobs/<digest> path, with single Range support.
// Usage: node blob-server.js FILE [CERT KEY]  (prints the port on stdout; HTTPS with CERT and KEY)
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

const [file, cert, key] = process.argv.slice(2) as [string, string?, string?];
const size = statSync(file).size;
const serve: RequestListener = (req, res) => {
  if (req.url === '/v2/') {
    res.writeHead(200, { 'content-length': 0 }).end();
    return;
  }
  if (!/^\/v2\/.+\/blobs\/sha256:[0-9a-f]{64}$/.test(req.url ?? '')) {
    res.writeHead(404, { 'content-length': 0 }).end();
    return;
  }
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const start = m ? Number(m[1]) : 0;
  const end = m && m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
  const headers: Record<string, string | number> = { 'content-length': end - start + 1, 'accept-ranges': 'bytes' };
  if (m) headers['content-range'] = `bytes ${start}-${end}/${size}`;
  res.writeHead(m ? 206 : 200, headers);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  createReadStream(file, { start, end, highWaterMark: 1024 * 1024 }).pipe(res);
};
const server = cert && key ? createHttpsServer({ cert: readFileSync(cert), key: readFileSync(key) }, serve) : createServer(serve);
server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
