// The per-chainID lock: a second taker waits (told once) until the first lets go, and stops waiting
// when its signal fires; another chainID is never held up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { lockSnapshot } from './lock.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function snapshotsDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'fastpull-lock-'));
  dirs.push(d);
  return d;
}

describe('lockSnapshot', () => {
  it('makes a second taker wait, telling it once, until the holder lets go', async () => {
    const dir = snapshotsDir();
    const chain = sha256Digest('layer');
    const release = await lockSnapshot(dir, chain);
    let waits = 0;
    let got = false;
    let told!: () => void;
    const waiting = new Promise<void>((r) => (told = r));
    const second = lockSnapshot(dir, chain, undefined, () => (waits++, told())).then((r) => ((got = true), r));
    await waiting;
    expect([got, waits]).toEqual([false, 1]);
    // Another chainID is free meanwhile.
    (await lockSnapshot(dir, sha256Digest('other')))();
    release();
    (await second)();
    expect([got, waits]).toEqual([true, 1]);
  });

  it('stops waiting with ABORTED when the signal fires', async () => {
    const dir = snapshotsDir();
    const chain = sha256Digest('layer');
    const release = await lockSnapshot(dir, chain);
    const ac = new AbortController();
    const waiting = lockSnapshot(dir, chain, ac.signal);
    setTimeout(() => ac.abort(), 100);
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    release();
    (await lockSnapshot(dir, chain))();
  });
});
