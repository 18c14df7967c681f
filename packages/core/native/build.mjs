// Builds the native addon with node-gyp against the headers of the Node.js that runs this script,
// so no header download is needed where Node's headers are installed. Skips the build when the
// addon is newer than its source.
//
// `--install` is the package's install script: a build that cannot run (no compiler, no python3,
// no node-gyp) or that FASTPULL_SKIP_NATIVE_BUILD=1 turns off never fails the install. It leaves no
// addon, says what is off without one, and fastpull runs without it (src/native/addon.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const install = process.argv.includes('--install');
const outs = ['fastpull_native.node', 'fastpull_inflate.node'].map((f) => join(here, 'build', 'Release', f));
const sources = [
  'fastpull_native.c',
  'fastpull_files.c',
  'fastpull_files.h',
  'fastpull_inflate.c',
  'fastpull_inflate_core.h',
  'fastpull_inflate_loop.h',
  'fastpull_inflate_threads.h',
  'fastpull_process_threads.h',
  'fastpull_isal.c',
  'isal-probe.sh',
  'binding.gyp',
].map((f) => join(here, f));
// The in-process ISA-L inflater is optional: binding.gyp builds it only where libisal is (isal-probe.sh).
const isalOut = join(here, 'build', 'Release', 'fastpull_isal.node');
const isalFound = () => spawnSync('sh', [join(here, 'isal-probe.sh')], { encoding: 'utf8' }).stdout?.trim() === '1';
const isalNote = () => {
  if (!existsSync(isalOut))
    console.warn(
      '@fastpull/core: libisal not found (Debian/Ubuntu package libisal-dev): the in-process ISA-L inflater (--inflater isal) is not built; everything else is.',
    );
};

// As WITHOUT_ADDON in src/native/fallback.ts, and what fastpulld loses.
const WITHOUT =
  'fastpull works without it: extended attributes are dropped (a layer with an opaque directory fails), ' +
  'file times keep microseconds (milliseconds before 1970), the in-process ISA-L and parallel gzip decoders and allocator tuning ' +
  'are off (node:zlib decodes), both hashes of a layer and all its file writes run on its unpack thread, snapshots are flushed file by file instead of ' +
  'with one syncfs, and locks and device nodes go through flock(1) and mknod(1); fastpulld cannot tell systemd that it is ready, so it refuses ' +
  'to start under a Type=notify unit such as deploy/systemd/fastpulld.service';

/** Ends an install without an addon: says why and what that means, and succeeds. */
function withoutAddon(why) {
  rmSync(join(here, 'build'), { recursive: true, force: true });
  console.warn(
    `@fastpull/core: native addon not built: ${why}.\n${WITHOUT}; gzip layers decode with node:zlib (the in-process ISA-L decoder is not built either). To build it later: npm rebuild @fastpull/core (-g for a global install; it needs python3, make and a C compiler).`,
  );
  process.exit(0);
}

if (install && process.env.FASTPULL_SKIP_NATIVE_BUILD === '1') withoutAddon('FASTPULL_SKIP_NATIVE_BUILD=1');

const oldest = (files) => Math.min(...files.map((f) => statSync(f).mtimeMs));
if (outs.every((o) => existsSync(o)) && sources.every((s) => statSync(s).mtimeMs <= oldest(outs)) && (existsSync(isalOut) || !isalFound())) process.exit(0);

/** node-gyp's script: the one npm and pnpm name to their lifecycle scripts, else this package's own. */
function nodeGyp() {
  const named = process.env.npm_config_node_gyp;
  if (named && existsSync(named)) return named;
  try {
    return createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    return undefined;
  }
}

const gyp = nodeGyp();
if (gyp === undefined) {
  if (install) withoutAddon('node-gyp was not found (npm and pnpm bring their own; this install ran without either)');
  console.error('native/build.mjs: node-gyp was not found: run pnpm install first');
  process.exit(1);
}
const args = ['rebuild', '--release'];
const prefix = dirname(dirname(process.execPath));
if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
const r = spawnSync(process.execPath, [gyp, ...args], { cwd: here, stdio: 'inherit' });
if (r.status === 0 && outs.every((o) => existsSync(o))) {
  isalNote();
  process.exit(0);
}
if (install) withoutAddon(`node-gyp ${r.status === null ? `was killed by ${r.signal}` : `exited with status ${r.status}`} (its output is above)`);
process.exit(r.status || 1);
