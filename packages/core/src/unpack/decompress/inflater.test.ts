// Tests of inflater choice and of the external gunzip stage, checked against node:zlib.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Transform, Writable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import {
  createExternalGunzip,
  findInflater,
  INFLATER_ENV,
  INFLATER_PATHS,
  INFLATER_STDERR_LIMIT,
  inflaterFromEnv,
  resolveGunzip,
  type ExternalInflater,
} from './inflater.js';
import { createDecompressor } from './decompress.js';
import { chunks, layerLike } from './gzip.testkit.js';
import { isalAvailable, isalUnavailableReason } from './isal.js';
import { lacks } from '../../testing/needs.js';

/** The installed tool of `kind`, or undefined (with the reason printed) so its tests skip. */
function installed(kind: 'igzip' | 'pigz'): ExternalInflater | undefined {
  try {
    return findInflater(kind);
  } catch {
    console.log(`skipping ${kind} tests: no executable at ${INFLATER_PATHS[kind].join(', ')}`);
    return undefined;
  }
}

const tools = { igzip: installed('igzip'), pigz: installed('pigz') };
/** A stand-in tool for tests that need any real inflater. */
const anyTool = tools.igzip ?? tools.pigz;

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-inflater-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A shell script standing in for an inflater (its -d -c arguments are ignored). */
function fakeTool(name: string, body: string): ExternalInflater {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return { kind: 'igzip', path: file };
}

/** Runs `input` through `stage` and collects what comes out. */
async function inflateWith(stage: Transform, input: Buffer | Buffer[]): Promise<Buffer> {
  const out: Buffer[] = [];
  await pipeline(Readable.from(Array.isArray(input) ? input : [input]), stage, async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) out.push(chunk);
  });
  return Buffer.concat(out);
}

const zlibGunzip = (): Transform => zlib.createGunzip({ chunkSize: 256 * 1024 });

/** The outcome of inflating `input`: the bytes, or the error. */
async function outcome(stage: Transform, input: Buffer | Buffer[]): Promise<{ ok: Buffer } | { error: unknown }> {
  try {
    return { ok: await inflateWith(stage, input) };
  } catch (error) {
    return { error };
  }
}

/** Resolves once `stream` has emitted 'close'. */
async function closed(stream: Transform): Promise<void> {
  if (!stream.closed) await new Promise((resolve) => stream.once('close', resolve));
}

function fdCount(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

const gz = (data: string | Buffer, level = 6): Buffer => zlib.gzipSync(data, { level });

describe('findInflater', () => {
  it('resolves zlib to node:zlib', () => {
    expect(findInflater('zlib')).toBeUndefined();
  });

  it('resolves auto to a decoder in this process, never to an installed igzip or pigz', () => {
    const igzip = fakeTool('auto-igzip', 'exit 0');
    const pigz = fakeTool('auto-pigz', 'exit 0');
    expect(findInflater('auto', { igzip: [igzip.path], pigz: [pigz.path], zstd: [] })).toBeUndefined();
    expect(findInflater()).toBeUndefined();
  });

  it('takes the first candidate that is an executable regular file', () => {
    const plain = path.join(dir, 'plain');
    fs.writeFileSync(plain, '#!/bin/sh\n', { mode: 0o644 });
    const folder = path.join(dir, 'folder');
    fs.mkdirSync(folder, { mode: 0o755 });
    const good = fakeTool('good-pigz', 'exit 0');
    const paths = { igzip: [], pigz: [path.join(dir, 'absent'), plain, folder, good.path], zstd: [] };
    expect(findInflater('pigz', paths)).toEqual({ kind: 'pigz', path: good.path });
  });

  it('looks each path up once per process', () => {
    const tool = fakeTool('cached-igzip', 'exit 0');
    const paths = { igzip: [tool.path], pigz: [], zstd: [] };
    expect(findInflater('igzip', paths)).toEqual({ kind: 'igzip', path: tool.path });
    fs.rmSync(tool.path);
    expect(findInflater('igzip', paths)).toEqual({ kind: 'igzip', path: tool.path });
  });

  it('refuses an explicit inflater that is not installed', () => {
    const paths = { igzip: ['/nonexistent/igzip'], pigz: ['/nonexistent/unpigz', '/nonexistent/pigz'], zstd: [] };
    expect(() => findInflater('igzip', paths)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(
          /^inflater igzip was asked for but is not installed: no executable at \/nonexistent\/igzip \(Debian\/Ubuntu package isal\)/,
        ),
      }),
    );
    expect(() => findInflater('pigz', paths)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('/nonexistent/unpigz, /nonexistent/pigz') }),
    );
  });

  it('refuses an unknown choice from untyped code', () => {
    expect(() => findInflater('gzip' as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'inflater: "gzip" is not one of auto, igzip, pigz, zlib, parallel, isal' }),
    );
  });
});

describe('resolveGunzip', () => {
  const programs = () => ({ igzip: [fakeTool('resolve-igzip', 'exit 0').path], pigz: [fakeTool('resolve-pigz', 'exit 0').path], zstd: [] });

  it('resolves auto to in-process ISA-L when its addon is built, else to node:zlib, with igzip installed or not', () => {
    for (const paths of [programs(), { igzip: [], pigz: [], zstd: [] }]) {
      expect(resolveGunzip('auto', { paths, isal: true })).toEqual({ kind: 'isal' });
      expect(resolveGunzip('auto', { paths, isal: false })).toEqual({ kind: 'zlib' });
    }
  });

  it(`resolves auto on this machine to ${isalAvailable() ? 'in-process ISA-L (its addon is built here)' : `node:zlib (${isalUnavailableReason()})`}`, () => {
    expect(resolveGunzip()).toEqual({ kind: isalAvailable() ? 'isal' : 'zlib' });
    expect(resolveGunzip('auto')).toEqual(resolveGunzip());
  });

  it('decodes auto with the decoder it resolves to: the error of a corrupt stream names it', async () => {
    const gz = zlib.gzipSync(randomBytes(200_000));
    gz[gz.length >> 1]! ^= 0xff;
    gz[(gz.length >> 1) + 1]! ^= 0xff;
    const failure = await pipeline(Readable.from([gz]), createDecompressor('gzip', { inflater: 'auto' }), new Writable({ write: (_c, _e, cb) => cb() })).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isFastpullError(failure) ? failure.code : failure).toBe('INVALID_LAYER');
    if (isalAvailable()) expect((failure as Error).message).toMatch(/^corrupt gzip stream: isal: /);
    else expect((failure as Error).message).not.toMatch(/isal/);
  });

  it('resolves the explicit choices, and refuses isal where its addon is not built, saying why', () => {
    const paths = programs();
    expect(resolveGunzip('zlib', { paths, isal: true })).toEqual({ kind: 'zlib' });
    expect(resolveGunzip('parallel', { paths, isal: true })).toEqual({ kind: 'parallel' });
    expect(resolveGunzip('igzip', { paths, isal: true })).toEqual({ kind: 'igzip', path: paths.igzip[0] });
    expect(resolveGunzip('pigz', { paths, isal: true })).toEqual({ kind: 'pigz', path: paths.pigz[0] });
    expect(resolveGunzip('isal', { paths, isal: true })).toEqual({ kind: 'isal' });
    expect(() => resolveGunzip('isal', { paths, isal: false })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^inflater isal was asked for but is not available: .*; use auto or zlib instead$/),
      }),
    );
  });
});

describe('inflaterFromEnv', () => {
  it(`reads ${INFLATER_ENV}`, () => {
    expect(inflaterFromEnv({})).toBeUndefined();
    expect(inflaterFromEnv({ [INFLATER_ENV]: '' })).toBeUndefined();
    for (const choice of ['auto', 'igzip', 'pigz', 'zlib', 'parallel', 'isal'] as const) expect(inflaterFromEnv({ [INFLATER_ENV]: choice })).toBe(choice);
  });

  it('refuses a value that is no choice, naming the variable', () => {
    expect(() => inflaterFromEnv({ [INFLATER_ENV]: 'IGZIP' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'FASTPULL_INFLATER: "IGZIP" is not one of auto, igzip, pigz, zlib, parallel, isal' }),
    );
  });
});

describe.each(['igzip', 'pigz'] as const)('createExternalGunzip with %s', (kind) => {
  const tool = tools[kind];
  const run = (input: Buffer | Buffer[]): Promise<Buffer> => inflateWith(createExternalGunzip(tool!), input);

  /** Inflates `input` with the tool and with node:zlib and expects the same outcome. */
  async function expectParity(input: Buffer | Buffer[]): Promise<Buffer | undefined> {
    const [ext, ref] = await Promise.all([outcome(createExternalGunzip(tool!), input), outcome(zlibGunzip(), input)]);
    if ('ok' in ref) {
      expect('ok' in ext ? ext.ok.equals(ref.ok) : ext.error).toBe(true);
      return ref.ok;
    }
    expect('error' in ext ? ext.error : 'inflated without error').toMatchObject({ code: 'INVALID_LAYER' });
    return undefined;
  }

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('inflates concatenated members, empty ones included, into one stream', async () => {
    const blob = Buffer.concat([gz('first, '), gz(''), gz('second, '), gz('third', 1)]);
    expect((await run(blob)).toString()).toBe('first, second, third');
    expect((await run(chunks(blob, 1))).toString()).toBe('first, second, third');
    expect((await run(gz(''))).length).toBe(0);
    await expectParity(blob);
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('gives the bytes node:zlib gives', async () => {
    const inputs = [
      gz('hello\n'),
      gz(layerLike(300_000, 1), 1),
      chunks(gz(layerLike(1 << 20, 2), 9), 7919),
      chunks(Buffer.concat([gz(layerLike(5_000_000, 3)), gz(layerLike(3_000_000, 4), 1)]), 1 << 20),
    ];
    for (const input of inputs) expect(await expectParity(input)).toBeDefined();
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('gives the bytes node:zlib gives for a 20 MB layer-like stream', async () => {
    const data = layerLike(20_000_000, 5);
    expect((await expectParity(chunks(gz(data), 1 << 20)))?.equals(data)).toBe(true);
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))("fails on corrupt data with the tool's stderr and status", async () => {
    const good = gz(layerLike(200_000, 6));
    const corrupt = Buffer.from(good);
    corrupt.fill(0xff, 100, 110);
    const badCrc = Buffer.from(good);
    badCrc[good.length - 8] = badCrc[good.length - 8]! ^ 1;
    for (const input of [corrupt, badCrc, Buffer.from('not gzip at all')]) {
      await expectParity(input);
      const error = await run(input).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isFastpullError(error)).toBe(true);
      expect(error).toMatchObject({
        code: 'INVALID_LAYER',
        message: expect.stringMatching(new RegExp(`^corrupt gzip stream: ${kind} \\(${tool!.path}\\) exited with status [1-9]\\d*: \\S`)),
        details: { inflater: kind, path: tool!.path, signal: null },
      });
    }
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('fails on a truncated stream', async () => {
    const blob = gz(layerLike(200_000, 7));
    for (const cut of [0, 1, 2, 9, 10, 11, 100, blob.length >> 1, blob.length - 8, blob.length - 4, blob.length - 1]) {
      await expectParity(blob.subarray(0, cut));
    }
    // A second member cut anywhere in its deflate data or trailer.
    for (const cut of [20, 1000, blob.length - 1]) await expectParity(Buffer.concat([gz('first'), blob.subarray(0, cut)]));
  });

  // pigz ignores a following member cut inside its header (it exits 0); igzip and node:zlib fail. The
  // output then lacks that member's content, so the diffID check catches it, but not as INVALID_LAYER.
  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('on a second member cut inside its header: pinned behaviour', async () => {
    const input = Buffer.concat([gz('first'), gz('second').subarray(0, 5)]);
    expect(await outcome(zlibGunzip(), input)).toMatchObject({ error: expect.objectContaining({ code: 'Z_BUF_ERROR' }) });
    if (kind === 'pigz') expect((await run(input)).toString()).toBe('first');
    else await expectParity(input);
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('ignores trailing zeros as node:zlib does', async () => {
    const blob = gz(layerLike(100_000, 8));
    await expectParity(Buffer.concat([blob, Buffer.alloc(1)]));
    await expectParity(Buffer.concat([blob, Buffer.alloc(4096)]));
    await expectParity([blob, Buffer.alloc(3 << 20)]);
  });

  // The parity gap documented on createExternalGunzip: node:zlib fails on trailing bytes that are not
  // zeros; igzip and pigz stop at them and exit 0. The trailing bytes are consumed all the same.
  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('ignores trailing garbage where node:zlib fails: pinned behaviour', async () => {
    const data = layerLike(100_000, 9);
    const blob = gz(data);
    const garbage = [Buffer.from('garbage'), Buffer.from('\0garbage'), layerLike(4 << 20, 10)];
    for (const tail of garbage) {
      const input = [blob, tail];
      if (tail.length < 100) {
        // node:zlib fails unless the garbage starts with a zero byte.
        const ref = await outcome(zlibGunzip(), Buffer.concat(input));
        expect('error' in ref).toBe(tail[0] !== 0);
      }
      let fed = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback: TransformCallback) {
          fed += chunk.length;
          callback(null, chunk);
        },
      });
      const out: Buffer[] = [];
      await pipeline(Readable.from(input), counter, createExternalGunzip(tool!), async (source: AsyncIterable<Buffer>) => {
        for await (const chunk of source) out.push(chunk);
      });
      expect(Buffer.concat(out).equals(data)).toBe(true);
      expect(fed).toBe(blob.length + tail.length);
    }
  });

  it.skipIf(lacks(kind, tool ? undefined : `${kind} is not installed`))('keeps memory bounded when the reader stalls', async () => {
    const blob = gz(randomBytes(24 << 20), 1);
    let pulled = 0;
    const source = Readable.from(
      (function* () {
        for (const chunk of chunks(blob, 256 * 1024)) {
          pulled += chunk.length;
          yield chunk;
        }
      })(),
    );
    const stage = createExternalGunzip(tool!);
    const done = pipeline(source, stage, new Writable({ highWaterMark: 1, write: () => {} })); // takes one chunk, never more
    await sleep(700);
    expect(pulled).toBeLessThan(8 << 20);
    expect(stage.readableLength).toBeLessThanOrEqual((1 << 20) + (256 << 10));
    stage.destroy();
    await expect(done).rejects.toThrow();
  });
});

describe('createExternalGunzip lifecycle', () => {
  it('quotes at most INFLATER_STDERR_LIMIT bytes of stderr with the exit status', async () => {
    const tool = fakeTool(
      'noisy',
      `cat >/dev/null; i=0; while [ $i -lt 100 ]; do echo "line $i of a long complaint about the input"; i=$((i+1)); done >&2; exit 3`,
    );
    const error = await inflateWith(createExternalGunzip(tool), gz('x')).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'INVALID_LAYER',
      message: expect.stringMatching(/^corrupt gzip stream: igzip \(.*noisy\) exited with status 3: line 0 of .* \[\d+ more bytes\]$/s),
      details: { exitCode: 3, signal: null },
    });
    expect((error as { details: { stderr: string } }).details.stderr.length).toBeLessThanOrEqual(INFLATER_STDERR_LIMIT);
  });

  it('fails when the tool is killed by a signal', async () => {
    const tool = fakeTool('segv', 'cat; kill -SEGV $$');
    await expect(inflateWith(createExternalGunzip(tool), gz('x'))).rejects.toMatchObject({
      code: 'INVALID_LAYER',
      message: expect.stringMatching(/segv\) was killed by SIGSEGV$/),
      details: { exitCode: null, signal: 'SIGSEGV' },
    });
  });

  it('does not end its output before the tool has exited with status 0', async () => {
    // The tool closes stdout at once but reports failure later: the stream must fail, not end.
    const failing = fakeTool('late-fail', 'cat; exec >&-; sleep 0.3; echo late failure >&2; exit 1');
    let ended = false;
    const stage = createExternalGunzip(failing);
    stage.on('end', () => (ended = true));
    await expect(inflateWith(stage, Buffer.from('data'))).rejects.toMatchObject({ code: 'INVALID_LAYER', message: expect.stringContaining('late failure') });
    expect(ended).toBe(false);

    const slow = fakeTool('late-ok', 'cat; exec >&-; sleep 0.3; exit 0');
    const started = Date.now();
    expect((await inflateWith(createExternalGunzip(slow), Buffer.from('data'))).toString()).toBe('data');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('reports the exit status, not EPIPE, when the tool dies before reading its input', async () => {
    const tool = fakeTool('early-exit', 'echo refusing >&2; exit 2');
    const input = chunks(Buffer.alloc(8 << 20, 7), 64 * 1024);
    await expect(inflateWith(createExternalGunzip(tool), input)).rejects.toMatchObject({
      code: 'INVALID_LAYER',
      message: expect.stringMatching(/exited with status 2: refusing$/),
    });
  });

  it('fails with INTERNAL when the tool cannot run', async () => {
    await expect(inflateWith(createExternalGunzip({ kind: 'pigz', path: path.join(dir, 'vanished') }), gz('x'))).rejects.toMatchObject({
      code: 'INTERNAL',
      message: expect.stringContaining('inflating with pigz: cannot run'),
    });
  });

  /**
   * `command` (exec'd, so it keeps the pid) behind a wrapper that records its pid; `pid()` waits for
   * the record (written whole, by a rename) however long the tool takes to start.
   */
  function tracedTool(name: string, command: string): { tool: ExternalInflater; pid: () => Promise<number> } {
    const pidFile = path.join(dir, `${name}.pid`);
    const tool = fakeTool(name, `echo $$ > '${pidFile}.tmp' && mv '${pidFile}.tmp' '${pidFile}'; exec ${command}`);
    const pid = async (): Promise<number> => {
      const deadline = Date.now() + 30_000;
      while (!fs.existsSync(pidFile)) {
        if (Date.now() > deadline) throw new Error(`${name}: the tool never recorded its pid`);
        await sleep(10);
      }
      return Number(fs.readFileSync(pidFile, 'utf8'));
    };
    return { tool, pid };
  }

  it('kills and reaps a hung tool and closes its pipes when a pipeline is aborted', async () => {
    const before = fdCount();
    // Sleeps through the end of its stdin and the close of its stdout: only a kill ends it.
    const { tool, pid } = tracedTool('aborted', '/bin/sleep 1000');
    const controller = new AbortController();
    const source = new Readable({ read() {} }); // never ends
    source.push(gz('x').subarray(0, 5));
    const stage = createExternalGunzip(tool);
    const done = pipeline(source, stage, new Writable({ write: (_c, _e, cb) => cb() }), { signal: controller.signal });
    const child = await pid();
    expect(fs.existsSync(`/proc/${child}`)).toBe(true);
    controller.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    await closed(stage); // pipeline settles without waiting for every stage to close
    expect(fs.existsSync(`/proc/${child}`)).toBe(false); // neither running nor a zombie
    expect(fdCount()).toBe(before);
  });

  it.skipIf(lacks('igzip', anyTool ? undefined : 'neither igzip nor pigz is installed'))('kills the tool when the stage downstream fails', async () => {
    const { tool, pid } = tracedTool('downstream', `'${anyTool?.path}' -d -c`);
    const boom = new Error('disk full');
    const sink = new Writable({ write: (_c, _e, cb) => cb(boom) });
    const stage = createExternalGunzip(tool);
    await expect(pipeline(Readable.from(chunks(gz(layerLike(8 << 20, 13)), 64 * 1024)), stage, sink)).rejects.toBe(boom);
    await closed(stage);
    expect(fs.existsSync(`/proc/${await pid()}`)).toBe(false);
  });
});
