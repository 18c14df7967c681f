// Tests of the stand-ins for the native addon: the same locks, device nodes and errors, and times to the microsecond.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fallbackFs } from './fallback.js';
import { nativeFs } from './addon.js';
import { lacksRoot } from '../testing/needs.js';

let dir: string;
let uses: number;
const fallback = fallbackFs(() => uses++);

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-fallback-'));
  uses = 0;
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('fallbackFs', () => {
  it('takes flock locks that the addon, on another open file, sees held until the descriptor closes', () => {
    const file = path.join(dir, 'lock');
    const a = fs.openSync(file, 'a');
    const b = fs.openSync(file, 'a');
    const c = fs.openSync(file, 'a');
    try {
      expect(fallback.tryLock(a, true)).toBe(true);
      expect(nativeFs().tryLock(b, true)).toBe(false);
      expect(nativeFs().tryLock(b, false)).toBe(false);
      expect(fallback.tryLock(c, true)).toBe(false); // the conflict, told apart from flock(1) failing
      fs.closeSync(a);
      expect(fallback.tryLock(b, false)).toBe(true);
      expect(fallback.tryLock(c, false)).toBe(true); // shared with shared
      expect(nativeFs().tryLock(c, true)).toBe(false); // b still holds its shared lock
      expect(uses).toBe(4);
    } finally {
      for (const fd of [b, c]) fs.closeSync(fd);
    }
  });

  it('makes fifos with their mode, through /proc/self/fd paths too, and reports errno codes as the addon does', () => {
    const fifo = path.join(dir, 'fifo');
    fallback.mknod(fifo, fs.constants.S_IFIFO | 0o640, 0, 0);
    const st = fs.lstatSync(fifo);
    expect(st.isFIFO()).toBe(true);
    expect(st.mode & 0o7777).toBe(0o640);
    expect(() => fallback.mknod(fifo, fs.constants.S_IFIFO | 0o600, 0, 0)).toThrow(expect.objectContaining({ code: 'EEXIST', path: fifo }));
    expect(() => fallback.mknod(path.join(dir, 'no/such/fifo'), fs.constants.S_IFIFO | 0o600, 0, 0)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => fallback.mknod(path.join(dir, 'file'), fs.constants.S_IFREG | 0o600, 0, 0)).toThrow(TypeError);
    const dirFd = fs.openSync(dir, 'r');
    try {
      fallback.mknod(`/proc/self/fd/${dirFd}/through-fd`, fs.constants.S_IFIFO | 0o600, 0, 0);
    } finally {
      fs.closeSync(dirFd);
    }
    expect(fs.lstatSync(path.join(dir, 'through-fd')).isFIFO()).toBe(true);
  });

  it.skipIf(lacksRoot())('makes overlay whiteouts (character device 0:0, mode 0) as root', () => {
    const wh = path.join(dir, 'gone');
    fallback.mknod(wh, fs.constants.S_IFCHR, 0, 0);
    const st = fs.lstatSync(wh);
    expect(st.isCharacterDevice()).toBe(true);
    expect(st.rdev).toBe(0);
    expect(st.mode & 0o7777).toBe(0);
  });
  if (process.getuid?.() !== 0) console.log('skipping the whiteout test of fallbackFs: device nodes need root');

  it('sets times to the microsecond on the path itself, never a symlink target', () => {
    const target = path.join(dir, 'target');
    const link = path.join(dir, 'link');
    fs.writeFileSync(target, 'x');
    fs.symlinkSync('target', link);
    const before = fs.statSync(target, { bigint: true }).mtimeNs;
    fallback.lutimesNs(link, 1_000_000_000n, 5, 1_234_567_890, 123_456_789);
    const got = fs.lstatSync(link, { bigint: true }).mtimeNs;
    expect(got / 1000n).toBe(1_234_567_890_123_456n);
    expect(fs.statSync(target, { bigint: true }).mtimeNs).toBe(before);
    fallback.lutimesNs(target, -2, 750_000_000, -2, 750_000_000); // 1.25 s before the epoch, kept to the millisecond
    expect(fs.lstatSync(target, { bigint: true }).mtimeNs).toBe(-1_250_000_000n);
    fallback.lutimesNs(target, -1, 999_999_999, -1, 999_999_999);
    expect(fs.lstatSync(target, { bigint: true }).mtimeNs).toBe(-1_000_000n);
    const fd = fs.openSync(target, 'r');
    try {
      fallback.futimesNs(fd, 0, 0, 86_400, 999_999_000);
    } finally {
      fs.closeSync(fd);
    }
    expect(fs.lstatSync(target, { bigint: true }).mtimeNs).toBe(86_400_999_999_000n);
    expect(() => fallback.lutimesNs(target, 1.5, 0, 0, 0)).toThrow(TypeError);
    expect(() => fallback.lutimesNs(target, 0, 1_000_000_000, 0, 0)).toThrow(TypeError);
  });

  it('has no extended attributes: setting one is ENOTSUP, reading finds none', () => {
    expect(() => fallback.lsetxattr(dir, 'user.fastpull.test', Buffer.from('y'))).toThrow(
      expect.objectContaining({ code: 'ENOTSUP', syscall: 'lsetxattr', path: dir }),
    );
    nativeFs().lsetxattr(dir, 'user.fastpull.test', Buffer.from('y'));
    expect(fallback.lgetxattr(dir, 'user.fastpull.test')).toBeNull();
    expect(fallback.llistxattr(dir)).toEqual([]);
    expect(fallback.tuneAllocator(1, 2)).toBe(false);
    expect(() => fallback.tuneAllocator(-1, 2)).toThrow(TypeError);
    expect(uses).toBe(3); // tuneAllocator is no reason to warn
  });
});
