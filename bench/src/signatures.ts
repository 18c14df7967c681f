// What verifying signatures costs a pull. The ML image is pushed to the distribution registry on
// loopback and signed twice: by cosign (a key pair, its tag scheme, no transparency log) and by
// notation's own libraries (the notation-signer peer, a certificate chain made here, a Notary
// Project signature stored as a referrer). Each round, in rotated order, `fastpull pull` runs
// without a policy and with both (`--signature-policy` requiring the cosign key, `--notation-config`
// requiring the Notary signature, strict), page cache dropped before each. Reported: each contender's
// wall time and CPU, and the ratio of the verified pull to the unverified one of the same round,
// medians with min-max.
//
//   BENCH_SCALE (0.25)   image size, as `pnpm bench`
//   BENCH_RUNS (5)       rounds
//
// Needs root (page cache drop), docker-registry, and the cosign and notation-signer peers
// (bash scripts/peers.sh cosign notation-signer; FASTPULL_PEERS names where they are).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { startDistribution } from '@fastpull/core/testing';
import { cli, envNumber as num, f2, medianOf as median, repo } from './lib.js';
import { ensureImage, mlImage, pushCached, sizesFor } from './peers/images.js';
import { diskBytes, dropCaches, measure } from './peers/measure.js';

const benchDir = resolve(import.meta.dirname, '..');
const env = process.env;
const SCALE = num('BENCH_SCALE', 0.25);
const RUNS = Math.max(1, num('BENCH_RUNS', 5));
const CACHE = resolve(env.BENCH_CACHE ?? join(benchDir, '.cache'));
const TIMEOUT_MS = num('BENCH_TIMEOUT_S', 1800) * 1000;
const log = (s: string) => process.stderr.write(`${s}\n`);

/** A peer's binary as scripts/peers.sh lists it; fails the run, saying how to build it, when it is missing. */
function peer(name: string, file: string): string {
  const listed = spawnSync('bash', [join(repo, 'scripts', 'peers.sh'), '--list'], { encoding: 'utf8', env }).stdout;
  const dir = listed
    .split('\n')
    .find((l) => l.startsWith(`${name} `))
    ?.split(' ')[2];
  const bin = dir && join(dir, file);
  if (!bin || !existsSync(bin)) throw new Error(`${name} is not built: bash scripts/peers.sh ${name}`);
  return bin;
}

const cosign = peer('cosign', 'cosign');
const notationSigner = peer('notation-signer', 'notation-signer');
const work = join(CACHE, 'signatures');
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
/** The cosign key pair's password (cosign encrypts the private key with it). */
const COSIGN_PASSWORD = 'fastpull-bench';
const cosignEnv = { ...env, COSIGN_PASSWORD, TUF_ROOT: join(work, '.sigstore') };

const image = ensureImage(CACHE, mlImage(sizesFor(SCALE, env), 'gzip'), log);
mkdirSync(join(CACHE, 'registry'), { recursive: true });
const registry = await startDistribution({ dir: join(CACHE, 'registry') });
const wall: Record<string, number[]> = { off: [], on: [] };
const cpu: Record<string, number[]> = { off: [], on: [] };
const ratios: number[] = [];
const loadAtStart = loadavg();
const started = new Date();
try {
  const tagged = await pushCached(registry.url, registry.host, image);
  const repository = tagged.replace(/:[^:/]+$/, '');
  const byDigest = `${repository}@${image.manifestDigest}`;

  execFileSync(cosign, ['generate-key-pair', '--output-key-prefix', 'bench'], { cwd: work, env: cosignEnv, stdio: 'pipe' });
  execFileSync(
    cosign,
    ['sign', '--key', 'bench.key', '--use-signing-config=false', '--tlog-upload=false', '--allow-http-registry', '-y', '--new-bundle-format=false', byDigest],
    { cwd: work, env: cosignEnv, stdio: 'pipe' },
  );
  const pki = (n: string) => join(work, n);
  execFileSync(notationSigner, ['cert', '-out', pki('root'), '-is-ca', '-subject', 'CN=root,O=fastpull bench,ST=WA,C=US'], { stdio: 'pipe' });
  execFileSync(notationSigner, ['cert', '-out', pki('leaf'), '-ca', pki('root'), '-subject', 'CN=signer,O=fastpull bench,ST=WA,C=US'], { stdio: 'pipe' });
  execFileSync(notationSigner, ['sign', '-ref', byDigest, '-key', pki('leaf.key'), '-cert', pki('leaf.crt')], { stdio: 'pipe' });

  const policy = join(work, 'policy.json');
  writeFileSync(
    policy,
    JSON.stringify({
      default: [{ type: 'reject' }],
      transports: { docker: { [repository]: [{ type: 'sigstoreSigned', keyPath: join(work, 'bench.pub'), signedIdentity: { type: 'matchRepository' } }] } },
    }),
  );
  const notation = join(work, 'notation');
  mkdirSync(join(notation, 'truststore', 'x509', 'ca', 'bench'), { recursive: true });
  writeFileSync(join(notation, 'truststore', 'x509', 'ca', 'bench', 'root.crt'), readFileSync(pki('root.crt')));
  const statement = {
    name: 'bench',
    registryScopes: [repository],
    signatureVerification: { level: 'strict' },
    trustStores: ['ca:bench'],
    trustedIdentities: ['*'],
  };
  writeFileSync(join(notation, 'trustpolicy.json'), JSON.stringify({ version: '1.0', trustPolicies: [statement] }));

  const contenders = [
    { name: 'off', flags: [] as string[] },
    { name: 'on', flags: ['--signature-policy', policy, '--notation-config', notation] },
  ];
  log(`signatures: ${image.name} (${image.layers.length} layers), scale ${SCALE}, ${RUNS} round(s), signed by cosign and notation`);
  for (let run = 0; run < RUNS; run++) {
    const round: Record<string, number> = {};
    for (const c of run % 2 === 0 ? contenders : [...contenders].reverse()) {
      const dir = join(work, `${run}-${c.name}`);
      const root = join(dir, 'root');
      mkdirSync(dir, { recursive: true });
      dropCaches();
      const m = await measure(process.execPath, [cli, 'pull', '--quiet', '--plain-http', ...c.flags, '--root', root, tagged], { timeoutMs: TIMEOUT_MS });
      if (!m.ok) throw new Error(`the pull with verification ${c.name} failed: ${m.output.trim().split('\n').slice(-3).join(' / ')}`);
      if (c.name === 'on') {
        // Verification must have run, or the comparison says nothing.
        const record = JSON.stringify(JSON.parse(execFileSync(process.execPath, [cli, 'inspect', '--root', root, tagged], { encoding: 'utf8' })));
        for (const kind of ['sigstore', 'notation']) {
          if (!new RegExp(`"kind":"${kind}"[^}]*"outcome":"verified"`).test(record))
            throw new Error(`the verified pull recorded no ${kind} verdict: ${record.slice(0, 600)}`);
        }
      }
      wall[c.name]!.push(m.wall);
      cpu[c.name]!.push(m.cpu);
      round[c.name] = m.wall;
      log(`  run ${run + 1} verification ${c.name}: ${f2(m.wall)} s, ${f2(m.cpu)} s CPU, ${(diskBytes(root) / 2 ** 20).toFixed(0)} MiB on disk`);
      rmSync(dir, { recursive: true, force: true });
    }
    ratios.push(round.on! / round.off!);
  }
} finally {
  await registry.stop();
}

const range = (xs: number[], f: (x: number) => string) => (xs.length === 0 ? '-' : `${f(median(xs))} (${f(Math.min(...xs))}-${f(Math.max(...xs))})`);
const lines = [
  `## Signature verification: ${image.name}, one cosign and one Notary Project signature`,
  '',
  `${started.toISOString()}, ${availableParallelism()} cores, scale ${SCALE}, ${RUNS} round(s) alternating, load average at start ${loadAtStart.map((l) => l.toFixed(2)).join(' ')}. Medians (min-max).`,
  '',
  '| verification | pull s | pull CPU s |',
  '|---|---|---|',
  `| off | ${range(wall.off!, f2)} | ${range(cpu.off!, f2)} |`,
  `| on (cosign key + Notary, strict) | ${range(wall.on!, f2)} | ${range(cpu.on!, f2)} |`,
  '',
  `Verified over unverified, same round: ${range(ratios, (x) => x.toFixed(3))}.`,
];
const text = lines.join('\n') + '\n';
process.stdout.write(text);
const resultsDir = join(benchDir, 'results');
mkdirSync(resultsDir, { recursive: true });
writeFileSync(join(resultsDir, 'signatures.md'), text);
writeFileSync(join(resultsDir, 'signatures.json'), JSON.stringify({ started, scale: SCALE, runs: RUNS, loadAtStart, wall, cpu, ratios }, null, 2) + '\n');
