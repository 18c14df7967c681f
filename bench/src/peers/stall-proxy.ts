// A loopback HTTP proxy in front of the registry that shapes the link: the first GET of one blob
// sends `afterBytes` bytes of its body, then nothing more, holding the connection open (a stalled
// connection, as a wedged load balancer or a lost TCP path looks to a client). Everything else
// passes through.
import { Agent, createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface StallProxy {
  readonly host: string;
  /** Blob GETs stalled so far. */
  stalled(): number;
  close(): Promise<void>;
}

export async function startStallProxy(upstream: string, digest: string, afterBytes: number, times = 1): Promise<StallProxy> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const sockets = new Set<Socket>();
  let left = times;
  let stalledCount = 0;
  const server = createServer((req, res) => {
    const stall = req.method === 'GET' && left > 0 && (req.url ?? '').includes(`/blobs/${digest}`);
    if (stall) left--;
    const headers: IncomingHttpHeaders = { ...req.headers, host: target.host };
    const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (ures) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(ures.headers)) if (v !== undefined) out[k] = v;
      res.writeHead(ures.statusCode ?? 502, out);
      if (!stall) {
        ures.pipe(res);
        return;
      }
      let sent = 0;
      ures.on('data', (chunk: Buffer) => {
        if (sent >= afterBytes) return;
        const part = chunk.subarray(0, afterBytes - sent);
        sent += part.byteLength;
        res.write(part);
        if (sent >= afterBytes) {
          stalledCount++;
          // Stop reading upstream; the client's connection stays open and silent until it gives up.
          ures.destroy();
        }
      });
      ures.on('end', () => {
        if (sent < afterBytes) res.end();
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    stalled: () => stalledCount,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };
}
