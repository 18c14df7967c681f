// The TOML parser, the zstd decoder and the RE2 engine are loaded by their first use, not by
// importing the library: every process (and every unpack worker) would compile them otherwise, for
// a hosts.toml, a zstd layer or a snapshot filter with a regular expression that most do not have.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildLayer } from './testing/builder.js';

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
        `const { createZstdDecompressor } = await import(${JSON.stringify(`${dist}unpack/decompress/zstd.js`)});`,
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
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 });
      expect(r.error).toBeUndefined();
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toEqual({ imported: 'function', toml: false, zstd: false, tomlWithoutFile: false, tomlAfter: true, zstdAfter: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loads re2js only for a snapshot filter with a regular expression', () => {
    const dist = new URL('./index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/');
    // A loader hook names every ES module the child loads, on stderr; the require cache shows the CommonJS ones.
    const hooks = `data:text/javascript,${encodeURIComponent('export async function load(url, context, next) { if (url.startsWith("file:")) process.stderr.write("loaded " + url + "\\n"); return next(url, context); }')}`;
    const register = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register(${JSON.stringify(hooks)});`)}`;
    const script = [
      `const core = await import(${JSON.stringify(`${dist}index.js`)});`,
      `const { parseSnapshotFilters } = await import(${JSON.stringify(`${dist}snapshots/containerd/filters.js`)});`,
      `const { createRequire } = await import('node:module');`,
      `const has = () => Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('/re2js/'));`,
      `const target = { name: 'k8s.io/1/abc', kind: 'committed', labels: { a: 'b' } };`,
      `const seen = { imported: typeof core.openStore, re2js: has() };`,
      `seen.plain = parseSnapshotFilters(['name==k8s.io/1/abc,labels.a==b']).match(target);`,
      `seen.re2jsAfterPlain = has();`,
      `seen.pattern = parseSnapshotFilters(['name~="^k8s\\.io/[0-9]+/a"']).match(target);`,
      `seen.re2jsAfterPattern = has();`,
      `console.log(JSON.stringify(seen));`,
    ].join('\n');
    const r = spawnSync(process.execPath, ['--import', register, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 });
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual({
      imported: 'function',
      re2js: false,
      plain: true,
      re2jsAfterPlain: false,
      pattern: true,
      re2jsAfterPattern: true,
    });
    // Never as an ES module: not by the library's import graph.
    expect(r.stderr.split('\n').filter((l) => l.includes('/re2js/'))).toEqual([]);
  });

  it('loads the unpacker only where a layer is unpacked: not by importing the library, by its first unpackLayer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastpull-lazy-'));
    try {
      const layer = await buildLayer([{ type: 'file', path: 'a/b', content: 'lazy\n' }], { compression: 'gzip' });
      const blobPath = join(dir, 'layer.tgz');
      writeFileSync(blobPath, layer.blob);
      mkdirSync(join(dir, 'rootfs'));
      const dist = new URL('./index.ts', import.meta.url).href.replace(/\/src\/index\.ts$/, '/dist/');
      // A loader hook that names every module the child loads, on stderr (hooks run on their own thread).
      const hooks = `data:text/javascript,${encodeURIComponent('export async function load(url, context, next) { if (url.startsWith("file:")) process.stderr.write("loaded " + url + "\\n"); return next(url, context); }')}`;
      const register = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register(${JSON.stringify(hooks)});`)}`;
      const script = [
        `const core = await import(${JSON.stringify(`${dist}index.js`)});`,
        `process.stderr.write('imported\\n');`,
        `const r = await core.unpackLayer({ blobPath: ${JSON.stringify(blobPath)}, mediaType: core.MediaTypes.OCI_LAYER_GZIP, dest: ${JSON.stringify(join(dir, 'rootfs'))} });`,
        `console.log(JSON.stringify({ diffID: r.diffID }));`,
      ].join('\n');
      const r = spawnSync(process.execPath, ['--import', register, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 });
      expect(r.error).toBeUndefined();
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toEqual({ diffID: layer.diffID });
      const [before, after] = r.stderr.split('imported\n') as [string, string];
      const unpacker = (text: string) => text.split('\n').filter((l) => /\/dist\/unpack\/(layer|apply\/apply|apply\/writer|tar\/tarreader)\.js$/.test(l));
      // The library imported: its pool, its decoders' names and budgets, but not the unpacker.
      expect(before).toContain('/dist/unpack/pool/pool.js');
      expect(unpacker(before)).toEqual([]);
      // The first unpackLayer loads it.
      expect(unpacker(after).length).toBe(4);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
