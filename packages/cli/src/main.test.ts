import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from './main.js';

const root = mkdtempSync(join(tmpdir(), 'fastpull-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function run(...argv: string[]): Promise<{ status: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const status = await main(argv, { stdout, stderr, env: { FASTPULL_ROOT: root } });
  return { status, out, err };
}

describe('fastpull main', () => {
  it('prints help to stdout and exits 0', async () => {
    const r = await run('--help');
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/pull \[options\] <ref\.\.\.>/);
    expect(r.out).toContain('mounts');
  });

  it('exits 2 on usage errors', async () => {
    expect((await run('frobnicate')).status).toBe(2);
    expect((await run('pull')).status).toBe(2);
    expect((await run('pull', '--no-such-flag', 'x')).status).toBe(2);
  });

  it('lists an empty store as a header and [] in JSON', async () => {
    const table = await run('images');
    expect(table.status).toBe(0);
    expect(table.out.trim()).toMatch(/^NAME\s+DIGEST\s+PLATFORM\s+LAYERS\s+SIZE$/);
    const json = await run('images', '--json');
    expect(JSON.parse(json.out)).toEqual([]);
  });

  it('reports errors as one line with a stable code', async () => {
    const r = await run('mounts', 'app:1');
    expect(r.status).toBe(1);
    expect(r.err).toBe(`fastpull: NOT_FOUND: image docker.io/library/app:1 is not in the store at ${root}; pull it first\n`);
    const bad = await run('pull', '--platform', 'linux', '127.0.0.1:1/x:1');
    expect(bad.status).toBe(1);
    expect(bad.err).toMatch(/^fastpull: INVALID_ARGUMENT: invalid platform "linux"/);
  });
});
