// The built fastpull CLI against the real distribution registry: what each command prints (tables,
// JSON, log lines), and the error lines and exit codes of failures.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '@fastpull/core';
import { formatBytes } from '@fastpull/cli';
import { type BuiltImage, findDistributionBinary, lacksRegistry, pushImage, sampleImage, startDistribution } from '@fastpull/core/testing';
import { cliPath, ls, runCli, tempDir } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping CLI command tests: docker-registry is not installed');

describe.skipIf(lacksRegistry())('fastpull commands against a real registry', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  let single: BuiltImage;
  const work = tempDir('cli-commands');
  const root = join(work.dir, 'root');
  let ref = '';
  let singleRef = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(11, { layers: 3 });
    single = await sampleImage(12, { layers: 1 });
    await pushImage(registry.url, 'cmd/app', 'v1', image);
    await pushImage(registry.url, 'cmd/one', 'v1', single);
    ref = `${registry.host}/cmd/app:v1`;
    singleRef = `${registry.host}/cmd/one:v1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('pull without a terminal: log lines per layer state on stderr, a summary on stdout', () => {
    const r = runCli(['pull', '--root', root, ref]);
    expect(r.status, r.stderr).toBe(0);
    const err = r.stderr.split('\n');
    expect(err[0]).toBe(`${ref}: resolved ${image.manifestDigest} (linux/amd64), 3 layers`);
    for (const l of image.layers) {
      const short = l.digest.slice(7, 19);
      expect(err).toContain(`  ${short}: downloading (${formatBytes(l.size)})`);
      expect(err).toContain(`  ${short}: pull complete (${formatBytes(l.size)})`);
      // State changes only: one line per state, however many progress events came.
      expect(err.filter((line) => line.startsWith(`  ${short}: downloading`))).toHaveLength(1);
    }
    expect(r.stderr).not.toContain('\x1b[');
    expect(r.stdout).toMatch(new RegExp(`^pulled ${escape(ref)} \\(${image.manifestDigest}\\) in \\d+\\.\\d\\ds\\n`));
  });

  it('pull --quiet prints only the manifest digest of each image', () => {
    const r = runCli(['pull', '--root', root, '--quiet', ref, singleRef]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${image.manifestDigest}\n${single.manifestDigest}\n`);
    expect(r.stderr).toBe('');
  });

  it('pull --json writes one event per line, ending with a done event that says where the image landed', () => {
    const fresh = join(work.dir, 'root-json');
    const r = runCli(['pull', '--root', fresh, '--json', '--concurrency', '2', '--chunk-size', '64KiB', ref]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const events = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events[0]).toMatchObject({ type: 'resolved', ref, name: ref, manifest: image.manifestDigest });
    const layerEvents = events.filter((e) => e.type === 'layer');
    for (let i = 0; i < image.layers.length; i++) {
      const states = layerEvents.filter((e) => e.index === i).map((e) => e.state);
      expect(states[0]).toBe('waiting');
      expect(states).toContain('fetching');
      expect(states.at(-1)).toBe('committed');
      // States only move forward, in the order docs/cli.md lists them (a state repeats only to
      // report more bytes).
      const order = ['waiting', 'fetching', 'extracting', 'verifying', 'committed'];
      const ranks = states.map((s) => order.indexOf(s as string));
      expect(ranks, `layer ${i}: ${states.join(' -> ')}`).not.toContain(-1);
      expect(ranks, `layer ${i}: ${states.join(' -> ')}`).toEqual([...ranks].sort((a, b) => a - b));
    }
    const done = events.at(-1) as {
      type: string;
      ref: string;
      image: { name: string; layers: { chainID: string }[] };
      root: string;
      snapshots: string[];
      mounts: { type: string; options: string[] }[];
      timings: { totalMs: number; layers: unknown[] };
    };
    expect(done.type).toBe('done');
    expect(done.ref).toBe(ref);
    expect(done.image.name).toBe(ref);
    expect(done.root).toBe(fresh);
    expect(done.snapshots).toEqual(done.image.layers.map((l) => openStore(fresh).snapshots.fsPath(l.chainID as `sha256:${string}`)));
    expect(done.mounts[0]!.type).toBe('overlay');
    expect(done.mounts[0]!.options.at(-1)!.split(':')).toHaveLength(image.layers.length);
    expect(done.timings.layers).toHaveLength(image.layers.length);
    expect(events.filter((e) => e.type === 'done')).toHaveLength(1);
    // The timings' public shape (docs/cli.md): resolveMs at the top, once per pull; phases the
    // per-layer sums, and resolveMs again among them, deprecated there and the same number.
    const t = done.timings as unknown as { resolveMs: number; totalMs: number; layers: Record<string, number>[]; phases: Record<string, number> };
    expect(Object.keys(t).sort()).toEqual(['layers', 'phases', 'resolveMs', 'totalMs']);
    expect(t.resolveMs).toBeGreaterThan(0);
    expect(Object.keys(t.phases).sort()).toEqual(['commitMs', 'decompressMs', 'extractMs', 'fetchMs', 'resolveMs', 'verifyMs']);
    expect(t.phases.resolveMs).toBe(t.resolveMs);
    for (const phase of ['fetchMs', 'verifyMs', 'decompressMs', 'extractMs', 'commitMs']) {
      expect(t.phases[phase], phase).toBeCloseTo(
        t.layers.reduce((n, l) => n + l[phase]!, 0),
        6,
      );
    }
  });

  it('pull --timings prints the phases of each layer and the total', () => {
    const r = runCli(['pull', '--root', join(work.dir, 'root-timings'), '--timings', ref]);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.split('\n').map((l) => l.trim());
    const head = lines.findIndex((l) => /^LAYER\s+STATE\s+FETCH\s+UNPACK\s+(.*\s+)?COMMIT$/.test(l));
    expect(head).toBeGreaterThan(0);
    for (const [i, l] of image.layers.entries()) expect(lines[head + 1 + i]).toMatch(new RegExp(`^${l.digest.slice(7, 19)}\\s+committed\\s+\\d`));
    expect(lines[head + 1 + image.layers.length]).toMatch(/^sum\s+\d/);
    expect(lines[head + 2 + image.layers.length]).toMatch(/^resolve \d+ms, total \d.*; most time: (fetch|verify|decompress|extract|commit) /);
  });

  it('rm forgets an image, gc removes what nothing else uses; layer blobs go unless --keep-blobs', () => {
    const store = join(work.dir, 'root-rm');
    const blobs = (): string[] => ls(join(store, 'content', 'blobs', 'sha256')).map((h) => `sha256:${h}`);
    expect(runCli(['pull', '--root', store, '-q', ref]).status).toBe(0);
    // Dropped after unpacking by default: manifest and config stay.
    expect(blobs().sort()).toEqual([image.manifestDigest, image.configDigest].sort());
    expect(runCli(['pull', '--root', store, '-q', '--keep-blobs', singleRef]).status).toBe(0);
    expect(blobs()).toContain(single.layers[0]!.digest);

    const dry = runCli(['gc', '--root', store, '--dry-run']);
    expect(dry.status, dry.stderr).toBe(0);
    expect(dry.stdout).toBe('would remove 0 snapshots and 0 blobs, 0 leftovers of interrupted pulls: 0 B\n');

    const rm = runCli(['rm', '--root', store, ref]);
    expect(rm.status, rm.stderr).toBe(0);
    expect(rm.stdout).toBe(`removed ${ref}\n`);
    const gone = runCli(['rm', '--root', store, ref]);
    expect(gone.status).toBe(1);
    expect(gone.stderr).toMatch(new RegExp(`^fastpull: removing ${escape(ref)}: image ${escape(ref)} is not in the store at .*\\(NOT_FOUND\\)\\n$`));

    const gc = runCli(['gc', '--root', store, '--json']);
    expect(gc.status, gc.stderr).toBe(0);
    const r = JSON.parse(gc.stdout) as { snapshots: { chainID: string }[]; blobs: { digest: string }[]; bytes: number };
    expect(r.snapshots).toHaveLength(image.layers.length); // chainIDs differ even where layers repeat
    expect(r.blobs.map((b) => b.digest).sort()).toEqual([image.manifestDigest, image.configDigest].sort());
    expect(r.bytes).toBeGreaterThan(0);
    expect(blobs().sort()).toEqual([single.manifestDigest, single.configDigest, single.layers[0]!.digest].sort());
    const left = JSON.parse(runCli(['images', '--root', store, '--json']).stdout) as { name: string }[];
    expect(left.map((i) => i.name)).toEqual([singleRef]);
    // The remaining image still mounts: its snapshot survived.
    expect(runCli(['mounts', '--root', store, singleRef]).status).toBe(0);

    const rmgc = runCli(['rm', '--root', store, '--gc', singleRef]);
    expect(rmgc.status, rmgc.stderr).toBe(0);
    expect(rmgc.stdout).toMatch(/^removed .*\ngc: removed 1 snapshots and 3 blobs, .* freed\n$/);
    expect(blobs()).toEqual([]);
  });

  it('images: a table with digest, platform, layers, sizes and age; JSON with the unpacked size', () => {
    runCli(['pull', '--root', root, '--quiet', singleRef]);
    const table = runCli(['images', '--root', root]);
    expect(table.status).toBe(0);
    const rows = table.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/\s{2,}/));
    expect(rows[0]).toEqual(['NAME', 'DIGEST', 'PLATFORM', 'LAYERS', 'SIZE', 'UNPACKED', 'CREATED']);
    const unpacked = (i: BuiltImage) => i.layers.reduce((s, l) => s + l.tar.length, 0);
    const compressed = (i: BuiltImage) => i.layers.reduce((s, l) => s + l.size, 0);
    expect(rows.slice(1)).toEqual([
      [
        ref,
        image.manifestDigest.slice(7, 19),
        'linux/amd64',
        '3',
        formatBytes(compressed(image)),
        formatBytes(unpacked(image)),
        expect.stringMatching(/ago$|^just now$/),
      ],
      [
        singleRef,
        single.manifestDigest.slice(7, 19),
        'linux/amd64',
        '1',
        formatBytes(compressed(single)),
        formatBytes(unpacked(single)),
        expect.stringMatching(/ago$|^just now$/),
      ],
    ]);

    const json = runCli(['images', '--root', root, '--json']);
    const list = JSON.parse(json.stdout) as {
      name: string;
      size: number;
      unpackedSize: number;
      platformName: string;
      layers: unknown[];
      manifest: { digest: string };
    }[];
    expect(list.map((i) => [i.name, i.manifest.digest, i.size, i.unpackedSize, i.platformName, i.layers.length])).toEqual([
      [ref, image.manifestDigest, compressed(image), unpacked(image), 'linux/amd64', 3],
      [singleRef, single.manifestDigest, compressed(single), unpacked(single), 'linux/amd64', 1],
    ]);
  });

  it('inspect: the record with its manifest and config from the content store', () => {
    const r = runCli(['inspect', '--root', root, ref]);
    expect(r.status, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout) as {
      image: { name: string; manifest: { digest: string } };
      manifest: unknown;
      config: unknown;
      unpackedSize: number;
      snapshots: string[];
    };
    expect(got.image.name).toBe(ref);
    expect(got.image.manifest.digest).toBe(image.manifestDigest);
    expect(got.manifest).toEqual(JSON.parse(image.manifest.toString('utf8')));
    expect(got.config).toEqual(JSON.parse(image.config.toString('utf8')));
    expect(got.unpackedSize).toBe(image.layers.reduce((s, l) => s + l.tar.length, 0));
    expect(got.snapshots).toHaveLength(3);
    expect(got).not.toHaveProperty('index');
  });

  it('mounts: text in mount(8) argument order, or JSON', () => {
    const text = runCli(['mounts', '--root', root, ref]);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^-t overlay overlay -o lowerdir=\S+\n$/);
    const json = JSON.parse(runCli(['mounts', '--root', root, '--json', singleRef]).stdout) as { type: string; options: string[] }[];
    expect(json).toEqual([{ type: 'bind', source: expect.stringMatching(/\/fs$/), options: ['ro', 'rbind'] }]);
  });

  it('failures: one line with what was being done and a code, exit 1; usage errors exit 2', () => {
    const missing = runCli(['pull', '--root', root, `${registry.host}/cmd/app:missing`]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(new RegExp(`^fastpull: pulling ${escape(registry.host)}/cmd/app:missing: .*manifest unknown \\(NOT_FOUND\\)\\n$`));
    expect(missing.stderr).not.toMatch(/^\s+at /m);

    const json = runCli(['pull', '--root', root, '--json', `${registry.host}/cmd/app:missing`]);
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout.trim().split('\n').at(-1)!)).toMatchObject({ type: 'error', ref: `${registry.host}/cmd/app:missing`, code: 'NOT_FOUND' });

    const debug = runCli(['pull', '--root', root, '--debug', `${registry.host}/cmd/app:missing`]);
    expect(debug.status).toBe(1);
    expect(debug.stderr.split('\n')[0]).toBe(missing.stderr.trim());
    expect(debug.stderr).toMatch(/^\s+at /m);
    expect(debug.stderr).toContain('details: {"status":404}');

    const usage = runCli(['pull', '--root', root, '--chunk-size', 'huge', ref]);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toBe('fastpull: pull: --chunk-size "huge": want a whole number of bytes, e.g. 1048576, 8M or 16MiB (INVALID_ARGUMENT)\n');
  });
});

describe('fastpull output to a reader that goes away', () => {
  it('ends quietly, without a stack trace', async () => {
    const child = spawn(process.execPath, [cliPath, 'pull', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // Closed before the CLI writes anything: its write gets EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).toBe('');
    expect(status).toBe(0);
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
