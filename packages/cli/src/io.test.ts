import { describe, expect, it } from 'vitest';
import { colorEnabled, formatAge, formatBytes, formatDuration, formatTable, parsePositiveInt, parseSize } from './io.js';
import { UsageError } from './errors.js';

describe('parseSize', () => {
  it('reads sizes as people write them', () => {
    expect(parseSize('1048576', '--chunk-size')).toBe(1048576);
    expect(parseSize('8M', '--chunk-size')).toBe(8 * 1024 * 1024);
    expect(parseSize('16MiB', '--chunk-size')).toBe(16 * 1024 * 1024);
    expect(parseSize('512k', '--chunk-size')).toBe(512 * 1024);
    expect(parseSize('1.5GiB', '--chunk-size')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('2MB', '--chunk-size')).toBe(2_000_000);
  });

  it('refuses anything else as a usage error naming the flag', () => {
    for (const bad of ['', 'abc', '8 parsecs', '-1', '0', '1.5', 'MiB']) {
      expect(() => parseSize(bad, '--chunk-size')).toThrow(UsageError);
    }
    expect(() => parseSize('8X', '--chunk-size')).toThrow(/^--chunk-size "8X": want a whole number of bytes/);
  });
});

describe('parsePositiveInt', () => {
  it('takes positive integers only', () => {
    expect(parsePositiveInt('12', '--concurrency')).toBe(12);
    for (const bad of ['0', '-3', '1.5', 'x', ''])
      expect(() => parsePositiveInt(bad, '--concurrency')).toThrow(/^--concurrency ".*": want a positive integer$/);
  });
});

describe('formatting', () => {
  it('formats bytes, durations and ages', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatDuration(12.4)).toBe('12ms');
    expect(formatDuration(1234)).toBe('1.23s');
    expect(formatDuration(75_000)).toBe('1m15s');
    const now = new Date('2025-01-10T12:00:00Z');
    expect(formatAge(new Date('2025-01-10T12:00:00Z'), now)).toBe('just now');
    expect(formatAge(new Date('2025-01-10T11:59:59Z'), now)).toBe('1 second ago');
    expect(formatAge(new Date('2025-01-10T11:57:00Z'), now)).toBe('3 minutes ago');
    expect(formatAge(new Date('2025-01-08T12:00:00Z'), now)).toBe('2 days ago');
  });

  it('aligns table columns two spaces apart', () => {
    expect(
      formatTable([
        ['NAME', 'SIZE', 'X'],
        ['a-long-name', '1', 'y'],
      ]),
    ).toEqual(['NAME         SIZE  X', 'a-long-name  1     y']);
  });

  it('colours only a terminal, and not when NO_COLOR is set', () => {
    const io = (env: NodeJS.ProcessEnv) => ({ stdout: process.stdout, stderr: process.stderr, env });
    expect(colorEnabled(io({}), { isTTY: true })).toBe(true);
    expect(colorEnabled(io({ NO_COLOR: '' }), { isTTY: true })).toBe(true);
    expect(colorEnabled(io({ NO_COLOR: '1' }), { isTTY: true })).toBe(false);
    expect(colorEnabled(io({}), { isTTY: false })).toBe(false);
    expect(colorEnabled(io({}), {})).toBe(false);
  });
});
