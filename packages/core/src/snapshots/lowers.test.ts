// Tests of the merged view of lower snapshots and of what a layer's snapshot takes from it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nativeFs } from '../native/addon.js';
import { LowerView, reconcileWithLowers } from './lowers.js';
import { lacksRoot } from '../testing/needs.js';

let sandbox: string;

beforeEach(() => {
  sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-lowers-'));
});

afterEach(() => {
  fs.rmSync(sandbox, { recursive: true, force: true });
});

/** A snapshot tree from a list: `d/` directories, `!name` whiteouts, `name` files; `+d/` an opaque directory. */
function layer(name: string, entries: readonly string[]): string {
  const root = path.join(sandbox, name);
  fs.mkdirSync(root);
  for (const e of entries) {
    const opaque = e.startsWith('+');
    const rel = e.replace(/^[+!]/, '');
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (rel.endsWith('/')) {
      fs.mkdirSync(p, { recursive: true });
      if (opaque) nativeFs().lsetxattr(p, 'trusted.overlay.opaque', Buffer.from('y'));
    } else if (e.startsWith('!')) nativeFs().mknod(p, fs.constants.S_IFCHR, 0, 0);
    else fs.writeFileSync(p, rel);
  }
  return root;
}

describe.skipIf(lacksRoot())('LowerView', () => {
  it('resolves paths as overlayfs merges the layers, top first', () => {
    const bottom = layer('bottom', ['a/x', 'a/y', 'b/deep/z', 'c/old', 'f', 'hidden/under']);
    const middle = layer('middle', ['!a/x', '+c/', 'c/new', 'b/', '!hidden']);
    const top = layer('top', ['f/']); // a directory over the file below
    const view = new LowerView([top, middle, bottom]);
    const found = (rel: string): string | undefined => {
      const hit = view.lookup(rel);
      return hit === undefined ? undefined : path.relative(sandbox, hit.path.toString());
    };
    expect(found('a/x')).toBeUndefined(); // whited out in the middle
    expect(found('a/y')).toBe('bottom/a/y');
    expect(found('a')).toBe('middle/a'); // the topmost directory there, holding the whiteout
    expect(found('b/deep/z')).toBe('bottom/b/deep/z'); // middle's b/ merges with bottom's
    expect(found('b')).toBe('middle/b');
    expect(found('c/old')).toBeUndefined(); // middle's c/ is opaque
    expect(found('c/new')).toBe('middle/c/new');
    expect(found('f')).toBe('top/f');
    expect(found('hidden/under')).toBeUndefined();
    expect(found('hidden')).toBeUndefined();
    expect(found('nothing/at/all')).toBeUndefined();
    expect(found('a/y/below-a-file')).toBeUndefined();
  });
});

describe.skipIf(lacksRoot())('reconcileWithLowers', () => {
  it('drops whiteouts that hide nothing below, and the implied directories they leave empty', () => {
    const bottom = layer('bottom', ['keep/x', 'dir/inner/y', 'gone-below']);
    const middle = layer('middle', ['!gone-below']);
    const upper = layer('upper', ['!keep/x', '!keep/absent', '!ghost/a/b', '!gone-below', '!dir/inner/nothing', 'dir/inner/new', '+opq/', '!opq/nothing']);
    const stats = reconcileWithLowers(
      upper,
      [middle, bottom],
      {
        impliedDirs: ['keep', 'ghost', 'ghost/a', 'dir', 'dir/inner', 'opq'],
        whiteouts: ['keep/x', 'keep/absent', 'ghost/a/b', 'gone-below', 'dir/inner/nothing', 'opq/nothing'],
      },
      { sameOwner: true },
    );
    const tree = execFileSync('find', ['.', '-mindepth', '1'], { cwd: upper, encoding: 'utf8' }).trim().split('\n').sort();
    // `opq` stays though empty: it still hides the layers below.
    expect(tree).toEqual(['./dir', './dir/inner', './dir/inner/new', './keep', './keep/x', './opq']);
    expect(stats).toEqual({ whiteoutsDropped: 5, dirsDropped: 2, dirsCopied: 3 });
  });

  it('gives an implied directory the mode, owner, times and xattrs of the directory below, but not its overlay ones', () => {
    const bottom = layer('bottom', ['d/']);
    const d = path.join(bottom, 'd');
    fs.chownSync(d, 7, 8);
    fs.chmodSync(d, 0o2750);
    nativeFs().lsetxattr(d, 'user.comment', Buffer.from('lower'));
    nativeFs().lsetxattr(d, 'trusted.overlay.opaque', Buffer.from('y'));
    nativeFs().lutimesNs(d, 1_400_000_000, 5, 1_500_000_000, 123_456_789);
    const upper = layer('upper', ['d/new', 'fresh/new']);
    const stats = reconcileWithLowers(upper, [bottom], { impliedDirs: ['d', 'fresh'], whiteouts: [] }, { sameOwner: true });
    expect(stats).toEqual({ whiteoutsDropped: 0, dirsDropped: 0, dirsCopied: 1 });
    const st = fs.lstatSync(path.join(upper, 'd'), { bigint: true });
    expect([Number(st.mode & 0o7777n).toString(8), st.uid, st.gid]).toEqual(['2750', 7n, 8n]);
    expect(st.mtimeNs).toBe(1_500_000_000_123_456_789n);
    expect(nativeFs().lgetxattr(path.join(upper, 'd'), 'user.comment')?.toString()).toBe('lower');
    // Opaque below says nothing about this snapshot's directory.
    expect(nativeFs().lgetxattr(path.join(upper, 'd'), 'trusted.overlay.opaque')).toBeNull();
    // Nothing below `fresh`: it keeps what the unpacker made.
    const fresh = fs.lstatSync(path.join(upper, 'fresh'));
    expect([fresh.uid, fresh.gid]).toEqual([0, 0]);
  });

  it('leaves owners alone when not asked to keep them (rootless)', () => {
    const bottom = layer('bottom', ['d/']);
    fs.chownSync(path.join(bottom, 'd'), 7, 8);
    fs.chmodSync(path.join(bottom, 'd'), 0o711);
    const upper = layer('upper', ['d/new']);
    reconcileWithLowers(upper, [bottom], { impliedDirs: ['d'], whiteouts: [] }, { sameOwner: false });
    const st = fs.lstatSync(path.join(upper, 'd'));
    expect([(st.mode & 0o7777).toString(8), st.uid]).toEqual(['711', 0]);
  });

  it('reaches names that are not UTF-8', () => {
    const raw = Buffer.from([0x64, 0xff, 0x64]).toString('latin1'); // "d\xffd"
    const bottom = layer('bottom', []);
    const upper = layer('upper', []);
    const below = Buffer.from(`${bottom}/${raw}`, 'latin1');
    fs.mkdirSync(below, 0o701);
    fs.chmodSync(below, 0o701);
    const xattrOf = (p: Buffer, set?: string): string | undefined => {
      const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      try {
        if (set !== undefined) nativeFs().lsetxattr(`/proc/self/fd/${fd}/.`, 'user.comment', Buffer.from(set));
        return nativeFs().lgetxattr(`/proc/self/fd/${fd}/.`, 'user.comment')?.toString();
      } finally {
        fs.closeSync(fd);
      }
    };
    xattrOf(below, 'not utf-8 below');
    const mine = Buffer.from(`${upper}/${raw}`, 'latin1');
    fs.mkdirSync(mine);
    fs.writeFileSync(Buffer.from(`${upper}/${raw}/child`, 'latin1'), 'c');
    fs.mkdirSync(Buffer.from(`${upper}/${raw}/empty`, 'latin1'));
    const stats = reconcileWithLowers(upper, [bottom], { impliedDirs: [raw, `${raw}/empty`], whiteouts: [] }, { sameOwner: true });
    expect(stats).toEqual({ whiteoutsDropped: 0, dirsDropped: 1, dirsCopied: 1 });
    expect(fs.lstatSync(mine).mode & 0o7777).toBe(0o701);
    expect(xattrOf(mine)).toBe('not utf-8 below');
  });
});
