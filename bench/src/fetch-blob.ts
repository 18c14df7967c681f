// One question: how fast does fastpull download one big blob to disk, against curl fetching the same
// ranges in parallel, and does its memory stay flat as the blob grows? Sizes from BENCH_SIZES_MIB
// (default "512,4096"), range size from BENCH_CHUNK_MIB (default 16), BENCH_FETCH_DIRECT="0,1,undici" to
// compare range bodies through node:http (0), straight off the socket (1) and through an undici Agent
// handed to the client as its dispatcher (undici); wall, user and system CPU, peak RSS; the blob is a sparse file of zeros served by blob-server.js in its own
// process (content does not matter to HTTP; the page cache serves it). Prints a markdown table.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { median } from './lib.js';

const SIZES = (process.env.BENCH_SIZES_MIB ?? '512,4096').split(',').map(Number);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CHUNK_MIB = Number(process.env.BENCH_CHUNK_MIB ?? 16);
const CHUNK = CHUNK_MIB * 1024 * 1024;
const PARALLEL = 16;
/**
 * The ways fastpull's side reads range bodies to compare, alternating in each run
 * (FASTPULL_DIRECT_RANGES: 1 straight off the socket, 0 through node:http; undici: an undici Agent as
 * the client's dispatcher); default: the default alone.
 */
const DIRECT = process.env.BENCH_FETCH_DIRECT?.split(',').map((t) => t.trim());
const here = import.meta.dirname;

/** The digest a sparse file of `size` zeros has (what fastpull verifies against). */
function zerosDigest(path: string): string {
  return `sha256:${execFileSync('sha256sum', [path], { encoding: 'utf8' }).split(' ')[0]}`;
}

interface Timed {
  wall: number;
  user: number;
  sys: number;
  rssMiB: number;
}

function timed(cmd: string, args: string[], direct?: string): Timed {
  const env =
    direct === undefined ? process.env : direct === 'undici' ? { ...process.env, BENCH_FETCH_UNDICI: '1' } : { ...process.env, FASTPULL_DIRECT_RANGES: direct };
  const r = spawnSync('/usr/bin/time', ['-f', '%e %U %S %M', cmd, ...args], { encoding: 'utf8', maxBuffer: 1 << 26, env });
  if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr.slice(-2000)}`);
  const [wall, user, sys, kib] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, user: user!, sys: sys!, rssMiB: kib! / 1024 };
}

const work = mkdtempSync(join(tmpdir(), 'fastpull-fetchbench-'));
try {
  console.log(`| blob | contender | median s | MB/s | user CPU s (median) | system CPU s (median) | peak RSS MiB |\n|---|---|---|---|---|---|---|`);
  for (const mib of SIZES) {
    const blob = join(work, `blob-${mib}`);
    execFileSync('truncate', ['-s', `${mib}M`, blob]);
    const digest = zerosDigest(blob);
    const server = spawn(process.execPath, [join(here, 'blob-server.js'), blob], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((resolve) => createInterface({ input: server.stdout }).once('line', resolve));
    const url = `http://127.0.0.1:${port}/v2/bench/blob/blobs/${digest}`;
    const size = statSync(blob).size;
    try {
      const rows: Record<string, { wall: number[]; user: number[]; sys: number[]; rss: number[] }> = {};
      const add = (name: string, r: Timed) => {
        rows[name] ??= { wall: [], user: [], sys: [], rss: [] };
        rows[name].wall.push(r.wall);
        rows[name].user.push(r.user);
        rows[name].sys.push(r.sys);
        rows[name].rss.push(r.rssMiB);
      };
      for (let run = 0; run < RUNS; run++) {
        const root = join(work, 'root');
        for (const direct of DIRECT ?? [undefined]) {
          const how =
            direct === undefined ? '' : direct === '0' ? ', through node:http' : direct === 'undici' ? ', an undici Agent as dispatcher' : ', off the socket';
          const name = `fastpull fetch (16 x ${CHUNK_MIB} MiB ranges${how})`;
          add(name, timed(process.execPath, [join(here, 'fetch-child.js'), `127.0.0.1:${port}`, digest, String(size), root, String(CHUNK_MIB)], direct));
          rmSync(root, { recursive: true, force: true });
        }
        const args = ['-sS', '--fail', '--parallel', '--parallel-max', String(PARALLEL)];
        for (let start = 0, i = 0; start < size; start += CHUNK, i++)
          args.push('-r', `${start}-${Math.min(size, start + CHUNK) - 1}`, '-o', join(work, `part${i}`), url);
        add(`curl --parallel (16 x ${CHUNK_MIB} MiB ranges)`, timed('curl', args));
        execFileSync('sh', ['-c', `rm -f "$0"/part*`, work]);
      }
      for (const [name, r] of Object.entries(rows)) {
        const m = median(r.wall);
        console.log(
          `| ${mib} MiB | ${name} | ${m.toFixed(2)} | ${(size / 1e6 / m).toFixed(0)} | ${median(r.user).toFixed(2)} | ${median(r.sys).toFixed(2)} | ${Math.max(...r.rss).toFixed(0)} |`,
        );
      }
    } finally {
      server.kill();
      rmSync(blob, { force: true });
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
