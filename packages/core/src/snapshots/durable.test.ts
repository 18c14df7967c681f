// The flush that makes a snapshot durable: which way is taken, and the fsync fallback on every kind of
// entry a layer holds (it must open only what can be fsynced, and keep names as bytes).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nativeFs, nativeSync } from '../native/addon.js';
import { closeForFlush, flushTree, openForFlush, syncMethod, writebackFor } from './durable.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A snapshot-like tree: nested dirs, files (one named by bytes that are not UTF-8), a symlink, a fifo, a hardlink. */
function tree(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-durable-'));
  dirs.push(root);
  fs.mkdirSync(path.join(root, 'fs', 'a', 'b'), { recursive: true });
  fs.writeFileSync(path.join(root, 'fs', 'a', 'b', 'f'), 'data');
  fs.writeFileSync(Buffer.concat([Buffer.from(`${root}/fs/a/`), Buffer.from([0xff, 0xfe])]), 'latin1 name');
  fs.symlinkSync('/nowhere', path.join(root, 'fs', 'dangling'));
  fs.linkSync(path.join(root, 'fs', 'a', 'b', 'f'), path.join(root, 'fs', 'hard'));
  nativeFs().mknod(path.join(root, 'fs', 'fifo'), fs.constants.S_IFIFO | 0o600, 0, 0);
  fs.writeFileSync(path.join(root, 'info.json'), '{}');
  return root;
}

describe('flushTree', () => {
  it('syncs a tree with every kind of entry, by syncfs and by fsync of each file and directory', async () => {
    const root = tree();
    await expect(flushTree(root, 'syncfs')).resolves.toBeUndefined();
    // A fifo opened to be fsynced would block; a dangling symlink would fail: the fallback opens neither.
    await expect(flushTree(root, 'fsync')).resolves.toBeUndefined();
  });

  it('reports a missing directory', async () => {
    const gone = path.join(os.tmpdir(), `fastpull-durable-gone-${process.pid}`);
    await expect(flushTree(gone, 'syncfs')).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(flushTree(gone, 'fsync')).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('syncMethod', () => {
  it('is syncfs by default and takes the method the tuning asks for', () => {
    expect(nativeSync()).toBeDefined();
    expect(syncMethod()).toBe('syncfs');
    expect(syncMethod('fsync')).toBe('fsync');
    expect(syncMethod('syncfs')).toBe('syncfs');
    expect(writebackFor('syncfs')).toEqual({ writeback: 'background' });
    expect(writebackFor('fsync')).toEqual({});
  });
});

describe('the addon flush calls', () => {
  it('start write-back on an open file and check their arguments', async () => {
    const root = tree();
    const fd = fs.openSync(path.join(root, 'info.json'), 'r+');
    try {
      fs.writeSync(fd, 'x'.repeat(100_000), 0);
      expect(() => nativeSync()!.startWriteback(fd, 0, 0)).not.toThrow();
      expect(() => nativeSync()!.startWriteback(fd, -1, 0)).toThrow(TypeError);
      expect(() => nativeSync()!.startWriteback(fd, 0.5, 0)).toThrow(TypeError);
    } finally {
      fs.closeSync(fd);
    }
    // syncfs takes a directory, never a file (it is opened O_DIRECTORY).
    await expect(nativeSync()!.syncfs(path.join(root, 'info.json'))).rejects.toMatchObject({ code: 'ENOTDIR', syscall: 'open' });
    expect(() => nativeSync()!.syncfs(-1)).toThrow(TypeError);
    expect(() => nativeSync()!.syncfs(1.5)).toThrow(TypeError);
  });

  it('flush through a directory fd opened before the writes, and report a closed one', async () => {
    const root = tree();
    const fd = openForFlush(root, 'syncfs')!;
    expect(fs.fstatSync(fd).isDirectory()).toBe(true);
    fs.writeFileSync(path.join(root, 'fs', 'late'), 'written after the open');
    await expect(flushTree(root, 'syncfs', fd)).resolves.toBeUndefined();
    closeForFlush(fd);
    // The fd is what is flushed, not the path: a closed one is an error, never a silent success.
    await expect(nativeSync()!.syncfs(fd)).rejects.toMatchObject({ code: 'EBADF', syscall: 'syncfs' });
    expect(openForFlush(root, 'fsync')).toBeUndefined();
  });
});
