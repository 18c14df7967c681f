// Tests of readTree, diffTrees and writeTree, and a cross-check of built layers against GNU tar.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildImage, type ExpectedEntry } from './builder.js';
import { sampleImage } from './sample.js';
import { diffTrees, readTree, writeTree } from './tree.js';
import { lacks } from './needs.js';

const asRoot = process.getuid?.() === 0;
const hasTar = spawnSync('tar', ['--version']).status === 0;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fastpull-tree-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readTree and diffTrees', () => {
  it('round-trips a sample image tree through the file system with no differences', async () => {
    const image = await sampleImage(21);
    const want = image.expectedTree();
    await writeTree(dir, want);
    const got = await readTree(dir);
    expect(diffTrees(want, got, { owners: asRoot })).toEqual([]);
    expect(got.size).toBe(want.size);
  });

  it('reports a changed mode, content, target, owner, type, and missing and extra paths', async () => {
    const want = new Map<string, ExpectedEntry>([
      ['a', { type: 'dir', mode: 0o755, uid: 0, gid: 0 }],
      ['a/file', { type: 'file', mode: 0o644, uid: 0, gid: 0, content: Buffer.from('hello') }],
      ['a/link', { type: 'symlink', target: 'file', uid: 0, gid: 0 }],
      ['a/gone', { type: 'file', mode: 0o644, uid: 0, gid: 0, content: Buffer.from('x') }],
      ['b', { type: 'dir', mode: 0o755, uid: 0, gid: 0 }],
    ]);
    await writeTree(dir, want);
    expect(diffTrees(want, await readTree(dir), { owners: false })).toEqual([]);

    await chmod(join(dir, 'a/file'), 0o600);
    await writeFile(join(dir, 'a/file'), 'hullo!');
    await rm(join(dir, 'a/link'));
    await symlink('elsewhere', join(dir, 'a/link'));
    await rm(join(dir, 'a/gone'));
    await writeFile(join(dir, 'a/extra'), '');
    await rm(join(dir, 'b'), { recursive: true });
    await writeFile(join(dir, 'b'), 'now a file');

    const diffs = diffTrees(want, await readTree(dir), { owners: false });
    expect(diffs).toHaveLength(6);
    expect(diffs).toContain('a/file: mode: want 0o644, got 0o600');
    expect(diffs.find((d) => d.startsWith('a/file: content:'))).toMatch(/want 5 bytes sha256:[0-9a-f]{12}, got 6 bytes sha256:[0-9a-f]{12}/);
    expect(diffs).toContain('a/link: symlink target: want "file", got "elsewhere"');
    expect(diffs).toContain('a/gone: missing (want file, 1 bytes)');
    expect(diffs).toContain('a/extra: extra (got file, 0 bytes)');
    expect(diffs).toContain('b: type: want dir, got file, 10 bytes');

    const owned = new Map(want);
    owned.set('a', { type: 'dir', mode: 0o755, uid: 1234, gid: 5 });
    const withOwners = diffTrees(owned, await readTree(dir));
    expect(withOwners.some((d) => d.startsWith('a: owner: want 1234:5, got'))).toBe(true);
  });

  it('does not follow symlinks and keeps setuid and sticky bits in mode', async () => {
    await mkdir(join(dir, 'real'));
    await writeFile(join(dir, 'real/inside'), 'x');
    await symlink('real', join(dir, 'link'));
    await writeFile(join(dir, 'suid'), 'x');
    await chmod(join(dir, 'suid'), 0o4755);
    await mkdir(join(dir, 'tmp'));
    await chmod(join(dir, 'tmp'), 0o1777);
    const got = await readTree(dir);
    expect(got.get('link')).toMatchObject({ type: 'symlink', target: 'real' });
    expect(got.has('link/inside')).toBe(false);
    expect(got.get('suid')).toMatchObject({ type: 'file', mode: 0o4755 });
    expect(got.get('tmp')).toMatchObject({ type: 'dir', mode: 0o1777 });
  });

  // An independent check of the builder: GNU tar extracting layer tars must give the expected tree.
  it.skipIf(lacks('tar', hasTar ? undefined : 'tar is not installed'))('agrees with GNU tar extracting the layer tars', async () => {
    const image = await buildImage({
      layers: [
        [
          { type: 'file', path: 'usr/bin/tool', content: 'ELF', mode: 0o4755, uid: 3, gid: 4 },
          { type: 'hardlink', path: 'usr/bin/tool-alias', target: 'usr/bin/tool' },
          { type: 'symlink', path: 'bin', target: 'usr/bin' },
          { type: 'dir', path: 'tmp', mode: 0o1777 },
          { type: 'file', path: `deep/${'d'.repeat(90)}/${'f'.repeat(90)}`, content: 'long path' },
        ],
        [{ type: 'file', path: 'usr/bin/tool', content: 'ELF2', mode: 0o755 }],
      ],
      compression: 'none',
    });
    for (const layer of image.layers) execFileSync('tar', ['-xpf', '-', '-C', dir, '--numeric-owner'], { input: layer.tar });
    expect(diffTrees(image.expectedTree(), await readTree(dir), { owners: asRoot })).toEqual([]);
  });
});
