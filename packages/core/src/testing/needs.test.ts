import { afterEach, describe, expect, it, vi } from 'vitest';
import { lacks, notHere } from './needs.js';

describe('lacks', () => {
  afterEach(() => vi.restoreAllMocks());

  it('runs the test when the piece is here, whatever FASTPULL_REQUIRE says', () => {
    expect(lacks('strace', undefined, { FASTPULL_REQUIRE: 'all' })).toBe(false);
    expect(lacks('strace', undefined, {})).toBe(false);
  });

  it('skips and says why once when the piece is missing and not required', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(lacks('umoci', 'umoci is not installed (probe one)', { FASTPULL_REQUIRE: 'strace,runc' })).toBe(true);
    expect(lacks('umoci', 'umoci is not installed (probe one)', {})).toBe(true);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toBe('skipped (needs umoci): umoci is not installed (probe one)');
  });

  it('fails with the reason where FASTPULL_REQUIRE names the piece or says all', () => {
    expect(() => lacks('strace', 'strace is not installed', { FASTPULL_REQUIRE: 'root, strace' })).toThrow(/strace is required here .*strace is not installed/);
    expect(() => lacks('overlay', 'not running as root', { FASTPULL_REQUIRE: 'all' })).toThrow(/overlay is required here .*not running as root/);
  });
});

describe('notHere', () => {
  it('skips with the reason and never fails, even under FASTPULL_REQUIRE=all', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(notHere('running as root: a test of a user without it (probe two)')).toBe(true);
    expect(notHere(undefined)).toBe(false);
    expect(warn).toHaveBeenCalledWith("skipped (not this machine's situation): running as root: a test of a user without it (probe two)");
    warn.mockRestore();
  });
});
