// The straggler floor against a busy thread: a range is judged too slow only over a window in which
// this thread was free to read it. A tick of the floor's timer that comes late (the event loop was
// blocked) proves nothing about the connection, as the stall timeout's late-tick guard already knows.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { parseReference } from '../oci/reference.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import { fetchBlob } from './fetch.js';
import { RateLimiter, throttleOf } from './ratelimit.js';
import { FetchScheduler } from './scheduler.js';

const WINDOW_MS = 400;
/** Well above the floor below: only a blocked thread can make this range look slow. */
const RATE = 4 * 1024 * 1024;
const FLOOR = 1024 * 1024;

describe('the straggler floor', () => {
  let reg: LoopbackRegistry;
  const blob = randomBytes(2 * 1024 * 1024);
  const digest = sha256Digest(blob);
  beforeAll(async () => {
    reg = await startLoopbackRegistry();
    reg.addBlob('s/app', digest, blob);
  });
  afterAll(() => reg.close());

  async function download(onFirstBytes: () => void): Promise<{ stragglers: number; requests: number; data: Buffer }> {
    const client = new RegistryClient({ plainHttp: true });
    const data = Buffer.alloc(blob.length);
    let stragglers = 0;
    let first = true;
    reg.stats.reset();
    reg.faults.bytesPerSecond = RATE;
    try {
      await fetchBlob(
        client,
        parseReference(`${reg.host}/s/app:1`),
        { mediaType: 'application/octet-stream', digest, size: blob.length },
        { write: async (d, at) => void data.set(d, at) },
        {
          scheduler: new FetchScheduler(),
          chunkSize: blob.length,
          stragglerFloor: FLOOR,
          stragglerWindowMs: WINDOW_MS,
          stallTimeoutMs: 0, // the floor alone
          onStraggler: () => stragglers++,
          onBytes: () => {
            if (first) onFirstBytes();
            first = false;
          },
        },
      );
    } finally {
      reg.faults = {};
      await client.close();
    }
    return { stragglers, requests: reg.stats.requests.filter((r) => r.path.endsWith(digest)).length, data };
  }

  it('leaves a range above the floor alone when the event loop was blocked for several windows', async () => {
    // Blocked right after the first bytes: every byte sent meanwhile waits unread in the socket, and
    // the floor's timer fires late, after the block, before the waiting bytes are read.
    const r = await download(() => {
      const until = performance.now() + 4 * WINDOW_MS;
      while (performance.now() < until) {
        // busy: this thread can neither read the socket nor run timers
      }
    });
    expect(r.stragglers).toBe(0);
    expect(r.requests).toBe(1);
    expect(r.data.equals(blob)).toBe(true);
  });

  it('still re-issues a range that stays below the floor with the thread free', async () => {
    // The first response sends 64 KiB, then nothing: below the floor for a whole window.
    reg.faults.stallAfter = { bytes: 64 * 1024, times: 1, path: new RegExp(digest) };
    const r = await download(() => undefined);
    expect(r.stragglers).toBe(1);
    expect(r.requests).toBe(2);
    expect(r.data.equals(blob)).toBe(true);
  });

  it('counts time a rate limit holds ranges back as no straggling, no stall and no idle connection', async () => {
    // Four ranges sharing 512 KiB/s get about 128 KiB/s each, far under the 1 MiB/s floor, with
    // waits of the limiter's between reads well past a 100 ms stall timeout and a 200 ms idle timeout.
    const client = new RegistryClient({ plainHttp: true, idleTimeoutMs: 200 });
    const data = Buffer.alloc(blob.length);
    let stragglers = 0;
    let retries = 0;
    const limiter = new RateLimiter(512 * 1024);
    reg.stats.reset();
    try {
      await fetchBlob(
        client,
        parseReference(`${reg.host}/s/app:1`),
        { mediaType: 'application/octet-stream', digest, size: blob.length },
        { write: async (d, at) => void data.set(d, at) },
        {
          scheduler: new FetchScheduler(),
          chunkSize: blob.length / 4,
          stragglerFloor: FLOOR,
          stragglerWindowMs: WINDOW_MS,
          stallTimeoutMs: 100,
          onStraggler: () => stragglers++,
          onRetry: () => retries++,
          throttle: throttleOf([limiter], { rank: 1 })!,
        },
      );
    } finally {
      await client.close();
    }
    expect(stragglers).toBe(0);
    expect(retries).toBe(0);
    expect(reg.stats.requests.filter((r) => r.path.endsWith(digest))).toHaveLength(4);
    expect(limiter.bytesGranted).toBe(blob.length);
    expect(data.equals(blob)).toBe(true);
  });
});
