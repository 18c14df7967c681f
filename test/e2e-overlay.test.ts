// End to end: the built fastpull CLI pulls from the real registry, prints the overlay mount, and the
// mounted tree must equal, file by file, the tree the image builder says the image produces.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BuiltImage,
  diffTrees,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  pushImage,
  readTree,
  sampleImage,
  startDistribution,
} from '@fastpull/core/testing';
import { overlayUnavailable, runCli, tempDir } from './helpers.js';

const binary = findDistributionBinary();
const noOverlay = overlayUnavailable();
if (!binary) console.warn('skipping CLI end-to-end tests: docker-registry is not installed');
if (noOverlay) console.warn(`skipping the overlay comparison: ${noOverlay}`);

describe.skipIf(lacksRegistry())('fastpull CLI end to end', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('e2e');
  const root = join(work.dir, 'root');
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(42, { layers: 5 });
    await pushImage(registry.url, 'e2e/app', 'v1', image);
    ref = `${registry.host}/e2e/app:v1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('pulls, lists and prints mounts', () => {
    const pulled = runCli(['pull', '--root', root, '--plain-http', ref]);
    expect(pulled.stderr).toContain('resolved');
    expect(pulled.status).toBe(0);
    expect(pulled.stdout).toContain(`pulled ${ref} (${image.manifestDigest})`);

    const images = runCli(['images', '--root', root, '--json']);
    expect(images.status).toBe(0);
    const list = JSON.parse(images.stdout) as { name: string; layers: unknown[] }[];
    expect(list.map((i) => i.name)).toEqual([ref]);
    expect(list[0]!.layers).toHaveLength(image.layers.length);

    const mounts = runCli(['mounts', '--root', root, ref]);
    expect(mounts.status).toBe(0);
    expect(mounts.stdout).toMatch(/^-t overlay overlay -o lowerdir=\S+\n$/);
    expect(mounts.stdout.split('lowerdir=')[1]!.trim().split(':')).toHaveLength(image.layers.length);
  });

  it.skipIf(lacks('overlay', noOverlay))('mounts with overlayfs into exactly the tree the image defines', async () => {
    const mounts = runCli(['mounts', '--root', root, '--json', ref]);
    expect(mounts.status).toBe(0);
    const [m] = JSON.parse(mounts.stdout) as { type: string; source: string; options: string[] }[];
    const merged = join(work.dir, 'merged');
    mkdirSync(merged);
    execFileSync('mount', ['-t', m!.type, m!.source, '-o', m!.options.join(','), merged]);
    try {
      const got = await readTree(merged);
      const want = image.expectedTree();
      expect(diffTrees(want, got)).toEqual([]);
      // The image really exercises whiteouts: something present in a lower layer is gone.
      expect(image.layers[0]!.entries.some((e) => e.type !== 'dir' && !want.has(e.path))).toBe(true);
    } finally {
      execFileSync('umount', [merged]);
    }
  });

  it('prints one line with a stable code and exits non-zero on errors', () => {
    const missing = runCli(['pull', '--root', root, '--plain-http', `${registry.host}/e2e/app:missing`]);
    expect(missing.status).toBe(1);
    expect(missing.stderr.trim().split('\n').at(-1)).toMatch(/^fastpull: pulling \S+\/e2e\/app:missing: .* \(NOT_FOUND\)$/);

    const badRef = runCli(['pull', '--root', root, 'Not A Ref']);
    expect(badRef.status).toBe(1);
    expect(badRef.stderr).toMatch(/^fastpull: pulling Not A Ref: .* \(INVALID_REFERENCE\)\n$/);

    const notPulled = runCli(['mounts', '--root', root, 'never/pulled:1']);
    expect(notPulled.status).toBe(1);
    expect(notPulled.stderr).toMatch(
      /^fastpull: finding the mounts of docker\.io\/never\/pulled:1: image docker\.io\/never\/pulled:1 is not in the store .* \(NOT_FOUND\)\n$/,
    );

    const usage = runCli(['pull']);
    expect(usage.status).toBe(2);
  });
});
