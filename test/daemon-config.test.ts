// fastpulld's `sync` setting: on by default, `sync = false` in the file or --no-sync on the command
// line turns it off (unsafe), anything else is refused.
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@fastpull/daemon';

describe('fastpulld config: sync', () => {
  it('defaults to true, takes false from the file or the flag, and refuses a non-boolean', () => {
    const env = { FASTPULL_ROOT: '/tmp/fastpull-config-test' };
    expect(resolveConfig({}, {}, env).sync).toBe(true);
    expect(resolveConfig({ sync: false }, {}, env).sync).toBe(false);
    expect(resolveConfig({ sync: 'false' }, {}, env).sync).toBe(false);
    // bin.ts turns --no-sync into sync: false among the flags, which override the file.
    expect(resolveConfig({ sync: true }, { sync: false }, env).sync).toBe(false);
    expect(resolveConfig({ sync: false }, { sync: undefined }, env).sync).toBe(false);
    expect(() => resolveConfig({ sync: 'sometimes' }, {}, env)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('sync') }));
  });
});
