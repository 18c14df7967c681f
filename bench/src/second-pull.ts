// What a long-lived puller saves on the second pull from a registry. fastpulld runs every pull on
// one LocalService, whose pulls share registry connections and tokens; before, each pull built a
// client of its own. Each round pulls image A and then image B from one registry (HTTPS with a
// certificate made here, named with its CA in hosts.toml as a node names a private registry's;
// Bearer tokens behind Basic credentials; on loopback), two ways in rotated
// order: `shared` pulls B on the service that pulled A (what fastpulld does now), `fresh` pulls B on
// a service of its own (what every pull paid before). Reported for pull B: wall time, resolve time,
// and what the registry saw: TCP connections (each a TLS handshake) and tokens issued.
//
//   BENCH_RUNS (7)      rounds
//   BENCH_LAYERS (4)    layers of each image (small ones: the handshakes are what is measured)
//
// Loopback has no round-trip time, so the time saved here is the handshakes' CPU only; on a real
// network each saved connection is also a TCP and a TLS round trip, and each saved token one more.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalService } from '@fastpull/core';
import { sampleImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { envNumber as num, f2, medianOf as median } from './lib.js';

const RUNS = Math.max(1, num('BENCH_RUNS', 7));
const LAYERS = Math.max(1, num('BENCH_LAYERS', 4));
const log = (s: string) => process.stderr.write(`${s}\n`);

/** A self-signed certificate for 127.0.0.1, which hosts.toml names as the registry's CA. */
function certificate(dir: string): { key: string; cert: string } {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { key, cert };
}

interface Sample {
  wallMs: number;
  resolveMs: number;
  connections: number;
  tokens: number;
}

async function measure(dir: string): Promise<void> {
  const { key, cert } = certificate(dir);
  const registry = await startLoopbackRegistry({
    tls: { key: readFileSync(key), cert: readFileSync(cert) },
    auth: { type: 'bearer', username: 'bench', password: 'bench' },
  });
  const hostsDir = join(dir, 'certs.d');
  mkdirSync(join(hostsDir, registry.host), { recursive: true });
  writeFileSync(join(hostsDir, registry.host, 'hosts.toml'), `server = "https://${registry.host}"\nca = ${JSON.stringify(cert)}\n`);
  const credentials = () => ({ username: 'bench', password: 'bench' });
  const samples: Record<'shared' | 'fresh', Sample[]> = { shared: [], fresh: [] };
  try {
    for (let round = 0; round < RUNS; round++) {
      const order = round % 2 === 0 ? (['shared', 'fresh'] as const) : (['fresh', 'shared'] as const);
      for (const way of order) {
        const tag = `${way}-${round}`;
        registry.addImage('app', `${tag}-a`, await sampleImage(1000 + round * 4 + (way === 'shared' ? 0 : 2), { layers: LAYERS }));
        registry.addImage('app', `${tag}-b`, await sampleImage(1001 + round * 4 + (way === 'shared' ? 0 : 2), { layers: LAYERS }));
        const first = new LocalService({ root: join(dir, `root-${tag}`), hostsDir, credentials, env: {} });
        const second = way === 'shared' ? first : new LocalService({ root: join(dir, `root-${tag}`), hostsDir, credentials, env: {} });
        try {
          await first.pull(`${registry.host}/app:${tag}-a`);
          const before = { connections: registry.stats.connections, tokens: registry.stats.tokensIssued };
          const t0 = performance.now();
          const pulled = await second.pull(`${registry.host}/app:${tag}-b`);
          samples[way].push({
            wallMs: performance.now() - t0,
            resolveMs: pulled.timings.resolveMs,
            connections: registry.stats.connections - before.connections,
            tokens: registry.stats.tokensIssued - before.tokens,
          });
        } finally {
          await first.close();
          if (second !== first) await second.close();
        }
      }
    }
  } finally {
    await registry.close();
  }
  const row = (way: 'shared' | 'fresh') => {
    const s = samples[way];
    const range = (xs: number[]) => `${f2(median(xs))} (${f2(Math.min(...xs))}-${f2(Math.max(...xs))})`;
    return `| ${way} | ${range(s.map((x) => x.wallMs))} | ${range(s.map((x) => x.resolveMs))} | ${median(s.map((x) => x.connections))} | ${median(s.map((x) => x.tokens))} |`;
  };
  const ratios = samples.shared.map((s, i) => s.wallMs / samples.fresh[i]!.wallMs);
  console.log(`Second pull from one registry (HTTPS, Bearer tokens, loopback), ${LAYERS} layers, ${RUNS} rounds; medians (min-max):\n`);
  console.log('| second pull | wall, ms | resolve, ms | connections | tokens |\n|---|---|---|---|---|');
  console.log(row('shared'));
  console.log(row('fresh'));
  console.log(`\nshared / fresh, same round: ${f2(median(ratios))}x (${f2(Math.min(...ratios))}-${f2(Math.max(...ratios))})`);
}

const dir = mkdtempSync(join(tmpdir(), 'fastpull-second-pull-'));
try {
  log(`second pull: ${RUNS} rounds, ${LAYERS} layers per image, in ${dir}`);
  await measure(dir);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
