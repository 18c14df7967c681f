// consumeBody: a response body's chunks handed over in order from 'data' events, the body paused
// while a chunk's work is waited for, and every way a body can fail reaching the caller.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { consumeBody } from './response.js';

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

describe('consumeBody', () => {
  it('takes every chunk once, in order, one at a time, pausing the body while a take is waited for, and ends after the last', async () => {
    const body = new PassThrough();
    const taken: string[] = [];
    let active = 0;
    let pausedSeen = false;
    const done = consumeBody(body, (chunk) => {
      expect(active).toBe(0);
      taken.push(chunk.toString());
      // Every third chunk's work is asynchronous.
      if (taken.length % 3 !== 0) return undefined;
      active++;
      return tick().then(() => {
        pausedSeen ||= body.isPaused();
        active--;
      });
    });
    for (let i = 0; i < 20; i++) {
      body.write(`c${i}`);
      if (i % 4 === 0) await tick();
    }
    body.end();
    await done;
    expect(taken.join('')).toBe(Array.from({ length: 20 }, (_, i) => `c${i}`).join(''));
    expect(pausedSeen).toBe(true);
    expect(active).toBe(0);
  });

  it('waits, after the body ended, for the chunks still queued behind a take', async () => {
    const body = new PassThrough();
    const taken: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let settled = false;
    const done = consumeBody(body, (chunk) => {
      taken.push(chunk.toString());
      return taken.length === 1 ? gate : undefined;
    }).then(() => (settled = true));
    body.write('a');
    await tick();
    body.end('b');
    await tick();
    expect(settled).toBe(false);
    expect(taken).toEqual(['a']);
    release();
    await done;
    expect(taken).toEqual(['a', 'b']);
  });

  it('rejects with what a take throws or rejects with, and takes nothing after it', async () => {
    const sync = new PassThrough();
    const seen: string[] = [];
    const a = consumeBody(sync, (chunk) => {
      seen.push(chunk.toString());
      if (chunk.toString() === 'x') throw new Error('bad chunk');
      return undefined;
    });
    sync.write('ok');
    await tick();
    sync.write('x');
    sync.write('late');
    await expect(a).rejects.toThrow('bad chunk');
    await tick();
    expect(seen).toEqual(['ok', 'x']);

    const async = new PassThrough();
    const b = consumeBody(async, () => Promise.reject(new Error('disk full')));
    async.write('y');
    await expect(b).rejects.toThrow('disk full');
  });

  it("rejects with the body's error, and when the body closes before its end", async () => {
    const failing = new PassThrough();
    const a = consumeBody(failing, () => undefined);
    failing.write('a');
    failing.destroy(new Error('connection reset'));
    await expect(a).rejects.toThrow('connection reset');

    const cut = new PassThrough();
    const b = consumeBody(cut, () => undefined);
    cut.write('a');
    await tick();
    cut.destroy();
    await expect(b).rejects.toThrow(/premature close/i);
  });
});
