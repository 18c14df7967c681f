import { describe, expect, it } from 'vitest';
import type { NativeSync } from '../../native/addon.js';
import { LayerWriteback, WRITEBACK_STEP } from './writeback.js';

/** A layer's write-back over a stand-in for the addon's calls, counting what it starts. */
function layer(): { wb: LayerWriteback; syncfs: () => number; ranges: [number, number, number][] } {
  let syncfs = 0;
  const ranges: [number, number, number][] = [];
  const native = {
    syncfs: async () => void syncfs++,
    startWriteback: (fd: number, offset: number, nbytes: number) => void ranges.push([fd, offset, nbytes]),
  } as unknown as NativeSync;
  // The constructor is private: open() takes the addon's calls, which a test replaces.
  const wb = new (LayerWriteback as unknown as new (n: NativeSync, root: string) => LayerWriteback)(native, '/nowhere');
  return { wb, syncfs: () => syncfs, ranges };
}

describe('LayerWriteback', () => {
  it('starts a large file write-back step by step, and counts only its inode towards the next syncfs', async () => {
    const { wb, syncfs, ranges } = layer();
    const f = wb.file(7);
    for (let end = WRITEBACK_STEP; end <= 8 * WRITEBACK_STEP; end += WRITEBACK_STEP) f.wrote(end);
    f.end(8 * WRITEBACK_STEP + 100);
    expect(ranges).toEqual([...Array.from({ length: 8 }, (_, i) => [7, i * WRITEBACK_STEP, WRITEBACK_STEP]), [7, 8 * WRITEBACK_STEP, 0]]);
    await wb.settled();
    // 64 MiB of data with its own write-back: no syncfs, which would write the filesystem's other dirty pages too.
    expect(syncfs()).toBe(0);
  });

  it('runs a syncfs once small files (whose data has no write-back of its own) add up to a step', async () => {
    const { wb, syncfs, ranges } = layer();
    const small = WRITEBACK_STEP / 4 - 4096;
    for (let i = 0; i < 4; i++) wb.file(i).end(small);
    expect(syncfs()).toBe(0);
    wb.file(9).end(small);
    await wb.settled();
    expect(syncfs()).toBe(1);
    expect(ranges).toEqual([]);
  });
});
