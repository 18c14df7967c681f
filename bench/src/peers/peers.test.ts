// The peers benchmark's own machinery (no speed figures here): the tar writer, the stalling proxy,
// the measuring wrapper, the trash of finished trees.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fdatasyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, readlinkSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { fastpullTimings } from './contenders.js';
import { fastpulldPhases } from './cri.js';
import { field1, imageRequest, readField1, readVarint, varint } from './cri-wire.js';
import { blockCounters, measure, parseBlockStat, removeTimeFiles } from './measure.js';
import { startStallProxy } from './stall-proxy.js';
import { TarWriter } from './tarwriter.js';
import { decide, fsSpace, margins, Trash, type FsSpace } from './trash.js';
import { lacks } from '@fastpull/core/testing';

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'fastpull-bench-test-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(removeTimeFiles);

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
    expect(a.sha256).toBe(
      createHash('sha256')
        .update(readFileSync(join(d, 'a.tar')))
        .digest('hex'),
    );
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
    // Far past the test's own timeout: only the kill lets this test end.
    const slow = await measure('sleep', ['600'], { timeoutMs: 300 });
    expect(slow.timedOut).toBe(true);
  });

  it("counts a daemon's memory in the peak, and gives the daemon's own peak apart", async () => {
    // A "daemon" holding 64 MiB resident, and a command that holds little.
    const daemon = spawn(process.execPath, ['-e', 'const b = Buffer.alloc(64 << 20, 1); setInterval(() => b[0]++, 1000); console.log("ready");'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      // Measured once its 64 MiB are written, however long its start takes.
      await new Promise((r) => daemon.stdout.once('data', r));
      const m = await measure('sleep', ['0.5'], { daemons: [daemon.pid!] });
      expect(m.daemonRssMiB).toBeGreaterThan(64);
      expect(m.rssMiB).toBeGreaterThan(m.daemonRssMiB!);
      expect((await measure('sleep', ['0.1'])).daemonRssMiB).toBeUndefined();
    } finally {
      daemon.kill('SIGKILL');
    }
  });
  it("counts what a daemon's children use while the command runs: their CPU once reaped, their memory while alive", async () => {
    const d = tmp();
    // The "daemon" waits for the command's go, then runs a child that holds 64 MiB and burns 0.3 s
    // of CPU, reaps it, and says done: as containerd runs a decompressor per layer.
    const child = 'const b = Buffer.alloc(64 << 20, 1); const t = process.cpuUsage(); while (process.cpuUsage(t).user < 300000) b[0]++;';
    const daemon = spawn(
      'sh',
      ['-c', `while [ ! -e "$0/go" ]; do sleep 0.05; done; "$1" -e "$2"; touch "$0/done"; exec sleep 60`, d, process.execPath, child],
      { stdio: 'ignore' },
    );
    try {
      const m = await measure('sh', ['-c', 'touch "$0/go"; while [ ! -e "$0/done" ]; do sleep 0.05; done', d], { daemons: [daemon.pid!] });
      expect(m.ok).toBe(true);
      expect(m.cpu).toBeGreaterThanOrEqual(0.3);
      expect(m.daemonRssMiB).toBeGreaterThan(64);
    } finally {
      daemon.kill('SIGKILL');
    }
  });
});

describe('block device counters', () => {
  it('reads sectors written (field 7) and discarded (field 14) from a stat line, and no discards from an old kernel', () => {
    const line = '  4001  12 300000  900  5002  34  777216  2100 0 3000 4000  61  0  98304  45  7  8\n';
    expect(parseBlockStat(line)).toEqual({ writeSectors: 777216, discardSectors: 98304 });
    expect(parseBlockStat('4001 12 300000 900 5002 34 777216 2100 0 3000 4000')).toEqual({ writeSectors: 777216, discardSectors: undefined });
    expect(parseBlockStat('not a stat line')).toBeUndefined();
  });

  const device = blockCounters(tmpdir());
  it.skipIf(lacks('blockdev', device === undefined ? 'the temporary directory is on no block device with I/O counters' : undefined))(
    'counts what a file synced in the temporary directory wrote to its device',
    () => {
      const before = blockCounters(tmpdir())!;
      const fd = openSync(join(tmp(), 'data'), 'w');
      try {
        writeSync(fd, Buffer.alloc(4 * 1024 * 1024, 7));
        fdatasyncSync(fd);
      } finally {
        closeSync(fd);
      }
      const after = blockCounters(tmpdir())!;
      expect(after.writeSectors - before.writeSectors).toBeGreaterThanOrEqual((4 * 1024 * 1024) / 512);
    },
  );
});

describe('fastpullTimings', () => {
  it('reads the done event of `fastpull pull --json`, after events whose lines hold arrays', () => {
    const timings = {
      totalMs: 1250,
      resolveMs: 40,
      layers: [
        { fetchMs: 300, unpackMs: 500 },
        { fetchMs: 900, unpackMs: 200 },
        { fetchMs: 100, unpackMs: 100 },
      ],
    };
    const output = [
      JSON.stringify({ type: 'resolved', name: 'r/a:1', layers: [{ digest: 'sha256:aa', size: 3 }] }),
      JSON.stringify({ type: 'progress', layers: [{ digest: 'sha256:aa', state: 'downloading' }] }),
      'a warning that is not JSON',
      JSON.stringify({ type: 'done', ref: 'r/a:1', image: { layers: [] }, timings }),
      '',
    ].join('\n');
    expect(fastpullTimings(output)).toEqual({ resolve: 0.04, 'slowest layer fetch': 0.9, 'slowest layer unpack': 0.2 });
    expect(fastpullTimings(output, true)).toEqual({ 'pull in the daemon': 1.25, resolve: 0.04, 'slowest layer fetch': 0.9, 'slowest layer unpack': 0.2 });
    expect(fastpullTimings(output.split('\n').slice(0, 3).join('\n'))).toBeUndefined();
  });
});

describe('fastpulldPhases', () => {
  it("reads the last `pull finished` line of fastpulld's log: the pull's time and each stage summed over the layers", () => {
    const line = (totalMs: number) =>
      JSON.stringify({ level: 30, msg: 'pull finished', event: 'pull', result: 'ok', totalMs, phases: { resolveMs: 40, fetchMs: 2500, extractMs: 1200.5 } });
    const log = ['{"level":30,"msg":"fastpulld serving"}', line(9000), '{"level":30,"msg":"layer recorded for containerd"}', line(4200), 'not json'].join('\n');
    expect(fastpulldPhases(log)).toEqual({
      'pull in fastpulld': 4.2,
      'fastpulld resolve, summed': 0.04,
      'fastpulld fetch, summed': 2.5,
      'fastpulld extract, summed': 1.2005,
    });
    expect(fastpulldPhases('{"msg":"fastpulld serving"}')).toEqual({});
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

describe('the trash policy', () => {
  const GIB = 1024 ** 3;
  // 100 GiB, 1M inodes: 5 GiB and 50,000 inodes are kept free.
  const fs = (freeGiB: number, freeInodes = 500_000): FsSpace => ({ freeBytes: freeGiB * GIB, totalBytes: 100 * GIB, freeInodes, totalInodes: 1_000_000 });

  it('keeps 1 GiB or 5% of the filesystem free, and 5% of its inodes', () => {
    expect(margins(fs(50))).toEqual({ bytes: 5 * GIB, inodes: 50_000 });
    expect(margins({ freeBytes: GIB, totalBytes: 4 * GIB, freeInodes: 10, totalInodes: 100 }).bytes).toBe(GIB);
  });

  it('removes nothing while the work fits, and waits out what is left of the cool-down', () => {
    expect(decide(fs(50), { bytes: 40 * GIB, inodes: 1000 }, 3, undefined, 65)).toEqual({ empty: false, waitS: 0, why: 'fits' });
    expect(decide(fs(50), { bytes: GIB, inodes: 1000 }, 3, 20, 65)).toEqual({ empty: false, waitS: 45, why: 'fits' });
    expect(decide(fs(50), { bytes: GIB, inodes: 1000 }, 3, 70, 65).waitS).toBe(0);
  });

  it('empties the trash when the bytes or the inodes would drop below the margin, then waits the whole cool-down', () => {
    const bytes = decide(fs(50), { bytes: 46 * GIB, inodes: 1000 }, 3, 20, 65);
    expect(bytes).toMatchObject({ empty: true, waitS: 65 });
    expect(bytes.why).toContain('50.0 GiB free, 46.0 GiB needed, 5.0 GiB kept free');
    const inodes = decide(fs(50, 60_000), { bytes: GIB, inodes: 20_000 }, 1, undefined, 65);
    expect(inodes).toMatchObject({ empty: true, waitS: 65 });
    expect(inodes.why).toContain('60000 inodes free, 20000 needed');
    expect(decide(fs(50), { bytes: 46 * GIB, inodes: 1000 }, 3, undefined, 0)).toMatchObject({ empty: true, waitS: 0 });
  });

  it('does not count inodes on a filesystem without a fixed number of them', () => {
    const btrfs: FsSpace = { freeBytes: 50 * GIB, totalBytes: 100 * GIB, freeInodes: 0, totalInodes: 0 };
    expect(decide(btrfs, { bytes: GIB, inodes: 1_000_000 }, 2, undefined, 65)).toEqual({ empty: false, waitS: 0, why: 'fits' });
  });

  it('says so when space is short and the trash is empty, and removes nothing', () => {
    const d = decide(fs(5), { bytes: GIB, inodes: 10 }, 0, 10, 65);
    expect(d).toMatchObject({ empty: false, waitS: 55 });
    expect(d.why).toContain('trash empty, nothing to remove');
  });
});

describe('Trash', () => {
  it("reads the filesystem's size and free space as df does", () => {
    const base = tmp();
    const s = fsSpace(base);
    const df = spawnSync('df', ['-B1', '--output=size,avail', base], { encoding: 'utf8' });
    const [size, avail] = df.stdout.trim().split('\n')[1]!.trim().split(/\s+/).map(Number);
    expect(s.totalBytes).toBe(size);
    // Free space moves with whatever else writes meanwhile: within 64 MiB.
    expect(Math.abs(s.freeBytes - avail!)).toBeLessThan(64 * 1024 ** 2);
    expect(s.freeBytes).toBeLessThanOrEqual(s.totalBytes);
  });

  it('keeps trees until the filesystem is short for the next work, then removes them all and cools down', async () => {
    const base = tmp();
    const lines: string[] = [];
    // The filesystem as the trash sees it: 100 GiB free of 200, so the decision does not depend on
    // how full this machine's disk is (a nearly full one would empty the trash before any run).
    const GIB = 1024 ** 3;
    const space: FsSpace = { freeBytes: 100 * GIB, totalBytes: 200 * GIB, freeInodes: 1e6, totalInodes: 2e6 };
    const trash = new Trash(
      0.3,
      (s) => lines.push(s),
      base,
      () => space,
    );
    const a = trash.dir('run-');
    writeFileSync(join(a, 'f'), 'x');
    const b = join(base, 'limit');
    mkdirSync(join(b, 'x-0'), { recursive: true });
    trash.add(b);
    expect(trash.size).toBe(2);

    await trash.before({ bytes: 1, inodes: 1 }, 'a small run');
    expect(existsSync(join(a, 'f')) && existsSync(join(b, 'x-0'))).toBe(true);
    expect(lines).toEqual([]);

    // More than this filesystem has free: the trash must go, and the run waits the cool-down after.
    const t0 = performance.now();
    await trash.before({ bytes: space.freeBytes + 1, inodes: 1 }, 'a huge run');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(300);
    expect(existsSync(a) || existsSync(b)).toBe(false);
    expect(trash.size).toBe(0);
    expect(lines[0]).toMatch(/removing 2 tree\(s\) before a huge run \(.* GiB free/);
    expect(lines[1]).toMatch(/cool-down, 0.3 s before a huge run/);

    // Nothing left to remove: it says so, and waits out only what is left of the cool-down.
    await trash.before({ bytes: space.freeBytes + 1, inodes: 1 }, 'another huge run');
    expect(lines[2]).toContain('trash empty, nothing to remove');
  });
});
