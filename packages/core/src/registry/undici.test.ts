// undici is loaded by the first registry client, not by importing the library.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { undici } from './undici.js';

describe('undici, loaded on first use', () => {
  it('is not loaded by importing the library, and is by making a registry client', () => {
    const index = new URL('../index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/index.js');
    const script = [
      `const core = await import(${JSON.stringify(index)});`,
      `const { createRequire } = await import('node:module');`,
      `const files = () => Object.keys(createRequire(import.meta.url).cache).filter((k) => /[\\\\/]undici[\\\\/]/.test(k));`,
      `const loaded = () => files().length > 0;`,
      `const before = loaded();`,
      `const { RegistryClient } = await import(${JSON.stringify(index.replace(/index\.js$/, 'registry/index.js'))});`,
      `const client = new RegistryClient({ plainHttp: true });`,
      `const index = files().some((k) => /[\\\\/]undici[\\\\/]index\\.js$/.test(k));`,
      `const web = files().filter((k) => /[\\\\/]lib[\\\\/](web|mock|cache)[\\\\/]/.test(k)).length;`,
      `console.log(JSON.stringify({ imported: typeof core.pull, before, after: loaded(), index, web }));`,
      `await client.close();`,
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    // Its dispatchers and request API only: not its index, nor fetch, WebSocket, mocks or caches.
    expect(JSON.parse(r.stdout.trim())).toEqual({ imported: 'function', before: false, after: true, index: false, web: 0 });
  });

  it('shares its Agent with an import of undici', async () => {
    const imported = await import('undici');
    expect(undici().Agent).toBe(imported.Agent);
  });

  it('sends a request through the given dispatcher, path and query as in the URL', async () => {
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'text/plain');
      res.end(`${req.method} ${req.url} ${req.headers['x-test']}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const dispatcher = new (undici().Agent)();
    try {
      const res = await undici().request(new URL(`http://127.0.0.1:${port}/v2/x/blobs/sha256:ab?n=1&last=b`), { dispatcher, method: 'GET', headers: { 'x-test': 'yes' }, signal: null });
      expect(res.statusCode).toBe(200);
      expect(await res.body.text()).toBe('GET /v2/x/blobs/sha256:ab?n=1&last=b yes');
    } finally {
      await dispatcher.close();
      server.close();
    }
  });
});
