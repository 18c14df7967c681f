// What the repository says must stand on its own: no tracked file points at notes a reader of the
// repository does not have, at a directory outside it, or at the way the work was organised.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers.js';

/**
 * Benchmark results are recorded output and lockfiles generated: neither is prose. This file holds
 * the samples its rules must catch.
 */
const SKIPPED = [/^bench\/results\//, /(^|\/)pnpm-lock\.yaml$/, /(^|\/)package-lock\.json$/, /^test\/hygiene\.test\.ts$/];

/** Each rule: what it catches, and the pattern (chosen to miss the product's own words: see the last test). */
const RULES: ReadonlyArray<readonly [string, RegExp]> = [
  ['a note outside the repository', /\b(?:FACTS|DESIGN|CONTAINERD|STYLE)\.md\b/],
  ['a directory beside the repository', /\.\.\/shared\b/],
  ['a path of the machine the work was done on', /\/work\/(?:wt-|shared\/|tasks\/|\.library|\.mirror|helper-)/],
  ['the work session', /\bthis session\b/i],
  ['the planner of the work (name plan.ts as plan.ts)', /\bthe planner\b/i],
  ['a numbered work item', /\bissues? #?\d+/i],
  ['a work item as the subject of what comes later', /\bissue (?:deepens|adds|brings|will|should)\b/i],
  ['the workers of the work', /\bother agents\b|\bhelpers?['’]?s? (?:brief|session|worktree)s?\b/i],
];

/** Tracked text files, as git lists them, less the skipped ones. */
function trackedFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '-z'], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return out.split('\0').filter((p) => p !== '' && !SKIPPED.some((s) => s.test(p)));
}

describe('repository hygiene', () => {
  it('no tracked file refers to outside notes, paths of this machine or how the work was organised', () => {
    const files = trackedFiles();
    // git ls-files answered with the repository, not an empty list.
    expect(files).toContain('package.json');
    expect(files).toContain('test/README.md');
    const found: string[] = [];
    let read = 0;
    for (const path of files) {
      let text: string;
      try {
        text = readFileSync(join(repoRoot, path), 'utf8');
      } catch (e) {
        // Listed but not on disk: a deletion not yet committed.
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw e;
      }
      if (text.includes('\0')) continue; // binary
      read++;
      const lines = text.split('\n');
      for (const [i, line] of lines.entries()) {
        for (const [what, pattern] of RULES) if (pattern.test(line)) found.push(`${path}:${i + 1}: ${what}: ${line.trim().slice(0, 160)}`);
      }
    }
    expect(read).toBeGreaterThan(100);
    expect(found).toEqual([]);
  });

  it('the rules catch what they are for', () => {
    const hits = (line: string): string[] => RULES.filter(([, p]) => p.test(line)).map(([what]) => what);
    // The samples that name outside notes and paths are built from parts, so that this file does
    // not itself hold what it forbids.
    const note = (name: string): string => `${name}.md`;
    for (const line of [
      `see ${['..', 'shared', note('FACTS')].join('/')}`,
      `as ${note('DESIGN')} says`,
      `cd ${['', 'work', 'wt-x'].join('/')}`,
      'done in this session',
      'the planner wants',
      'fixed in issue 12',
      'see issue #3',
      'The download engine issue deepens this',
      'while other agents worked',
      "the helper's brief",
    ]) {
      expect(hits(line), line).not.toEqual([]);
    }
    // Words that are the product's own.
    for (const line of ['docs/containerd.md', 'a retry and a re-issue say so', 'plan.ts plans the layers', 'node agents in the group', 'test helpers', 'the design of the store', 'sessionless']) {
      expect(hits(line), line).toEqual([]);
    }
  });

  it('every skip in a test file says why: through lacks/notHere, or a ctx.skip after one of them', () => {
    const tests = trackedFiles().filter((p) => p.endsWith('.test.ts') && p !== 'test/hygiene.test.ts');
    expect(tests.length).toBeGreaterThan(100);
    const silent: string[] = [];
    const conditional = /\.skipIf\(\s*(?!lacks\w*\(|notHere\()/;
    const bare = /\b(?:describe|it|test)\.skip\b(?!If)|\bctx\.skip\(/;
    expect(conditional.test("it.skipIf(!binary)('pulls'")).toBe(true);
    expect(conditional.test("it.skipIf(lacks('strace', why))('traces'")).toBe(false);
    expect(bare.test('const d = ok ? describe : describe.skip;')).toBe(true);
    expect(bare.test("if (x) ctx.skip('why');")).toBe(true);
    for (const path of tests) {
      const lines = readFileSync(join(repoRoot, path), 'utf8').split('\n');
      for (const [i, line] of lines.entries()) {
        const told = /\b(?:lacks\w*|notHere)\(/.test(line) || /\b(?:lacks\w*|notHere)\(/.test(lines[i - 1] ?? '');
        if (conditional.test(line) || (bare.test(line) && !told)) silent.push(`${path}:${i + 1}: ${line.trim().slice(0, 160)}`);
      }
    }
    expect(silent).toEqual([]);
  });
});
