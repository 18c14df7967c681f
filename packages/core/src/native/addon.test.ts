// Tests of the native addon loader.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nativeFs } from './addon.js';

describe('nativeFs', () => {
  it('loads once and reports absent xattrs and errno codes', () => {
    const addon = nativeFs();
    expect(nativeFs()).toBe(addon);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-native-'));
    try {
      expect(addon.lgetxattr(dir, 'user.fastpull.absent')).toBeNull();
      addon.lsetxattr(dir, 'user.fastpull.test', Buffer.from([0, 0xff]));
      expect(addon.lgetxattr(dir, 'user.fastpull.test')).toEqual(Buffer.from([0, 0xff]));
      addon.lsetxattr(dir, 'user.fastpull.second', Buffer.alloc(0));
      expect(
        addon
          .llistxattr(dir)
          .filter((n) => n.startsWith('user.fastpull.'))
          .sort(),
      ).toEqual(['user.fastpull.second', 'user.fastpull.test']);
      expect(() => addon.llistxattr(path.join(dir, 'absent'))).toThrow(expect.objectContaining({ code: 'ENOENT' }));
      expect(() => addon.mknod(path.join(dir, 'no/such/dir/node'), fs.constants.S_IFIFO | 0o600, 0, 0)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
