// Memory stays flat whatever the layer size: nothing read from a layer may stay reachable after it is
// written (regression: one long-lived Promise.race kept every chunk alive until the apply ended).
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyLayer } from './apply/apply.js';

const work = mkdtempSync(join(tmpdir(), 'fastpull-mem-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const MIB = 1024 * 1024;

/** A tar of one file of `size` bytes, generated 1 MiB at a time (nothing but the current chunk exists). */
async function* oneBigFile(size: number): AsyncGenerator<Buffer> {
  const header = Buffer.alloc(512);
  header.write('big.bin', 0, 'latin1');
  header.write('0000644\0', 100, 'latin1');
  header.write('0000000\0', 108, 'latin1');
  header.write('0000000\0', 116, 'latin1');
  header.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  header.write('00000000000\0', 136, 'latin1');
  header.write('0', 156, 'latin1');
  header.write('ustar\x0000', 257, 'latin1');
  header.fill(' ', 148, 156);
  let sum = 0;
  for (const b of header) sum += b;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  yield header;
  for (let left = size; left > 0; left -= MIB) yield Buffer.alloc(Math.min(MIB, left), ((left >> 20) & 0xfe) | 1);
  yield Buffer.alloc(1024);
}

describe('applyLayer memory', () => {
  it('does not grow with the size of the layer', async () => {
    const size = 192 * MIB;
    const dest = mkdtempSync(join(work, 'snap-'));
    global.gc?.();
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 2);
    try {
      await applyLayer(oneBigFile(size), dest, { signal: new AbortController().signal });
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(statSync(join(dest, 'big.bin')).size).toBe(size);
    // Garbage collection lags a little; keeping the layer would cost 192 MiB.
    expect((peak - base) / MIB).toBeLessThan(96);
  });
});
