// The peers benchmark's own machinery (no speed figures here): the tar writer, the stalling proxy,
// the measuring wrapper.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { field1, imageRequest, readField1, readVarint, varint } from './cri-wire.js';
import { measure } from './measure.js';
import { startStallProxy } from './stall-proxy.js';
import { TarWriter } from './tarwriter.js';

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'fastpull-bench-test-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function writeSample(path: string): { sha256: string; size: number } {
  const w = new TarWriter(path);
  w.file('usr/lib/libx.so.1', 3, 0o755, (write) => write(Buffer.from('abc')));
  w.symlink('usr/lib/libx.so', 'libx.so.1');
  const deep = `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(60)}/file.txt`;
  w.file(deep, 2 * 1024 * 1024 + 7, 0o644, (write) => {
    write(Buffer.alloc(1024 * 1024, 1));
    write(Buffer.alloc(1024 * 1024 + 7, 2));
  });
  return w.finish();
}

describe('TarWriter', () => {
  it('writes a tar GNU tar extracts, byte-identical on every run, with its SHA-256', () => {
    const d = tmp();
    const a = writeSample(join(d, 'a.tar'));
    const b = writeSample(join(d, 'b.tar'));
    expect(a).toEqual(b);
    expect(a.sha256).toBe(createHash('sha256').update(readFileSync(join(d, 'a.tar'))).digest('hex'));
    const r = spawnSync('tar', ['-x', '-f', join(d, 'a.tar'), '-C', d], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(readFileSync(join(d, 'usr/lib/libx.so.1'), 'utf8')).toBe('abc');
    expect(readlinkSync(join(d, 'usr/lib/libx.so'))).toBe('libx.so.1');
    const deep = readFileSync(join(d, `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(60)}/file.txt`));
    expect(deep.byteLength).toBe(2 * 1024 * 1024 + 7);
    expect(deep.at(-1)).toBe(2);
  });

  it('refuses a fill that writes other than the size declared', () => {
    const w = new TarWriter(join(tmp(), 'x.tar'));
    expect(() => w.file('a', 4, 0o644, (write) => write(Buffer.from('abc')))).toThrow(/wrote 3 bytes, declared 4/);
    w.finish();
  });
});

describe('startStallProxy', () => {
  it('stalls the first GET of the blob after the bytes given, and passes the next through', async () => {
    const body = Buffer.alloc(256 * 1024, 7);
    const upstream = createServer((_req, res) => {
      res.writeHead(200, { 'content-length': String(body.byteLength) });
      res.end(body);
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const proxy = await startStallProxy(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, 'sha256:abc', 1000);
    const fetchBody = (ms: number) =>
      new Promise<number>((resolve) => {
        let got = 0;
        const req = get(`http://${proxy.host}/v2/x/blobs/sha256:abc`, (res) => {
          res.on('data', (c: Buffer) => (got += c.byteLength));
          res.on('end', () => resolve(got));
        });
        req.setTimeout(ms, () => {
          req.destroy();
          resolve(got);
        });
      });
    try {
      expect(await fetchBody(500)).toBe(1000);
      expect(proxy.stalled()).toBe(1);
      expect(await fetchBody(5000)).toBe(body.byteLength);
    } finally {
      await proxy.close();
      await new Promise<void>((r) => upstream.close(() => r()));
    }
  });
});

describe('measure', () => {
  it('says whether the command succeeded, and kills it at the time limit', async () => {
    expect((await measure('sh', ['-c', 'exit 3'])).ok).toBe(false);
    const good = await measure('sh', ['-c', 'echo hi']);
    expect(good.ok).toBe(true);
    expect(good.output).toContain('hi');
    const t0 = performance.now();
    const slow = await measure('sleep', ['30'], { timeoutMs: 300 });
    expect(slow.timedOut).toBe(true);
    expect(performance.now() - t0).toBeLessThan(10_000);
  });
});

describe('the CRI client messages', () => {
  it('encodes { image: { image: name } } and reads image_ref back, with multi-byte lengths', () => {
    expect(imageRequest('a/b:c').toString('hex')).toBe(`0a070a05${Buffer.from('a/b:c').toString('hex')}`);
    const long = `127.0.0.1:5000/${'x'.repeat(300)}:v1`;
    const req = imageRequest(long);
    // The name is 318 bytes (varint 0xbe 0x02); the ImageSpec around it 3 + 318 = 321 (0xc1 0x02).
    expect(req.subarray(0, 6).toString('hex')).toBe('0ac1020abe02');
    expect(readField1(req.subarray(3))).toBe(long);
    expect(readField1(field1(Buffer.from('sha256:abc')))).toBe('sha256:abc');
    expect(readVarint(varint(2 ** 40 + 5), 0)).toEqual([2 ** 40 + 5, 6]);
    expect(readField1(Buffer.from([0x12, 0x01, 0x41]))).toBe('');
  });
});
