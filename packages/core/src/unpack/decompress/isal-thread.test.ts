// The in-process ISA-L stage's decode thread: one per stream while it decodes, gone when the stream
// ends or is destroyed, and when the worker thread that owns it goes away mid-call.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { layerLike } from './gzip.testkit.js';
import { createIsalGunzip, isalAvailable, isalUnavailableReason } from './isal.js';
import { lacks } from '../../testing/needs.js';

const available = isalAvailable();
if (!available) console.log(`skipping the ISA-L decode thread tests: ${isalUnavailableReason()}`);

const ADDON = fileURLToPath(new URL('../../../native/build/Release/fastpull_isal.node', import.meta.url));
const threads = (): number => readdirSync('/proc/self/task').length;
const COMPILED = new URL('../../../dist/unpack/decompress/isal.js', import.meta.url).href;

describe.skipIf(lacks('isal', available ? undefined : 'the in-process ISA-L addon is not built (Debian libisal-dev)'))(
  'the in-process ISA-L decode thread',
  () => {
    it('exists while a stream decodes and ends with the stream, whether it finishes or is destroyed', async () => {
      const blob = zlib.gzipSync(layerLike(8 << 20, 5));
      await pipeline(Readable.from([blob]), createIsalGunzip(), new Writable({ write: (_c, _e, cb) => cb() })); // warms what starts lazily
      const before = threads();
      let during = 0;
      await pipeline(
        Readable.from([blob]),
        createIsalGunzip(),
        new Writable({
          write: (_c, _e, cb) => {
            during = Math.max(during, threads());
            cb();
          },
        }),
      );
      expect(during).toBe(before + 1);
      expect(threads()).toBe(before);

      const stage = createIsalGunzip();
      stage.on('error', () => {});
      stage.write(blob);
      await new Promise((resolve) => stage.once('data', resolve));
      expect(threads()).toBe(before + 1);
      stage.destroy(new Error('stop'));
      await new Promise((resolve) => stage.once('close', resolve));
      expect(threads()).toBe(before);
    });

    it('decodes from span to span while this thread never returns to its loop', () => {
      type Streaming = {
        create(r: Int32Array, notify: () => void): unknown;
        input(z: unknown, b: Uint8Array, o: number, n: number): void;
        output(z: unknown, b: Uint8Array, o: number, n: number): void;
        end(z: unknown): void;
        take(z: unknown, records: Float64Array): number;
        close(z: unknown): void;
      };
      const a = createRequire(import.meta.url)(ADDON) as Streaming;
      const data = layerLike((3 << 20) + (1 << 19), 23);
      const blob = zlib.gzipSync(data);
      let notified = 0;
      const z = a.create(new Int32Array(5), () => notified++);
      const spans = [0, 1, 2, 3].map(() => new Uint8Array(1 << 20));
      try {
        for (const span of spans) a.output(z, span, 0, span.length);
        // Two input spans: the thread goes from the first to the second on its own.
        const cut = blob.length >> 1;
        a.input(z, blob, 0, cut);
        a.input(z, blob, cut, blob.length - cut);
        a.end(z);
        // Records are taken here without yielding: the thread was never handed control back.
        const records = new Float64Array(7 * 32);
        let produced = 0;
        let consumed = 0;
        let closed = 0;
        let end = false;
        const deadline = Date.now() + 20_000;
        while (!end && Date.now() < deadline) {
          const n = a.take(z, records);
          for (let i = 0; i < n; i++) {
            const r = records.subarray(i * 7, i * 7 + 7);
            expect(r[4]).toBe(0); // no error
            produced += r[0]!;
            consumed += r[1]!;
            closed += r[2]!;
            if (r[3] === 1) end = true;
          }
        }
        expect(end).toBe(true);
        expect(notified).toBe(0);
        expect(consumed).toBe(blob.length);
        expect(produced).toBe(data.length);
        expect(closed).toBe(3); // three full spans; the rest of the data sits in the fourth
        expect(Buffer.concat(spans).subarray(0, data.length).equals(data)).toBe(true);
      } finally {
        a.close(z);
      }
      expect(() => a.input(z, blob, 0, 1)).toThrow(/closed/);
    });

    it('lets go of every stream once it has ended or was destroyed (nothing of the decode thread holds it)', () => {
      // The decode thread calls back through a function that holds the stream until the stream closes
      // it; in a long-lived daemon a stream kept past its end would be a leak per layer.
      const dir = mkdtempSync(join(tmpdir(), 'isal-gc-'));
      try {
        const script = `
        const { createIsalGunzip } = await import(${JSON.stringify(COMPILED)});
        const zlib = await import('node:zlib');
        const { Readable, Writable } = await import('node:stream');
        const { pipeline } = await import('node:stream/promises');
        const blob = zlib.gzipSync(Buffer.alloc(4 << 20, 7));
        const N = 20;
        let collected = 0;
        const registry = new FinalizationRegistry(() => collected++);
        for (let i = 0; i < N; i++) {
          const s = createIsalGunzip();
          registry.register(s, i);
          if (i % 2) {
            await pipeline(Readable.from([blob]), s, new Writable({ write: (_c, _e, cb) => cb() }));
          } else {
            s.on('error', () => {});
            s.write(blob);
            await new Promise((r) => s.once('data', r));
            s.destroy(new Error('stop'));
            await new Promise((r) => s.once('close', r));
          }
        }
        for (let i = 0; i < 50 && collected < N; i++) {
          globalThis.gc();
          await new Promise((r) => setTimeout(r, 10));
        }
        console.log(collected + ' of ' + N);`;
        const file = join(dir, 'gc.mjs');
        writeFileSync(file, script);
        const r = spawnSync(process.execPath, ['--expose-gc', file], { encoding: 'utf8', timeout: 60_000 });
        expect(r.stderr).toBe('');
        expect(r.stdout.trim()).toBe('20 of 20');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('ends with a worker thread that is terminated while a call decodes', async () => {
      const blob = zlib.gzipSync(Buffer.alloc(256 << 20), { level: 1 });
      const before = threads();
      const worker = new Worker(
        `const { workerData, parentPort } = require('node:worker_threads');
       const a = require(workerData.addon);
       const z = a.create(new Int32Array(5), () => parentPort.postMessage('done'));
       const out = new Uint8Array(256 << 20);
       a.output(z, out, 0, out.length);
       a.input(z, workerData.blob, 0, workerData.blob.length);
       parentPort.postMessage('started');`,
        { eval: true, workerData: { addon: ADDON, blob } },
      );
      await new Promise((resolve) => worker.once('message', resolve));
      const code = await worker.terminate();
      expect(code).toBe(1);
      expect(threads()).toBe(before);
      // The addon still works in this thread after a worker's copy went away.
      const a = createRequire(import.meta.url)(ADDON) as { create(r: Int32Array): unknown; inflateSync(...args: unknown[]): void };
      const r = new Int32Array(5);
      const small = zlib.gzipSync('still here');
      const out = new Uint8Array(64);
      a.inflateSync(a.create(r), small, 0, small.length, out, 0, out.length);
      expect(Buffer.from(out.subarray(0, r[2])).toString()).toBe('still here');
    });
  },
);
