// One question: what does a ranged blob download cost through an HTTP proxy, on the registry
// client's own range connections tunnelled with CONNECT, against undici's EnvHttpProxyAgent as the
// client's dispatcher, and against no proxy at all? HTTPS from blob-server.js (its own process),
// through Debian's tinyproxy on loopback (its own process); wall time, and user and system CPU of
// the downloading process alone per GiB. Sizes from BENCH_SIZES_MIB (default 1024), BENCH_RUNS
// (default 3) runs, the contenders alternating within each run. Prints a markdown table.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startTinyproxy } from '@fastpull/core/testing';
import { median } from './lib.js';

const SIZES = (process.env.BENCH_SIZES_MIB ?? '1024').split(',').map(Number);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CHUNK_MIB = 16;
const MODES = ['direct', 'tunnel', 'undici'] as const;
const NAMES: Record<(typeof MODES)[number], string> = {
  direct: 'no proxy (range client)',
  tunnel: 'through tinyproxy: range client in CONNECT tunnels',
  undici: "through tinyproxy: undici's EnvHttpProxyAgent",
};
const here = import.meta.dirname;

function timed(args: string[]): { wall: number; user: number; sys: number } {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %U %S', process.execPath, ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`fetch failed: ${r.stderr.slice(-2000)}`);
  const [wall, user, sys] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, user: user!, sys: sys! };
}

const work = mkdtempSync(join(tmpdir(), 'fastpull-proxybench-'));
const proxy = await startTinyproxy();
try {
  const cert = join(work, 'cert.pem');
  const key = join(work, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  console.log('| blob | contender | runs | median wall s | user CPU s per GiB (median) | system CPU s per GiB (median) |\n|---|---|---|---|---|---|');
  for (const mib of SIZES) {
    const blob = join(work, `blob-${mib}`);
    execFileSync('truncate', ['-s', `${mib}M`, blob]);
    const digest = `sha256:${execFileSync('sha256sum', [blob], { encoding: 'utf8' }).split(' ')[0]}`;
    const size = statSync(blob).size;
    const server = spawn(process.execPath, [join(here, 'blob-server.js'), blob, cert, key], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((resolve) => createInterface({ input: server.stdout }).once('line', resolve));
    try {
      const rows = Object.fromEntries(MODES.map((m) => [m, { wall: [] as number[], user: [] as number[], sys: [] as number[] }]));
      for (let run = 0; run < RUNS; run++) {
        for (const mode of MODES) {
          const root = join(work, 'root');
          const before = proxy.requests().length;
          const r = timed([join(here, 'fetch-proxy-child.js'), mode, `127.0.0.1:${port}`, digest, String(size), root, String(CHUNK_MIB), cert, proxy.url]);
          // Each proxied contender must have gone through the proxy, the direct one never.
          const tunnels = proxy.requests().length - before;
          if ((mode === 'direct') !== (tunnels === 0)) throw new Error(`${mode}: ${tunnels} requests through the proxy`);
          rmSync(root, { recursive: true, force: true });
          const gib = size / 1024 ** 3;
          rows[mode]!.wall.push(r.wall);
          rows[mode]!.user.push(r.user / gib);
          rows[mode]!.sys.push(r.sys / gib);
        }
      }
      for (const mode of MODES) {
        const r = rows[mode]!;
        console.log(
          `| ${mib} MiB | ${NAMES[mode]} | ${RUNS} | ${median(r.wall).toFixed(2)} (${Math.min(...r.wall).toFixed(2)}-${Math.max(...r.wall).toFixed(2)}) | ${median(r.user).toFixed(2)} | ${median(r.sys).toFixed(2)} |`,
        );
      }
    } finally {
      server.kill();
    }
  }
} finally {
  await proxy.stop();
  rmSync(work, { recursive: true, force: true });
}
