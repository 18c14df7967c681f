// The TOML parser and the zstd decoder are loaded by their first use, not by importing the library:
// every process (and every unpack worker) would compile them otherwise, for a hosts.toml or a zstd
// layer that most pulls do not have.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('dependencies loaded on first use', () => {
  it('loads smol-toml only to read a hosts.toml, and fzstd only to decode zstd', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastpull-lazy-'));
    try {
      mkdirSync(join(dir, 'hosts', 'example.test'), { recursive: true });
      writeFileSync(join(dir, 'hosts', 'example.test', 'hosts.toml'), 'server = "https://example.test"\n');
      const dist = new URL('./index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/');
      const script = [
        `const core = await import(${JSON.stringify(`${dist}index.js`)});`,
        `const { loadHostsConfig } = await import(${JSON.stringify(`${dist}registry/hostsconfig.js`)});`,
        `const { createZstdDecompressor } = await import(${JSON.stringify(`${dist}unpack/zstd.js`)});`,
        `const { createRequire } = await import('node:module');`,
        `const has = (name) => Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('/' + name + '/'));`,
        `const seen = { imported: typeof core.pull, toml: has('smol-toml'), zstd: has('fzstd') };`,
        `await loadHostsConfig(${JSON.stringify(join(dir, 'nohosts'))}, 'example.test');`,
        `seen.tomlWithoutFile = has('smol-toml');`,
        `await loadHostsConfig(${JSON.stringify(join(dir, 'hosts'))}, 'example.test');`,
        `seen.tomlAfter = has('smol-toml');`,
        `createZstdDecompressor().destroy();`,
        `seen.zstdAfter = has('fzstd');`,
        `console.log(JSON.stringify(seen));`,
      ].join('\n');
      // Nothing in this process answers the child: it may run synchronously.
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
      expect(r.error).toBeUndefined();
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toEqual({ imported: 'function', toml: false, zstd: false, tomlWithoutFile: false, tomlAfter: true, zstdAfter: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
