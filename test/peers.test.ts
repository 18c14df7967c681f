// The peers scripts/peers.sh builds from scripts/peers/pins.txt (scripts/test.sh runs it before the
// suites): each pinned program is there and says the pinned version, and a second run rebuilds
// nothing while the pins are unchanged.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers.js';

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
const binDirs = new Map(list.stdout.trim().split('\n').map((l) => [l.split(' ')[0]!, l.split(' ')[2]!]));

describe('peers built from their pinned Go modules', () => {
  it('lists every pin with the directory it builds into', () => {
    expect(list.status, list.stderr).toBe(0);
    expect([...binDirs.keys()]).toEqual(pins.map((p) => p.name));
    expect(pins.map((p) => p.name)).toEqual(expect.arrayContaining(['containerd-1.7', 'containerd-2.2', 'crictl', 'soci-snapshotter-grpc', 'cosign']));
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
