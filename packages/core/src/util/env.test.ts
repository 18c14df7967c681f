import { describe, expect, it } from 'vitest';
import { positiveEnv } from './env.js';

describe('positiveEnv', () => {
  it('reads positive numbers, fractions too, and nothing else', () => {
    expect(positiveEnv('256')).toBe(256);
    expect(positiveEnv(' 0.5 ')).toBe(0.5);
    for (const v of [undefined, '', '  ', '0', '-3', 'lots', 'Infinity', 'NaN']) expect(positiveEnv(v), String(v)).toBeUndefined();
  });
});
