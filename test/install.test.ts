// The packages as a user gets them: @fastpull/core, @fastpull/daemon and @fastpull/cli packed into
// tarballs, installed with npm into an empty project, their commands and entries used from there,
// and a pull from the real registry with the installed CLI, with the native addon and without it.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DistributionRegistry,
  findDistributionBinary,
  lacks,
  pushImage,
  sampleImage,
  sampleLayerEntries,
  startDistribution,
} from '@fastpull/core/testing';
import { repoRoot, tempDir } from './helpers.js';

const NPM_TIMEOUT_MS = 300_000;
/** The environment of npm and the installed commands: none of the npm_* settings pnpm or npm gave this run. */
const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm|pnpm)_/i.test(k)));

function whySkip(): string | undefined {
  if (findDistributionBinary() === undefined) return 'docker-registry is not installed';
  const ping = spawnSync('npm', ['ping'], { env, encoding: 'utf8', timeout: 30_000 });
  if (ping.error !== undefined) return `npm cannot be run (${ping.error.message})`;
  if (ping.status !== 0) return `the npm registry cannot be reached (npm ping exited with ${ping.status ?? ping.signal})`;
  return undefined;
}
const skip = whySkip();
if (skip) console.warn(`skipping the install test: ${skip}`);

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command without blocking the event loop (the registry's output pipes are read by this process). */
function run(cmd: string, args: string[], cwd: string, extraEnv: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr, ms: Date.now() - started }));
  });
}

function ok(r: Run, what: string): Run {
  if (r.status !== 0) throw new Error(`${what} exited with ${r.status}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}

describe.skipIf(lacks('npm', skip))('the packed packages installed with npm', () => {
  const work = tempDir('install');
  const project = join(work.dir, 'project');
  const coreDir = join(project, 'node_modules', '@fastpull', 'core');
  const addon = join(coreDir, 'native', 'build', 'Release', 'fastpull_native.node');
  const isalAddon = join(coreDir, 'native', 'build', 'Release', 'fastpull_isal.node');
  // The ISA-L addon is built where libisal's headers are (scripts/bootstrap.sh installs libisal-dev).
  const libisal = existsSync('/usr/include/isa-l/igzip_lib.h');
  if (!libisal) console.log('the installs here build no in-process ISA-L gunzip: libisal-dev is not installed; checking that auto falls back to node:zlib');
  let tarballs: string[] = [];
  let registry: DistributionRegistry;
  let fullRef = '';
  let plainRef = '';

  beforeAll(async () => {
    tarballs = ok(await run(process.execPath, [join(repoRoot, 'scripts', 'pack.mjs'), join(work.dir, 'tarballs')], repoRoot), 'scripts/pack.mjs')
      .stdout.trim()
      .split('\n');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'fastpull-install-check', private: true }));
    const install = ok(await run('npm', ['install', '--no-audit', '--no-fund', ...tarballs], project, {}, NPM_TIMEOUT_MS), 'npm install');
    console.log(`npm install of the three tarballs (and their dependencies from the registry): ${(install.ms / 1000).toFixed(1)} s`);
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    // Four layers: whiteouts and an opaque directory (an extended attribute); two: whiteouts and none.
    await pushImage(registry.url, 'install/full', 'v1', await sampleImage(21));
    await pushImage(registry.url, 'install/plain', 'v1', await sampleImage(22, { layers: 2 }));
    fullRef = `${registry.host}/install/full:v1`;
    plainRef = `${registry.host}/install/plain:v1`;
  }, 600_000);
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  const npx = (args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<Run> => run('npx', ['--no', '--', ...args], project, extraEnv);
  const pull = (root: string, ref: string): Promise<Run> => npx(['fastpull', 'pull', '--root', join(work.dir, root), ref]);

  it('ships dist, the native sources and the proto files, with real versions for workspace dependencies', () => {
    const files = new Map(tarballs.map((t) => [t, spawnSync('tar', ['-tzf', t], { encoding: 'utf8' }).stdout.trim().split('\n')]));
    for (const [tarball, list] of files) {
      const manifest = JSON.parse(spawnSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }).stdout) as {
        dependencies?: Record<string, string>;
      };
      expect(
        Object.values(manifest.dependencies ?? {}).filter((v) => v.startsWith('workspace:')),
        tarball,
      ).toEqual([]);
      expect(
        list.filter((f) => /^package\/src\/|\.test\.|\.testkit\.|\.map$|tsbuildinfo|^package\/tsconfig/.test(f)),
        tarball,
      ).toEqual([]);
      expect(
        list.filter((f) => !/^package\/(dist\/|native\/|proto\/|package\.json$)/.test(f)),
        tarball,
      ).toEqual([]);
    }
    const core = files.get(tarballs.find((t) => t.includes('fastpull-core-'))!)!;
    for (const f of [
      'fastpull_native.c',
      'fastpull_inflate.c',
      'fastpull_inflate_core.h',
      'fastpull_inflate_loop.h',
      'fastpull_isal.c',
      'isal-probe.sh',
      'binding.gyp',
      'build.mjs',
    ])
      expect(core).toContain(`package/native/${f}`);
    expect(core.filter((f) => f.endsWith('.node'))).toEqual([]); // built at install, for the machine installing
    expect(files.get(tarballs.find((t) => t.includes('fastpull-daemon-'))!)).toContain('package/proto/fastpull/v1/fastpull.proto');
    const cli = JSON.parse(readFileSync(join(project, 'node_modules', '@fastpull', 'cli', 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(cli.dependencies['@fastpull/core']).toBe(JSON.parse(readFileSync(join(repoRoot, 'packages', 'core', 'package.json'), 'utf8')).version);
    const core2 = JSON.parse(readFileSync(join(coreDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(core2.dependencies)).not.toContain('tar-stream');
  });

  it('puts fastpull and fastpulld on the path of npx and resolves every entry from dist', async () => {
    const cli = ok(await npx(['fastpull', '--help']), 'npx fastpull --help');
    expect(cli.stdout).toMatch(/^Usage: fastpull /);
    expect(cli.stdout).toContain('pull [options] <ref...>');
    const daemon = ok(await npx(['fastpulld', '--help']), 'npx fastpulld --help');
    expect(daemon.stdout).toMatch(/^Usage: fastpulld /);
    for (const bin of ['fastpull', 'fastpulld']) expect(lstatSync(join(project, 'node_modules', '.bin', bin)).isSymbolicLink()).toBe(true);

    const pulled = ok(await run(process.execPath, ['-e', "import('@fastpull/core').then(m => console.log(typeof m.pull))"], project), 'import @fastpull/core');
    expect(pulled.stdout).toBe('function\n');
    const script = `for (const s of ['', '/registry', '/content', '/snapshots', '/testing']) console.log(import.meta.resolve('@fastpull/core' + s));
      const m = await Promise.all(['/registry', '/content', '/snapshots'].map((s) => import('@fastpull/core' + s)));
      console.log(typeof m[0].RegistryClient, typeof m[1].FileContentStore, typeof m[2].FileSnapshotter);`;
    const resolved = ok(await run(process.execPath, ['--input-type=module', '-e', script], project), 'resolving the entries');
    const lines = resolved.stdout.trim().split('\n');
    const base = `file://${coreDir}/dist/`;
    expect(lines.slice(0, 5)).toEqual(['index.js', 'registry/index.js', 'content/index.js', 'snapshots/index.js', 'testing/index.js'].map((f) => base + f));
    expect(lines[5]).toBe('function function function');
  });

  it(
    'asks for tar-stream where the /testing entry is used, and works once it is installed',
    async () => {
      const probe = `const t = await import('@fastpull/core/testing'); console.log((await t.sampleImage(1, { layers: 1 })).layers.length);`;
      const without = await run(process.execPath, ['--input-type=module', '-e', probe], project);
      expect(without.status).not.toBe(0);
      expect(without.stderr).toMatch(/Cannot find package 'tar-stream'/);
      ok(await run('npm', ['install', '--no-audit', '--no-fund', 'tar-stream@^3.1.7'], project, {}, NPM_TIMEOUT_MS), 'npm install tar-stream');
      expect(ok(await run(process.execPath, ['--input-type=module', '-e', probe], project), 'the /testing entry').stdout).toBe('1\n');
    },
    NPM_TIMEOUT_MS + 30_000,
  );

  it('builds the native addon at install and pulls with the installed CLI', async () => {
    expect(existsSync(addon)).toBe(true);
    expect(existsSync(isalAddon)).toBe(libisal);
    // What pulls decode gzip with by default: ISA-L in process where its addon was built.
    expect(ok(await npx(['fastpull', 'version']), 'fastpull version').stdout).toContain(`\ninflater ${libisal ? 'isal' : 'zlib'} (built in)\n`);
    const r = ok(await pull('root-full', fullRef), 'fastpull pull');
    expect(r.stdout).toMatch(new RegExp(`^pulled ${fullRef.replace(/[.]/g, '\\.')} \\(sha256:[0-9a-f]{64}\\)`, 'm'));
    expect(r.stderr).not.toContain('FASTPULL_NATIVE_ADDON');
    const images = ok(await npx(['fastpull', 'images', '--root', join(work.dir, 'root-full'), '--json']), 'fastpull images');
    expect((JSON.parse(images.stdout) as Array<{ name: string; layers: unknown[] }>).map((i) => [i.name, i.layers.length])).toEqual([[fullRef, 4]]);
  });

  it(
    'installs without the addon when its build is off, says once what is off, still pulls, and npm rebuild brings it back',
    async () => {
      const skipped = ok(
        await run('npm', ['rebuild', '--foreground-scripts', '@fastpull/core'], project, { FASTPULL_SKIP_NATIVE_BUILD: '1' }, NPM_TIMEOUT_MS),
        'npm rebuild without the addon',
      );
      expect(skipped.stdout + skipped.stderr).toContain('native addon not built: FASTPULL_SKIP_NATIVE_BUILD=1');
      expect(skipped.stdout + skipped.stderr).toContain('gzip layers decode with node:zlib');
      expect(existsSync(addon)).toBe(false);
      expect(existsSync(isalAddon)).toBe(false);
      // auto falls back to node:zlib, and the pull below decodes its gzip layers with it.
      expect(ok(await npx(['fastpull', 'version']), 'fastpull version without the addons').stdout).toContain('\ninflater zlib (built in)\n');

      const r = ok(await pull('root-plain', plainRef), 'fastpull pull without the addon');
      expect(r.stdout).toMatch(/^pulled .*install\/plain:v1 \(sha256:[0-9a-f]{64}\)/m);
      const warnings = r.stderr.split('\n').filter((l) => l.includes('[FASTPULL_NATIVE_ADDON]'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`${addon} does not exist`);
      expect(warnings[0]).toContain('extended attributes are dropped');
      expect(warnings[0]).toContain('npm rebuild @fastpull/core');
      if (process.getuid?.() === 0) {
        // The second layer's whiteouts, made by mknod(1): character devices 0:0 in its snapshot.
        const mounts = ok(await npx(['fastpull', 'mounts', '--root', join(work.dir, 'root-plain'), '--json', plainRef]), 'fastpull mounts');
        const lower = (JSON.parse(mounts.stdout) as Array<{ options: string[] }>)[0]!.options.find((o) => o.startsWith('lowerdir='))!;
        const top = lower.slice('lowerdir='.length).split(':')[0]!;
        const whiteouts = sampleLayerEntries(22, 2)[1]!.filter((e) => e.type === 'whiteout');
        expect(whiteouts.length).toBeGreaterThan(0);
        for (const w of whiteouts) {
          const st = lstatSync(join(top, w.path));
          expect([st.isCharacterDevice(), st.rdev], w.path).toEqual([true, 0]);
        }
      } else {
        console.log('not checking the whiteouts of the pull without the addon: device nodes need root');
      }

      // An opaque directory needs an extended attribute: that pull fails, and says why.
      const opaque = await pull('root-opaque', fullRef);
      expect(opaque.status).toBe(1);
      expect(opaque.stderr).toMatch(/\.wh\.\.wh\.\.opq.*extended attributes need fastpull's native addon/);

      ok(await run('npm', ['rebuild', '@fastpull/core'], project, {}, NPM_TIMEOUT_MS), 'npm rebuild');
      expect(existsSync(addon)).toBe(true);
      expect(existsSync(isalAddon)).toBe(libisal);
      const again = ok(await pull('root-opaque', fullRef), 'fastpull pull after npm rebuild');
      expect(again.stderr).not.toContain('FASTPULL_NATIVE_ADDON');
    },
    NPM_TIMEOUT_MS * 2,
  );
});
