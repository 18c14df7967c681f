// In-order priority among a download's ranges: a range far past the earliest one in flight, and
// gaining on it, holds back so that the bytes the unpacker follows (from offset 0) come first.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { parseReference } from '../oci/reference.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import { fetchBlob, type RangeRequest } from './fetch.js';
import { RangeOrder } from './range-order.js';
import { FetchScheduler } from './scheduler.js';

describe('RangeOrder', () => {
  const range = (from: number, pos: number) => ({ from, cursor: { pos } });

  it('holds back a range far past the earliest one and gaining on it, and no other', () => {
    const order = new RangeOrder(100);
    const first = range(0, 10);
    const near = range(50, 90); // 80 past the first: within the lead
    const far = range(200, 250); // 240 past, 50 received against the first's 10
    const slowFar = range(300, 305); // far past, but 5 received: not gaining
    const leaves = [first, near, far, slowFar].map((r) => order.enter(r));
    expect(order.ahead(first)).toBe(false);
    expect(order.ahead(near)).toBe(false);
    expect(order.ahead(far)).toBe(true);
    expect(order.ahead(slowFar)).toBe(false);
    // The first range catches up in bytes received: the far one may go on.
    first.cursor.pos = 70;
    expect(order.ahead(far)).toBe(false);
    first.cursor.pos = 10;
    expect(order.ahead(far)).toBe(true);
    // Once the first range is done, the next earliest (near) is the one to follow: far is 160 past it, with 50 received against 40.
    leaves[0]!();
    expect(order.ahead(far)).toBe(true);
    near.cursor.pos = 100;
    expect(order.ahead(far)).toBe(false); // 150 past, 50 received against 50
    leaves[1]!();
    leaves[3]!();
    expect(order.ahead(far)).toBe(false); // alone
    leaves[2]!();
  });

  it('does not wait for a range that is not ahead, and waits a bounded time for one that stays ahead', async () => {
    const order = new RangeOrder(100);
    const first = range(0, 10);
    const far = range(200, 250);
    const leaveFirst = order.enter(first);
    const leaveFar = order.enter(far);
    expect(await order.yieldFor(first)).toBe(0);
    const waited = await order.yieldFor(far);
    expect(waited).toBeGreaterThanOrEqual(50);
    leaveFirst();
    expect(await order.yieldFor(far)).toBe(0);
    leaveFar();
  });
});

describe('a download whose earliest range is slow', () => {
  let reg: LoopbackRegistry;
  const CHUNK = 512 * 1024;
  const blob = randomBytes(8 * CHUNK);
  const digest = sha256Digest(blob);
  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    reg.addBlob('o/app', digest, blob);
  });
  afterAll(() => reg.close());

  async function download(orderLead: number): Promise<{ ranges: RangeRequest[]; data: Buffer }> {
    const client = new RegistryClient({ plainHttp: true });
    const data = Buffer.alloc(blob.length);
    const ranges: RangeRequest[] = [];
    // Chunk 1 (the earliest after the probe of chunk 0) at 1 MiB/s: half a second; the rest at loopback speed.
    reg.faults.slowRange = { start: CHUNK, bytesPerSecond: 1024 * 1024 };
    try {
      await fetchBlob(
        client,
        parseReference(`${reg.host}/o/app:1`),
        { mediaType: 'application/octet-stream', digest, size: blob.length },
        { write: async (d, at) => void data.set(d, at) },
        {
          scheduler: new FetchScheduler(),
          chunkSize: CHUNK,
          orderLead,
          onRange: (r) => ranges.push(r),
        },
      );
    } finally {
      reg.faults = {};
      await client.close();
    }
    return { ranges, data };
  }

  it('has the ranges far past it yield to it, and still lands every byte', async () => {
    const { ranges, data } = await download(CHUNK);
    expect(data.equals(blob)).toBe(true);
    expect(ranges).toHaveLength(8);
    const byChunk = new Map(ranges.map((r) => [r.chunk, r]));
    // The slow range and the probe never yield; the ranges three chunks and more past it do.
    expect(byChunk.get(0)!.yieldedMs).toBeUndefined();
    expect(byChunk.get(1)!.yieldedMs).toBeUndefined();
    const far = [3, 4, 5, 6, 7].map((c) => byChunk.get(c)!.yieldedMs ?? 0);
    // A wait is at least one tick of 5 ms.
    expect(Math.max(...far)).toBeGreaterThanOrEqual(5);
    expect(ranges.every((r) => r.outcome === 'done')).toBe(true);
  });

  it('lets every range run at its own pace with orderLead 0', async () => {
    const { ranges, data } = await download(0);
    expect(data.equals(blob)).toBe(true);
    expect(ranges).toHaveLength(8);
    expect(ranges.every((r) => r.yieldedMs === undefined)).toBe(true);
  });

  it('refuses a negative or fractional order lead', async () => {
    const client = new RegistryClient({ plainHttp: true });
    try {
      for (const orderLead of [-1, 0.5]) {
        await expect(
          fetchBlob(
            client,
            parseReference(`${reg.host}/o/app:1`),
            { mediaType: 'application/octet-stream', digest, size: blob.length },
            { write: async () => undefined },
            { orderLead },
          ),
        ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      }
    } finally {
      await client.close();
    }
  });
});
