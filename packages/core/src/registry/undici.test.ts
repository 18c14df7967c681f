// The library loads no undici: neither importing it nor a registry client on its own connections
// does; a caller's own undici dispatcher is called through its request API.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Agent } from 'undici';
import { sendRequest } from './undici.js';

describe("undici, a caller's dispatcher only", () => {
  it('is loaded neither by importing the library nor by a client that sends requests on its own connections', async () => {
    const server = createServer((_req, res) => {
      res.statusCode = 404;
      res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const index = new URL('../index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/index.js');
    const script = [
      `const core = await import(${JSON.stringify(index)});`,
      `const { createRequire } = await import('node:module');`,
      `const files = () => Object.keys(createRequire(import.meta.url).cache).filter((k) => /[\\\\/]undici[\\\\/]/.test(k));`,
      `const loaded = () => files().length > 0;`,
      `const before = loaded();`,
      `const { RegistryClient } = await import(${JSON.stringify(index.replace(/index\.js$/, 'registry/index.js'))});`,
      `const client = new RegistryClient({ plainHttp: true });`,
      `const { parseReference } = core;`,
      `const res = await client.request(parseReference('127.0.0.1:${port}/x:1'), 'manifests/1');`,
      `await res.body.dump();`,
      `if (res.statusCode !== 404) throw new Error('status ' + res.statusCode);`,
      `const index = files().some((k) => /[\\\\/]undici[\\\\/]index\\.js$/.test(k));`,
      `const web = files().filter((k) => /[\\\\/]lib[\\\\/](web|mock|cache)[\\\\/]/.test(k)).length;`,
      `console.log(JSON.stringify({ imported: typeof core.pull, before, after: loaded(), index, web }));`,
      `await client.close();`,
    ].join('\n');
    // Not spawnSync: the server the child asks runs in this process.
    const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { timeout: 120_000 });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
    server.close();
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual({ imported: 'function', before: false, after: false, index: false, web: 0 });
  });

  it('sends a request through the given dispatcher, path and query as in the URL', async () => {
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'text/plain');
      res.end(`${req.method} ${req.url} ${req.headers['x-test']}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const dispatcher = new Agent();
    try {
      const res = await sendRequest(new URL(`http://127.0.0.1:${port}/v2/x/blobs/sha256:ab?n=1&last=b`), {
        dispatcher,
        method: 'GET',
        headers: { 'x-test': 'yes' },
        signal: null,
        blob: true,
      });
      // A blob through a caller's dispatcher comes as an ordinary body.
      expect(res.direct).toBeUndefined();
      expect(res.statusCode).toBe(200);
      const parts: Buffer[] = [];
      for await (const chunk of res.body) parts.push(chunk as Buffer);
      expect(Buffer.concat(parts).toString()).toBe('GET /v2/x/blobs/sha256:ab?n=1&last=b yes');
      expect(res.headers['content-type']).toBe('text/plain');
    } finally {
      await dispatcher.close();
      server.close();
    }
  });
});
