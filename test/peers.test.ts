// The peers scripts/peers.sh builds from scripts/peers/pins.txt (scripts/test.sh runs it before the
// suites): each pinned program is there and says the pinned version, and a second run rebuilds
// nothing while the pins are unchanged. The SOCI snapshotter's daemon, a program of this
// repository's own over the released module's packages, serves the snapshotter API in its
// parallel pull mode.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot, tempDir } from './helpers.js';
import { snapshotsClient } from './snapshotter-client.js';
import { lacksRoot } from '@fastpull/core/testing';

interface Pin {
  readonly name: string;
  readonly version: string;
  readonly bins: string[];
}

/** The pins, with the programs each builds (a package's last path element; `.` builds NAME). */
const pins: Pin[] = readFileSync(join(repoRoot, 'scripts', 'peers', 'pins.txt'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '' && !l.startsWith('#'))
  .map((l) => {
    const [name, , version, , ...packages] = l.trim().split(/\s+/);
    return { name: name!, version: version!, bins: packages.map((p) => (p === '.' ? name! : p.split('/').at(-1)!)) };
  });

/** How each program reports its version. */
const VERSION_ARGS: Record<string, string[]> = { cosign: ['version'], 'containerd-shim-runc-v2': ['-v'] };

const peers = (args: string[] = []) => spawnSync('bash', [join(repoRoot, 'scripts', 'peers.sh'), ...args], { encoding: 'utf8' });
const list = peers(['--list']);
const binDirs = new Map(
  list.stdout
    .trim()
    .split('\n')
    .map((l) => [l.split(' ')[0]!, l.split(' ')[2]!]),
);

describe('peers built from their pinned Go modules', () => {
  it('lists every pin with the directory it builds into', () => {
    expect(list.status, list.stderr).toBe(0);
    expect([...binDirs.keys()]).toEqual(pins.map((p) => p.name));
    expect(pins.map((p) => p.name)).toEqual(
      expect.arrayContaining(['containerd-1.7', 'containerd-2.2', 'crictl', 'soci-snapshotter-grpc', 'cosign', 'notation-signer']),
    );
    for (const p of pins) expect(p.version, p.name).toMatch(/^v\d+\.\d+\.\d+$/);
  });

  it.each(pins)('$name: every program is built and reports $version', (pin) => {
    for (const bin of pin.bins) {
      const r = spawnSync(join(binDirs.get(pin.name)!, bin), VERSION_ARGS[bin] ?? ['--version'], { encoding: 'utf8' });
      expect(r.error, `${bin} (run bash scripts/peers.sh ${pin.name})`).toBeUndefined();
      expect(`${r.stdout}${r.stderr}`, bin).toContain(pin.version);
    }
  });

  it('a second run rebuilds nothing and says so', () => {
    const r = peers();
    expect(r.status, r.stderr).toBe(0);
    for (const p of pins) expect(r.stdout).toContain(`peers: ${p.name} ${p.version} up to date`);
    expect(r.stdout).toMatch(/^peers: 0 built, \d+ s in all/m);
  });
});

describe.skipIf(lacksRoot())('the SOCI snapshotter built from its module', () => {
  it('serves the snapshotter API in parallel pull mode (a prepared snapshot is listed and removed), and stops on SIGTERM', async () => {
    const work = tempDir('soci');
    try {
      const config = `${work.dir}/config.toml`;
      // Parallel mode keeps layers in containerd's content store unless told to discard them once unpacked.
      writeFileSync(config, '[pull_modes.parallel_pull_unpack]\nenable = true\ndiscard_unpacked_layers = true\n');
      const address = `${work.dir}/soci.sock`;
      const bin = join(binDirs.get('soci-snapshotter-grpc')!, 'soci-snapshotter-grpc');
      const proc = spawn(bin, ['--address', address, '--config', config, '--root', `${work.dir}/root`], { stdio: ['ignore', 'pipe', 'pipe'] });
      let log = '';
      const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
      const started = new Promise<void>((resolve, reject) => {
        const seen = (d: Buffer): void => {
          log += d.toString();
          if (log.includes('successfully started')) resolve();
        };
        proc.stdout.on('data', seen);
        proc.stderr.on('data', seen);
        void exited.then((code) => reject(new Error(`soci-snapshotter-grpc exited ${code}: ${log}`)));
      });
      await started;
      const client = snapshotsClient(address);
      try {
        const mounts = await client.prepare('probe');
        expect(mounts.map((m) => m.type)).toEqual(['bind']);
        expect((await client.list()).map((i) => i.name)).toEqual(['probe']);
        await client.remove('probe');
      } finally {
        client.close();
      }
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      work.cleanup();
    }
  });
});
