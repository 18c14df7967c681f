import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MediaTypes } from '../oci/mediatypes.js';
import { buildLayer } from '../testing/builder.js';
import { applyLayer } from './apply/apply.js';
import { makeSandbox, removeSandbox } from './apply/apply.testkit.js';
import { isFastpullError } from '../errors.js';
import { FileSink, writerThreadsFor, type NativeFiles } from './filesink.js';
import { nativeFs } from '../native/addon.js';
import { chunksOf, code, makeTar, type Entry } from './tar/tar.testkit.js';
import { lacks, lacksRoot } from '../testing/needs.js';

const hasSink = FileSink.open() !== undefined;
if (!hasSink) console.warn('skipping the writer-thread tests: the native addon lacks the file sink');

describe('writer threads', () => {
  it('one per core, at least two and at most four', () => {
    expect([1, 2, 3, 4, 5, 16, 192].map((n) => writerThreadsFor(n))).toEqual([2, 2, 3, 4, 4, 4, 4]);
  });

  it('takes the count a tuning asks for from 1 to 16, and ignores other values', () => {
    expect(writerThreadsFor(16, 8)).toBe(8);
    expect(writerThreadsFor(2, 1)).toBe(1);
    expect(writerThreadsFor(2, 16)).toBe(16);
    for (const bad of [0, 17, -1, 2.5, Number.NaN]) expect(writerThreadsFor(16, bad)).toBe(4);
  });
});

let sandbox: string;
let dest: string;
beforeEach(() => ({ sandbox, dest } = makeSandbox()));
afterEach(() => removeSandbox(sandbox));

/** `n` small files under `dir`, enough that many are still queued when the next entry is read. */
function smallFiles(dir: string, n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({ name: `${dir}/f${i}`, body: `${dir} ${i} `.repeat(40), mode: 0o640 }));
}

describe.skipIf(lacks('addon', hasSink ? undefined : 'the native addon (writer threads) is not built'))(
  'applyLayer: small files through the writer threads',
  () => {
    it('finishes queued files before an entry that replaces or links them, and before directories get their modes and times', async () => {
      const mtime = new Date(1_500_000_000_000);
      const tar = await makeTar([
        { name: 'ro', type: 'directory', mode: 0o555, mtime },
        ...smallFiles('ro', 50),
        ...smallFiles('a', 2000),
        { name: 'a/f1999', body: 'replaced\n' }, // a file over a queued file
        { name: 'a/link', type: 'link', linkname: 'a/f1998' }, // a hardlink to a queued file
        { name: 'a/f1997', type: 'directory' }, // a directory over a queued file
        { name: 'a/f1996', type: 'symlink', linkname: 'elsewhere' }, // a symlink over a queued file
      ]);
      const stats = await applyLayer(chunksOf(tar, 64 * 1024), dest);
      expect(stats.files).toBe(2000 + 50 + 1);
      expect(fs.readFileSync(path.join(dest, 'a/f1999'), 'utf8')).toBe('replaced\n');
      const linked = fs.statSync(path.join(dest, 'a/link'));
      expect(linked.ino).toBe(fs.statSync(path.join(dest, 'a/f1998')).ino);
      expect(linked.nlink).toBe(2);
      expect(fs.readFileSync(path.join(dest, 'a/link'), 'utf8')).toBe('a 1998 '.repeat(40));
      expect(fs.lstatSync(path.join(dest, 'a/f1997')).isDirectory()).toBe(true);
      expect(fs.readlinkSync(path.join(dest, 'a/f1996'))).toBe('elsewhere');
      for (const i of [0, 1, 1000, 1995]) {
        const f = path.join(dest, `a/f${i}`);
        expect(fs.readFileSync(f, 'utf8')).toBe(`a ${i} `.repeat(40));
        const st = fs.statSync(f);
        expect(st.mode & 0o7777).toBe(0o640);
        expect(st.mtimeMs).toBe(1_600_000_000_000);
      }
      expect(fs.readdirSync(path.join(dest, 'a'))).toHaveLength(2001);
      // The directory's mode and time came after its files were made, or the files would have moved its mtime.
      const ro = fs.statSync(path.join(dest, 'ro'));
      expect(ro.mode & 0o7777).toBe(0o555);
      expect(ro.mtimeMs).toBe(mtime.getTime());
      expect(fs.readdirSync(path.join(dest, 'ro'))).toHaveLength(50);
    });

    it('ends each wait once the sink is down to its own bound, waits for room and for every file side by side', async () => {
      const native = nativeFs() as unknown as NativeFiles;
      const sink = native.fileSinkCreate(2);
      const body = Buffer.alloc(4096, 7);
      let pending = 0;
      for (let i = 0; i < 600; i++) pending = native.fileSinkAdd(sink, i, Buffer.from(path.join(dest, `f${i}`)), [body], 0o644, -1, -1, 0, 0, 0, 0);
      expect(pending).toBeGreaterThan(0);
      // Waiters with different bounds, the highest first and last: each ends at its own bound, none is left asleep.
      const bounds = [1 << 20, 0, 256 * 1024, 64 * 1024, 1 << 30];
      const ended = await Promise.all(bounds.map((b) => native.fileSinkWait(sink, b).then((p) => ({ b, p }))));
      for (const { b, p } of ended) expect(p, `a wait for ${b} bytes`).toBeLessThanOrEqual(b);
      expect(await native.fileSinkWait(sink, 0)).toBe(0);
      expect(fs.readdirSync(dest)).toHaveLength(600);
      // A later wait on the same sink, after all the others ended, still ends.
      native.fileSinkAdd(sink, 600, Buffer.from(path.join(dest, 'last')), [body], 0o644, -1, -1, 0, 0, 0, 0);
      expect(await native.fileSinkWait(sink, 0)).toBe(0);
      expect(fs.statSync(path.join(dest, 'last')).size).toBe(4096);
    });

    it('leaves nothing behind after an abort, even files that were still queued', async () => {
      const tar = await makeTar(smallFiles('d', 3000));
      const ac = new AbortController();
      async function* source(): AsyncGenerator<Buffer> {
        let sent = 0;
        for await (const c of chunksOf(tar, 64 * 1024)) {
          yield c;
          sent += c.length;
          if (sent > tar.length / 2) ac.abort(new Error('stop'));
        }
      }
      expect(await code(applyLayer(source(), dest, { signal: ac.signal }))).toBe('ABORTED');
      expect(fs.readdirSync(dest)).toEqual([]);
      // No writer thread made a file after the apply gave up.
      await new Promise((r) => setTimeout(r, 300));
      expect(fs.readdirSync(dest)).toEqual([]);
    });

    it.skipIf(lacksRoot())('reports a file the writer threads could not make as NO_SPACE, naming that entry', async (ctx) => {
      const small = path.join(sandbox, 'small');
      fs.mkdirSync(small);
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m,nr_inodes=200', 'tmpfs', small], { stdio: 'pipe' });
      } catch (e) {
        console.warn(`skipping: cannot mount tmpfs: ${(e as Error).message}`);
        lacks('tmpfs', `cannot mount tmpfs: ${(e as Error).message}`);
        ctx.skip();
      }
      try {
        const tar = await makeTar(smallFiles('d', 1000));
        const err = await applyLayer(chunksOf(tar, 64 * 1024), small).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message: string; details?: Record<string, unknown> },
        );
        expect(err?.code).toBe('NO_SPACE');
        const entry = String(err?.details?.entry);
        expect(entry).toMatch(/^d\/f\d+$/);
        expect(err?.message).toContain(`entry ${JSON.stringify(entry)}`);
        expect(err?.details?.errno).toBe('ENOSPC');
        // The entry named is the file whose creation failed, not whichever entry was being read when
        // the failure was noticed: the errno's own path says which file that was.
        expect(err?.message).toContain(`open '${small}/${entry}'`);
        expect(fs.readdirSync(small)).toEqual([]);
      } finally {
        execFileSync('umount', [small]);
      }
    });

    it('keeps working in a process whose unpack workers end and new ones start', async () => {
      // The writer threads outlive the worker that started them; Node unloads an addon when the last
      // worker that loaded it ends, so the addon must stay loaded (this hung before it did).
      const layer = await buildLayer(
        Array.from({ length: 40 }, (_, i) => ({ type: 'file' as const, path: `w/f${i}`, content: `w ${i}\n` })),
        { compression: 'gzip' },
      );
      const blob = path.join(sandbox, 'layer.tgz');
      fs.writeFileSync(blob, layer.blob);
      const url = new URL('./pool/pool.ts', import.meta.url).href.replace(/\/src\/unpack\/pool\/pool\.ts$/, '/dist/unpack/pool/pool.js');
      const script = `
      const { UnpackPool } = await import(${JSON.stringify(url)});
      const fs = await import('node:fs');
      for (let i = 0; i < 3; i++) {
        const pool = new UnpackPool({ size: 1 });
        const d = ${JSON.stringify(sandbox)} + '/run' + i;
        fs.mkdirSync(d);
        const r = await pool.run({ blobPath: ${JSON.stringify(blob)}, mediaType: ${JSON.stringify(MediaTypes.OCI_LAYER_GZIP)}, dest: d });
        await pool.close();
        console.log(r.stats.files, fs.readdirSync(d + '/w').length);
      }`;
      // A file, not -e: workers inherit the process's flags, and --input-type would stop them.
      const file = path.join(sandbox, 'two-pools.mjs');
      fs.writeFileSync(file, script);
      const r = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 30_000 });
      expect(r.error).toBeUndefined();
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout.trim().split('\n')).toEqual(['40 40', '40 40', '40 40']);
    });
  },
);

describe.skipIf(lacks('addon', hasSink ? undefined : 'the native addon (writer threads) is not built'))('FileSink', () => {
  const times = { atime: { sec: 1_600_000_000, nsec: 0 }, mtime: { sec: 1_600_000_000, nsec: 0 } };
  function file(name: string, i: number) {
    return {
      path: Buffer.from(path.join(dest, name), 'latin1'),
      chunks: [Buffer.from(`file ${i}\n`)],
      mode: 0o644,
      owner: undefined,
      times,
      label: `writing ${name}`,
      details: { i },
    };
  }
  const settle = () => new Promise((r) => setTimeout(r, 2));

  it('lets go of the labels of files made, and still names a file that failed after many were let go', async () => {
    const sink = FileSink.open()!;
    // Each file is made before the next arrives: the sink keeps only a bounded window of labels.
    for (let i = 0; i < 200; i++) {
      await sink.add(file(`f${i}`, i));
      await settle();
    }
    expect(sink.labelsHeld).toBeGreaterThan(0);
    expect(sink.labelsHeld).toBeLessThanOrEqual(40);
    // A file that cannot be made (its directory does not exist), queued among others, then more.
    await sink.add(file('missing/f', -1));
    for (let i = 200; i < 260; i++) await Promise.resolve(sink.add(file(`f${i}`, i))).catch(() => undefined);
    const err = await sink.drain().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isFastpullError(err) && err.code).toBe('INTERNAL');
    expect(String((err as Error).message)).toContain('writing missing/f');
    expect((err as { details?: Record<string, unknown> }).details).toMatchObject({ i: -1, errno: 'ENOENT' });
    expect(fs.readFileSync(path.join(dest, 'f199'), 'utf8')).toBe('file 199\n');
  });
});
