import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { INFLATER_CHOICES, VERSION } from '@fastpull/core';
import { poolSizeFor, resolveGunzip, writerThreadsFor } from '@fastpull/core/unpack';
import { CPU_FLAGS, cpuFlagsOf } from './commands/version.js';
import { main } from './main.js';
import { notHere } from '@fastpull/core/testing';

const root = mkdtempSync(join(tmpdir(), 'fastpull-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function run(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const status = await main(argv, { stdout, stderr, env: { FASTPULL_ROOT: root, ...env } });
  return { status, out, err };
}

const COMMANDS = ['pull', 'images', 'inspect', 'mounts', 'mount', 'unmount', 'version'];

describe('fastpull main', () => {
  it('prints help to stdout and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/pull \[options\] <ref\.\.\.>/);
    for (const c of COMMANDS) expect(r.out).toMatch(new RegExp(`^  ${c}\\b`, 'm'));
    expect(r.out).toContain('Exit status: 0 success, 1 failure');
  });

  it('has --help with an example on every command', async () => {
    for (const c of COMMANDS) {
      const r = await run([c, '--help']);
      expect(r.status, c).toBe(0);
      expect(r.out, c).toMatch(new RegExp(`^Usage: fastpull ${c}\\b`, 'm'));
      expect(r.out, c).toMatch(new RegExp(`\\nExamples?:\\n  \\$ .*fastpull ${c}\\b`));
    }
  });

  it('pull --help and docs/cli.md list every gzip decoder the library accepts', async () => {
    const r = await run(['pull', '--help']);
    expect(r.status).toBe(0);
    const placeholder = /--inflater <([^>]+)>/.exec(r.out);
    expect(placeholder, r.out).not.toBeNull();
    expect(placeholder![1]!.split('|').sort()).toEqual([...INFLATER_CHOICES].sort());
    const docs = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'cli.md'), 'utf8');
    const row = /^\| `--inflater ([^`]+)` \|/m.exec(docs);
    expect(row).not.toBeNull();
    expect(row![1]!.split('\\|').sort()).toEqual([...INFLATER_CHOICES].sort());
    const env = /^\| `FASTPULL_INFLATER` \|.*$/m.exec(docs);
    for (const choice of INFLATER_CHOICES) expect(env?.[0], choice).toContain(`\`${choice}\``);
  });

  it('exits 2 on usage errors, with one line saying what to fix', async () => {
    const unknown = await run(['frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.err).toBe("fastpull: unknown command 'frobnicate'; see 'fastpull --help' (INVALID_ARGUMENT)\n");
    const missing = await run(['pull']);
    expect(missing.status).toBe(2);
    expect(missing.err).toBe("fastpull: pull: missing required argument 'ref'; see 'fastpull pull --help' (INVALID_ARGUMENT)\n");
    const flag = await run(['pull', '--no-such-flag', 'x']);
    expect(flag.status).toBe(2);
    expect(flag.err).toBe("fastpull: pull: unknown option '--no-such-flag'; see 'fastpull pull --help' (INVALID_ARGUMENT)\n");
    expect((await run(['mount', 'app:1'])).status).toBe(2);
  });

  it('checks pull flags before fetching anything (usage errors, exit 2)', async () => {
    const cases: [string[], string][] = [
      [['--chunk-size', 'lots'], 'fastpull: pull: --chunk-size "lots": want a whole number of bytes, e.g. 1048576, 8M or 16MiB (INVALID_ARGUMENT)'],
      [['--chunk-size', '1k'], 'fastpull: pull: --chunk-size "1k": want at least 64KiB (INVALID_ARGUMENT)'],
      [['--concurrency', '0'], 'fastpull: pull: --concurrency "0": want a positive integer (INVALID_ARGUMENT)'],
      [['--unpack-concurrency', 'many'], 'fastpull: pull: --unpack-concurrency "many": want a positive integer (INVALID_ARGUMENT)'],
      [['--json', '--quiet'], 'fastpull: pull: --json and --quiet do not go together (INVALID_ARGUMENT)'],
    ];
    for (const [flags, line] of cases) {
      const r = await run(['pull', ...flags, '127.0.0.1:1/x:1']);
      expect(r.status, flags.join(' ')).toBe(2);
      expect(r.err).toBe(`${line}\n`);
    }
    const platform = await run(['pull', '--platform', 'linux', '127.0.0.1:1/x:1']);
    expect(platform.status).toBe(2);
    expect(platform.err).toMatch(/^fastpull: pull: --platform: invalid platform "linux".* \(INVALID_ARGUMENT\)\n$/);
    const inflater = await run(['pull', '127.0.0.1:1/x:1'], { FASTPULL_INFLATER: 'gunzip9000' });
    expect(inflater.status).toBe(2);
    expect(inflater.err).toMatch(/gunzip9000.*\(INVALID_ARGUMENT\)\n$/);
  });

  it('never prints the --creds password, even when the value is malformed', async () => {
    const bad = await run(['pull', '--creds', 'hunter2-secret', '127.0.0.1:1/x:1']);
    expect(bad.status).toBe(2);
    expect(bad.err).toBe('fastpull: pull: --creds: want user:password (the user name may not be empty) (INVALID_ARGUMENT)\n');
    const debug = await run(['pull', '--debug', '--creds', ':hunter2-secret', '127.0.0.1:1/x:1']);
    expect(debug.status).toBe(2);
    expect(`${debug.out}${debug.err}`).not.toContain('hunter2');
  });

  it('lists an empty store as a header and [] in JSON', async () => {
    const table = await run(['images']);
    expect(table.status).toBe(0);
    expect(table.out).toMatch(/^NAME\s+DIGEST\s+PLATFORM\s+LAYERS\s+SIZE\s+UNPACKED\s+CREATED\n$/);
    const json = await run(['images', '--json']);
    expect(JSON.parse(json.out)).toEqual([]);
  });

  it('reports failures as one line: what was being done, the message, the code; exit 1', async () => {
    const r = await run(['mounts', 'app:1']);
    expect(r.status).toBe(1);
    expect(r.err).toBe(
      `fastpull: finding the mounts of docker.io/library/app:1: image docker.io/library/app:1 is not in the store at ${root}; pull it first (NOT_FOUND)\n`,
    );
    const inspect = await run(['inspect', 'app:1']);
    expect(inspect.status).toBe(1);
    expect(inspect.err).toMatch(/^fastpull: inspecting docker\.io\/library\/app:1: image .* \(NOT_FOUND\)\n$/);
    const unmount = await run(['unmount', join(root, 'nowhere')]);
    expect(unmount.status).toBe(1);
    expect(unmount.err).toBe(
      `fastpull: unmounting ${join(root, 'nowhere')}: no fastpull mount at ${join(root, 'nowhere')} in the store at ${root} (NOT_FOUND)\n`,
    );
    const badRef = await run(['pull', 'Not A Ref']);
    expect(badRef.status).toBe(1);
    expect(badRef.err).toMatch(/^fastpull: pulling Not A Ref: .* \(INVALID_REFERENCE\)\n$/);
  });

  it('prints the stack and cause chain only with --debug', async () => {
    const plain = await run(['mounts', 'app:1']);
    expect(plain.err.trim().split('\n')).toHaveLength(1);
    expect(plain.err).not.toMatch(/^\s+at /m);
    for (const argv of [
      ['--debug', 'mounts', 'app:1'],
      ['mounts', 'app:1', '--debug'],
    ]) {
      const debug = await run(argv);
      expect(debug.status).toBe(1);
      const [line, ...rest] = debug.err.trim().split('\n');
      expect(line).toBe(plain.err.trim());
      expect(rest[0]).toMatch(/^FastpullError: image docker\.io\/library\/app:1 is not in the store/);
      expect(rest.some((l) => /^\s+at /.test(l))).toBe(true);
    }
  });

  it('prints its version, Node.js and the gzip decoder', async () => {
    const r = await run(['version']);
    expect(r.status).toBe(0);
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toBe(`fastpull ${VERSION}`);
    expect(lines[1]).toBe(`node     ${process.version}`);
    // auto is always a decoder in this process: ISA-L's where its addon is built, else node:zlib.
    expect(lines[2]).toMatch(/^inflater (isal|zlib) \(built in\)$/);
    expect(lines[2]).toBe(`inflater ${resolveGunzip('auto').kind} (built in)`);
    const json = JSON.parse((await run(['version', '--json'])).out) as { fastpull: string; node: string; inflater: { kind: string } };
    expect(json.fastpull).toBe(VERSION);
    expect(json.node).toBe(process.version);
    const zlib = JSON.parse((await run(['version', '--json'], { FASTPULL_INFLATER: 'zlib' })).out) as { inflater: { kind: string; choice: string } };
    expect(zlib.inflater).toEqual({ choice: 'zlib', kind: 'zlib' });
    expect((await run(['--version'])).out).toBe(`${VERSION}\n`);
    // How a pull sizes itself here: the same figures the pool and the file sink use.
    const cores = availableParallelism();
    expect(lines[4]).toBe(
      `cores    ${cores}: ${poolSizeFor(cores)} ${poolSizeFor(cores) === 1 ? 'layer' : 'layers'} unpacked at once, ${writerThreadsFor(cores)} small-file writer threads`,
    );
    const sized = JSON.parse((await run(['version', '--json'])).out) as { cores: number; unpackSlots: number; writerThreads: number; cpuFlags?: string[] };
    expect(sized).toMatchObject({ cores, unpackSlots: poolSizeFor(cores), writerThreads: writerThreadsFor(cores) });
    const flags = cpuFlagsOf(readFileSync('/proc/cpuinfo', 'utf8'));
    expect(sized.cpuFlags).toEqual(flags);
    if (flags) expect(lines[5]).toBe(`cpu      ${flags.length > 0 ? flags.join(' ') : `none of ${CPU_FLAGS.join(' ')}`}`);
  });

  it('names the decoding-related flags of a cpuinfo text, in a fixed order', () => {
    const info = 'processor\t: 0\nflags\t\t: fpu sse4_2 avx2 sha_ni bmi2 avx512f xsave\nbugs\t\t: none\n\nprocessor\t: 1\nflags\t\t: fpu\n';
    expect(cpuFlagsOf(info)).toEqual(['sse4_2', 'avx2', 'bmi2', 'sha_ni', 'avx512f']);
    expect(cpuFlagsOf('processor\t: 0\nflags\t\t: fpu vme\n')).toEqual([]);
    expect(cpuFlagsOf('Processor\t: AArch64\nFeatures\t: fp asimd\n')).toBeUndefined();
  });

  // As root, test/cli-mount.test.ts runs this case as another user.
  if (process.getuid?.() === 0)
    console.log('skipping the mount refusal of a non-root user here: running as root (test/cli-mount.test.ts runs it as another user)');
  it.skipIf(notHere(process.getuid?.() === 0 ? 'running as root: this is the test of a user without root' : undefined))(
    'refuses to mount without root, with a code',
    async () => {
      const r = await run(['mount', 'app:1', root]);
      expect(r.status).toBe(1);
      expect(r.err).toMatch(/^fastpull: mounting docker\.io\/library\/app:1 at .*: mounting needs root .* \(INVALID_ARGUMENT\)\n$/);
    },
  );
});
