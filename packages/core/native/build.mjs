// Builds the native addon with node-gyp against the headers of the Node.js that runs this script,
// so no header download is ever needed. Skips the build when the addon is newer than its source.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const outs = ['fastpull_native.node', 'fastpull_inflate.node'].map((f) => join(here, 'build', 'Release', f));
const sources = ["fastpull_native.c", "fastpull_inflate.c", "fastpull_inflate_core.h", "fastpull_inflate_loop.h", "binding.gyp"].map((f) => join(here, f));
const oldest = (files) => Math.min(...files.map((f) => statSync(f).mtimeMs));
if (outs.every((o) => existsSync(o)) && sources.every((s) => statSync(s).mtimeMs <= oldest(outs))) process.exit(0);

const args = ['rebuild', '--release'];
const prefix = dirname(dirname(process.execPath));
if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
const gyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
const r = spawnSync(process.execPath, [gyp, ...args], { cwd: here, stdio: 'inherit' });
process.exit(r.status ?? 1);
