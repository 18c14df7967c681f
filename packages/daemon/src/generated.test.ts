// The committed wire types are what the generator makes of the .proto now: a change to fastpull.proto
// without `pnpm --filter @fastpull/daemon run gen:proto` fails here, naming the files that differ.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const committed = join(pkg, 'src', 'generated');

function files(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) {
      const path = join(e.parentPath, e.name);
      out.set(relative(dir, path), readFileSync(path, 'utf8'));
    }
  }
  return out;
}

describe('generated wire types', () => {
  const fresh = mkdtempSync(join(tmpdir(), 'fastpull-gen-'));
  afterAll(() => rmSync(fresh, { recursive: true, force: true }));

  it('match what scripts/gen-proto.mjs makes of the .proto', () => {
    execFileSync(process.execPath, [join(pkg, 'scripts', 'gen-proto.mjs'), fresh]);
    const want = files(fresh);
    const have = files(committed);
    expect(want.size).toBeGreaterThan(40);
    expect([...have.keys()].sort()).toEqual([...want.keys()].sort());
    const differ = [...want].filter(([name, text]) => have.get(name) !== text).map(([name]) => name);
    expect(differ).toEqual([]);
  });
});
