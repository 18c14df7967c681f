import { describe, expect, it } from 'vitest';
import { coreCounts, cpuOrder, largestPass, parseCpuList, parseVariant } from './cores.js';

describe('cores bench helpers', () => {
  it('counts cores by powers of two up to the machine, or as given', () => {
    expect(coreCounts(16)).toEqual([1, 2, 4, 8, 16]);
    expect(coreCounts(6)).toEqual([1, 2, 4, 6]);
    expect(coreCounts(1)).toEqual([1]);
    expect(coreCounts(8, '8,1')).toEqual([8, 1]);
    expect(() => coreCounts(4, '1,8')).toThrow(/8 is not a core count between 1 and 4/);
  });

  it('parses CPU lists and puts one thread of each core before their siblings', () => {
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    // Siblings numbered apart (0 and 4 share a core) and side by side (0 and 1 share a core).
    const apart = (cpu: number) => `${cpu % 4},${(cpu % 4) + 4}`;
    expect(cpuOrder([0, 1, 2, 3, 4, 5, 6, 7], apart)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const adjacent = (cpu: number) => `${cpu - (cpu % 2)}-${cpu - (cpu % 2) + 1}`;
    expect(cpuOrder([0, 1, 2, 3, 4, 5], adjacent)).toEqual([0, 2, 4, 1, 3, 5]);
    expect(cpuOrder([3, 1, 2], () => undefined)).toEqual([1, 2, 3]);
  });

  it('splits a variant into environment and CLI arguments', () => {
    expect(parseVariant('')).toEqual({ env: {}, args: [] });
    expect(parseVariant(' FASTPULL_WRITER_THREADS=8  --unpack-concurrency 8 A_B=x=y ')).toEqual({
      env: { FASTPULL_WRITER_THREADS: '8', A_B: 'x=y' },
      args: ['--unpack-concurrency', '8'],
    });
    expect(parseVariant('--inflater=zlib lower=1')).toEqual({ env: {}, args: ['--inflater=zlib', 'lower=1'] });
  });

  it('finds the largest layer pass of a trace and its stages', () => {
    const trace = {
      traceEvents: [
        { name: 'pull', ph: 'X', ts: 0, dur: 5_000_000 },
        { name: 'unpack', ph: 'X', ts: 0, dur: 1_000_000, args: { layer: 'a', bytesRead: 10 * 1024 * 1024, threadCpuMs: 100 } },
        {
          name: 'unpack',
          ph: 'X',
          ts: 0,
          dur: 3_000_000,
          args: { layer: 'b', bytesRead: 300 * 1024 * 1024, threadCpuMs: 900, inflateCpuMs: 1200, tarHashCpuMs: 400 },
        },
        { name: 'unpack', ph: 'B', ts: 0, args: { layer: 'c', bytesRead: 900 * 1024 * 1024 } },
      ],
    };
    expect(largestPass(trace)).toEqual({ pullS: 5, passS: 3, layerMiB: 300, cpu: { 'unpack thread': 0.9, inflate: 1.2, 'tar hash': 0.4 } });
    expect(largestPass({ traceEvents: [] })).toBeUndefined();
  });
});
