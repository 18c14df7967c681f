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

/**
 * The source files of packages/*\/src that may read process.env, and why. The programs read the
 * environment at their entry points (the measuring knobs among it, into one Tuning record passed
 * down: packages/core/src/tuning.ts); the settings a user sets in the environment are read where
 * the product reads them. Anything else is a knob read deep in a call.
 */
const READS_ENV: Readonly<Record<string, string>> = {
  'packages/cli/src/bin.ts': "the CLI's entry point",
  'packages/cli/src/launch.cts': "the CLI's launcher: libuv's pool size, before anything loads",
  'packages/daemon/src/bin.ts': "fastpulld's entry point",
  'packages/daemon/src/launch.cts':
    "fastpulld's launcher: libuv's pool size and the allocator's arenas (unless MALLOC_ARENA_MAX is set), before anything loads",
  'packages/daemon/src/config.ts': "fastpulld's configuration: the FASTPULL_* settings under its file and flags",
  'packages/daemon/src/server.ts': 'a reload resolves the configuration again, environment and all',
  'packages/daemon/src/paths.ts': "the default socket (XDG_RUNTIME_DIR, the store root's)",
  'packages/core/src/store/root.ts': 'the default store root (FASTPULL_ROOT, XDG_DATA_HOME, HOME)',
  'packages/core/src/service/settings.ts': 'the default hosts directory (FASTPULL_HOSTS_DIR)',
  'packages/core/src/service/local.ts': "Docker's config and the proxy variables, read once per service as containerd reads them",
  'packages/core/src/registry/dockerconfig.ts': "where Docker's config and its credential helpers are (DOCKER_CONFIG, HOME, PATH)",
  'packages/core/src/native/fallback.ts': 'hands the environment on to a child process, reads nothing in it',
};
/** The test kit reads which pieces a test requires (FASTPULL_REQUIRE) and where their programs are (PATH). */
const READS_ENV_UNDER = 'packages/core/src/testing/';

/** A line of code (not a comment) that reads process.env, or C that calls getenv. */
const ENV_READ = /\bprocess\.env\b/;
const C_GETENV = /\bgetenv\s*\(/;
const COMMENT = /^\s*(?:\/\/|\/?\*)/;

/**
 * A benchmark log in a comment: a date (`6 December`, `December 6`, `2026-12-07`, `17:00 UTC`) or a
 * run count (`3 pairs`, `5 runs`, `2 rounds`, `medians of 3`). Measured figures belong in
 * docs/architecture.md ("Figures behind the defaults") or bench/README.md; a comment keeps the reason.
 */
const MONTH = '(?:January|February|March|April|May|June|July|August|September|October|November|December)';
const BENCH_LOG = new RegExp(
  `\\b\\d{1,2} ${MONTH}\\b|\\b${MONTH} \\d{1,2}\\b|\\b\\d{4}-\\d{2}-\\d{2}\\b|\\b\\d{1,2}:\\d{2} UTC\\b|\\b\\d+ (?:pairs|runs|rounds|alternations)\\b|\\bmedians? of \\d`,
);

/** The comment a line of TypeScript or C holds (a whole-line comment, or what follows `//` after code). */
function commentOf(line: string): string | undefined {
  if (COMMENT.test(line)) return line;
  const at = line.indexOf(' // ');
  return at >= 0 ? line.slice(at) : undefined;
}

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
    for (const line of [
      'docs/containerd.md',
      'a retry and a re-issue say so',
      'plan.ts plans the layers',
      'node agents in the group',
      'test helpers',
      'the design of the store',
      'sessionless',
    ]) {
      expect(hits(line), line).toEqual([]);
    }
  });

  it('nothing in packages/*/src reads the environment but the entry points and the settings files, and no C calls getenv', () => {
    const files = trackedFiles();
    const sources = files.filter((p) => /^packages\/[^/]+\/src\/.+\.[cm]?ts$/.test(p) && !/\.test\.ts$|\.testkit\.ts$/.test(p));
    const native = files.filter((p) => /^packages\/[^/]+\/native\/.+\.[ch]$/.test(p));
    expect(sources.length).toBeGreaterThan(100);
    expect(native.length).toBeGreaterThan(3);
    // Every file the list allows exists and still reads the environment: a stale entry is a hole.
    const reading = new Set<string>();
    const found: string[] = [];
    for (const path of [...sources, ...native]) {
      const c = path.endsWith('.c') || path.endsWith('.h');
      for (const [i, line] of readFileSync(join(repoRoot, path), 'utf8').split('\n').entries()) {
        if (COMMENT.test(line) || !(c ? C_GETENV : ENV_READ).test(line)) continue;
        reading.add(path);
        if (READS_ENV[path] === undefined && !path.startsWith(READS_ENV_UNDER)) found.push(`${path}:${i + 1}: ${line.trim().slice(0, 160)}`);
      }
    }
    expect(found).toEqual([]);
    expect(Object.keys(READS_ENV).filter((p) => !reading.has(p))).toEqual([]);
    // The patterns: code is caught, comments are not.
    expect(ENV_READ.test('const lead = process.env.FASTPULL_DOWNLOAD_LEAD_MIB;') && !COMMENT.test('  const x = process.env.X;')).toBe(true);
    expect(COMMENT.test(' * @example tuningFromEnv(process.env)') && COMMENT.test('  // FASTPULL_X=0 (process.env)')).toBe(true);
    expect(C_GETENV.test('  const char* v = getenv("FASTPULL_X");')).toBe(true);
  });

  it('no comment in packages/*/src or the addon is a benchmark log: no dates, no run counts', () => {
    const files = trackedFiles().filter((p) => /^packages\/[^/]+\/(?:src\/.+\.[cm]?ts|native\/.+\.[ch])$/.test(p));
    expect(files.length).toBeGreaterThan(150);
    const found: string[] = [];
    for (const path of files) {
      for (const [i, line] of readFileSync(join(repoRoot, path), 'utf8').split('\n').entries()) {
        const comment = commentOf(line);
        if (comment !== undefined && BENCH_LOG.test(comment)) found.push(`${path}:${i + 1}: ${line.trim().slice(0, 160)}`);
      }
    }
    expect(found).toEqual([]);
    // What it catches, and the product's own words it leaves alone.
    for (const line of [
      ' * (before 6 December, set when)',
      ' * on 2026-12-07, 3 runs each',
      '// without it (0.99-1.12x, 4 pairs)',
      ' * medians of 5): 64 KiB',
      ' * scale 0.5, 5 rounds: zlib',
      '  x = 1; // since December 6',
    ]) {
      expect(BENCH_LOG.test(commentOf(line) ?? ''), line).toBe(true);
    }
    for (const line of [
      ' * runs each layer on a worker thread',
      ' * pairs of offsets, 3 ranges',
      ' * a user may set it',
      '// the 16 MiB default',
      'const runs = 3; // the bench',
    ]) {
      expect(BENCH_LOG.test(commentOf(line) ?? ''), line).toBe(false);
    }
  });

  it('every skip in a test file says why: through lacks/notHere, or a ctx.skip after one of them', () => {
    const tests = trackedFiles().filter((p) => p.endsWith('.test.ts') && p !== 'test/hygiene.test.ts');
    expect(tests.length).toBeGreaterThan(100);
    const silent: string[] = [];
    const conditional = /\.skipIf\((?!\s*(?:lacks\w*\(|notHere\())/;
    const bare = /\b(?:describe|it|test)\.skip\b(?!If)|\bctx\.skip\(/;
    expect(conditional.test("it.skipIf(!binary)('pulls'")).toBe(true);
    expect(conditional.test("it.skipIf(lacks('strace', why))('traces'")).toBe(false);
    expect(conditional.test('it.skipIf(\n    lacksRoot() || notHere(why),')).toBe(false);
    expect(bare.test('const d = ok ? describe : describe.skip;')).toBe(true);
    expect(bare.test("if (x) ctx.skip('why');")).toBe(true);
    for (const path of tests) {
      const lines = readFileSync(join(repoRoot, path), 'utf8').split('\n');
      for (const [i, line] of lines.entries()) {
        // The formatter may break a call over lines: its condition is read with the line after,
        // and a skip's reason may stand in the lines of its `if` just above.
        const withNext = `${line} ${lines[i + 1]?.trim() ?? ''}`;
        const told = lines.slice(Math.max(0, i - 3), i + 1).some((l) => /\b(?:lacks\w*|notHere)\(/.test(l));
        if ((conditional.test(line) && conditional.test(withNext)) || (bare.test(line) && !told)) silent.push(`${path}:${i + 1}: ${line.trim().slice(0, 160)}`);
      }
    }
    expect(silent).toEqual([]);
  });
});
