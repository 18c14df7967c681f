// undici is loaded by the first registry client, not by importing the library.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { undici } from './undici.js';

describe('undici, loaded on first use', () => {
  it('is not loaded by importing the library, and is by making a registry client', () => {
    const index = new URL('../index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/index.js');
    const script = [
      `const core = await import(${JSON.stringify(index)});`,
      `const { createRequire } = await import('node:module');`,
      `const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => /[\\\\/]undici[\\\\/]/.test(k));`,
      `const before = loaded();`,
      `const { RegistryClient } = await import(${JSON.stringify(index.replace(/index\.js$/, 'registry/index.js'))});`,
      `const client = new RegistryClient({ plainHttp: true });`,
      `console.log(JSON.stringify({ imported: typeof core.pull, before, after: loaded() }));`,
      `await client.close();`,
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual({ imported: 'function', before: false, after: true });
  });

  it('is the module an import of undici gets', async () => {
    const imported = await import('undici');
    expect(undici().Agent).toBe(imported.Agent);
    expect(undici().request).toBe(imported.request);
  });
});
