#!/usr/bin/env node
// Generates the TypeScript types of fastpull.proto's messages and services (proto-loader-gen-types, with
// the loader options the daemon uses) into src/generated, or into the directory given. Relative imports
// get a .js extension, as ESM under NodeNext resolution wants. A test regenerates and compares, so the
// committed types cannot drift from the .proto: run `pnpm --filter @fastpull/daemon run gen:proto` after
// changing it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = process.argv[2] ?? join(pkg, 'src', 'generated');
const require = createRequire(join(pkg, 'package.json'));
const bin = join(dirname(require.resolve('@grpc/proto-loader/package.json')), 'build', 'bin', 'proto-loader-gen-types.js');
rmSync(out, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    bin,
    '--longs=Number',
    '--enums=String',
    '--defaults',
    '--oneofs',
    '--grpcLib=@grpc/grpc-js',
    '--includeComments',
    '-I',
    join(pkg, 'proto'),
    '-O',
    out,
    'fastpull/v1/fastpull.proto',
  ],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
for (const entry of readdirSync(out, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
  const file = join(entry.parentPath ?? entry.path, entry.name);
  const text = readFileSync(file, 'utf8')
    .replace(/from '(\.{1,2}\/[^']+)'/g, (_m, p) => `from '${p}.js'`)
    // The generator names the .proto by the path it was given; name it from the package instead.
    .replace(/^\/\/ Original file: .*proto\/(fastpull\/v1\/fastpull\.proto)$/m, '// Generated from proto/$1 by scripts/gen-proto.mjs; do not edit.');
  writeFileSync(file, text);
}
