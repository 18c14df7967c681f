// Tests of the layer tree on its own: implied parents, containment, making way, and the directory metadata applied last.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LayerTree, leaf } from './layertree.js';
import { ApplyReport } from './report.js';

let root: string;
let report: ApplyReport;
let tree: LayerTree;
let overDeletion: string[];

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-tree-'));
  report = new ApplyReport('applying layer to test');
  overDeletion = [];
  tree = new LayerTree(root, report, (dir) => overDeletion.push(dir));
});
afterEach(() => {
  if (process.getuid?.() !== 0) execFileSync('chmod', ['-R', 'u+w', root]); // read-only directories; symlinks are not followed
  fs.rmSync(root, { recursive: true, force: true });
});

/** Puts a node of `kind` at `rel` as the writer would, with something real on disk. */
function place(rel: string, kind: 'file' | 'symlink' | 'whiteout'): void {
  const parent = tree.prepare(rel, false);
  if (kind === 'symlink') fs.symlinkSync('/', path.join(root, rel));
  else fs.writeFileSync(path.join(root, rel), '');
  parent.set(path.basename(rel), leaf(kind));
}

describe('LayerTree', () => {
  it('makes missing parents owner-only now and 0755 at the end, and lists them as implied', () => {
    tree.ensureParents('a/b/c');
    expect(fs.lstatSync(path.join(root, 'a/b')).mode & 0o7777).toBe(0o700);
    expect(tree.lookup('a/b')?.meta).toEqual({ mode: 0o755, implied: true });
    const checks = { impliedDirs: [] as string[], whiteouts: [] as string[] };
    tree.finish(checks);
    expect(fs.lstatSync(path.join(root, 'a/b')).mode & 0o7777).toBe(0o755);
    expect(checks.impliedDirs.sort()).toEqual(['a', 'a/b']);
  });

  it('refuses a parent that is not a directory, naming it, and makes nothing through it', () => {
    place('link', 'symlink');
    place('f', 'file');
    expect(() => tree.ensureParents('link/evil')).toThrow(
      expect.objectContaining({
        code: 'HOSTILE_LAYER',
        message: expect.stringContaining('parent "link" of "link/evil" is a symlink'),
        details: expect.objectContaining({ parentKind: 'symlink' }),
      }),
    );
    expect(() => tree.ensureDir('f/sub')).toThrow(expect.objectContaining({ code: 'HOSTILE_LAYER' }));
    expect(() => tree.lookup('link/x', 'hardlink target "link/x"')).toThrow(/hardlink target "link\/x" goes through "link", a symlink/);
    expect(tree.lookup('link/x')).toBeUndefined(); // a plain lookup does not refuse
    expect(fs.readdirSync(root).sort()).toEqual(['f', 'link']);
  });

  it('holds one shared, frozen node for every path of a kind that is not a directory', () => {
    place('a', 'file');
    place('b', 'file');
    place('s', 'symlink');
    expect(tree.lookup('a')).toBe(tree.lookup('b'));
    expect(tree.lookup('s')).not.toBe(tree.lookup('a'));
    expect(tree.lookup('s')?.kind).toBe('symlink');
    // Nothing may write to a shared node (it would change every path of its kind).
    expect(() => Object.assign(tree.lookup('a')!, { kind: 'dir' })).toThrow(TypeError);
    expect(tree.lookup('b')?.kind).toBe('file');
  });

  it('makes way: removes a file or a whole directory, and merges a directory over a directory', () => {
    place('f', 'file');
    tree.prepare('f', false);
    expect(fs.existsSync(path.join(root, 'f'))).toBe(false);
    expect(tree.lookup('f')).toBeUndefined();

    tree.ensureParents('d/e/g');
    fs.writeFileSync(path.join(root, 'd/e/g'), 'x');
    tree.lookup('d/e')!.children!.set('g', leaf('file'));
    tree.prepare('d', true); // a directory over a directory keeps its contents
    expect(fs.readFileSync(path.join(root, 'd/e/g'), 'utf8')).toBe('x');
    tree.prepare('d', false); // anything else replaces it whole
    expect(fs.existsSync(path.join(root, 'd'))).toBe(false);
    expect(tree.lookup('d')).toBeUndefined();
  });

  it('replaces a deletion on the way to an entry with a directory, and says so', () => {
    place('w', 'whiteout');
    tree.ensureParents('w/child');
    expect(fs.lstatSync(path.join(root, 'w')).isDirectory()).toBe(true);
    expect(tree.lookup('w')?.kind).toBe('dir');
    expect(overDeletion).toEqual(['w']);
  });

  it('applies directory modes and times children first, so a read-only parent does not stop them', () => {
    tree.ensureDir('ro/inner');
    tree.lookup('ro')!.meta = { mode: 0o555, times: { atime: { sec: 1, nsec: 2 }, mtime: { sec: 1_000_000_000, nsec: 123_456_789 } } };
    tree.lookup('ro/inner')!.meta = { mode: 0o500, times: { atime: { sec: 5, nsec: 0 }, mtime: { sec: 1_200_000_000, nsec: 1 } } };
    place('ro/inner/gone', 'whiteout');
    const checks = { impliedDirs: [] as string[], whiteouts: [] as string[] };
    tree.finish(checks);
    const st = (rel: string): fs.BigIntStats => fs.lstatSync(path.join(root, rel), { bigint: true });
    expect([st('ro').mode & 0o7777n, st('ro').mtimeNs]).toEqual([0o555n, 1_000_000_000_123_456_789n]);
    expect([st('ro/inner').mode & 0o7777n, st('ro/inner').mtimeNs]).toEqual([0o500n, 1_200_000_000_000_000_001n]);
    expect(checks).toEqual({ impliedDirs: [], whiteouts: ['ro/inner/gone'] });
  });
});
