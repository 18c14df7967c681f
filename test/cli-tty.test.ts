// The live progress view on a real terminal: the built CLI runs under a pseudo-terminal (util-linux
// `script`), pulls from the real registry, and its layer lines must be drawn and redrawn in place.
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, type BuiltImage, findDistributionBinary, lacks, lacksRegistry, Prng, pushImage, startDistribution } from '@fastpull/core/testing';
import { cliPath, tempDir } from './helpers.js';

const binary = findDistributionBinary();
const script = spawnSync('script', ['--version'], { encoding: 'utf8' });
const noScript = script.status === 0 && /util-linux/.test(script.stdout) ? undefined : 'util-linux script(1) is not installed';
if (!binary) console.warn('skipping the terminal rendering test: docker-registry is not installed');
if (noScript) console.warn(`skipping the terminal rendering test: ${noScript}`);

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const strip = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');

/** Columns of the pseudo-terminal: wide enough that no line of the view is ever cut or loses its bar. */
const COLUMNS = 200;

/**
 * Runs the CLI with a terminal as stdout and stderr, COLUMNS wide (script(1) makes a 0x0 one, which
 * the view takes for 80 columns); returns everything it wrote there, escapes included.
 */
function underTerminal(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; output: string }> {
  const command = `stty cols ${COLUMNS} rows 50 && exec ${[process.execPath, cliPath, ...args].map(quote).join(' ')}`;
  return new Promise((resolve) => {
    const child = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('close', (status) => resolve({ status, output }));
  });
}

describe.skipIf(lacksRegistry() || lacks('script', noScript))('fastpull pull on a terminal', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  const work = tempDir('cli-tty');
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    // Incompressible layers, fetched one 64 KiB range at a time below: the download lasts long
    // enough for the live view to show it in progress.
    const prng = new Prng(5);
    image = await buildImage({
      layers: [
        [{ type: 'file', path: 'big.bin', content: prng.bytes(24 * 1024 * 1024) }],
        [{ type: 'file', path: 'mid.bin', content: prng.bytes(6 * 1024 * 1024) }],
        [{ type: 'file', path: 'etc/small', content: 'hello\n' }],
      ],
    });
    await pushImage(registry.url, 'tty/app', '1', image);
    ref = `${registry.host}/tty/app:1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('draws a live line per layer and a total, redrawn in place, in colour', async () => {
    const root = join(work.dir, 'root');
    const r = await underTerminal(['pull', '--root', root, '--concurrency', '1', '--chunk-size', '64KiB', ref], { NO_COLOR: '' });
    expect(r.status, r.output).toBe(0);
    const shorts = image.layers.map((l) => l.digest.slice(7, 19));
    // Redrawn in place: the cursor goes back up over the 3 layer lines and the total.
    expect(r.output).toContain('\x1b[4A');
    // Each frame starts by moving the cursor up over the previous one; the text before the first
    // such move holds the resolved line and the first frame.
    const frames = r.output.split('\x1b[4A').map((f) =>
      strip(f)
        .split('\r\n')
        .map((l) => l.replace(/^\r+/, '')),
    );
    expect(frames.length).toBeGreaterThan(2);
    // The first frame: every layer waiting.
    expect(frames[0]!.slice(1, 4)).toEqual(shorts.map((s) => `${s}: Waiting`));
    // While it downloads (384 ranges of 64 KiB, one at a time: far longer than a 100 ms redraw):
    // the big layer's line with its bar, bytes done of its size.
    const size = (image.layers[0]!.size / 1024 / 1024).toFixed(1);
    const downloading = new RegExp(`^${shorts[0]}: Downloading +\\[=*>? *\\]  \\d+(\\.\\d)? [KM]?i?B/${size} MiB  .*B/s  ETA \\d`);
    expect(frames.some((f) => downloading.test(f[0]!))).toBe(true);
    // The final frame, drawn once when the pull is done: every layer complete and the total with the
    // time taken, then the summary.
    const totalSize = (image.layers.reduce((n, l) => n + l.size, 0) / 1024 / 1024).toFixed(1);
    const finalTotal = new RegExp(`^Total: 3/3 layers  ${totalSize} MiB in \\d+(\\.\\d+)?m?s$`);
    const last = frames.at(-1)!;
    expect(last.slice(0, 3).map((l) => l.replace(/ {2,}.*$/, ''))).toEqual(shorts.map((s) => `${s}: Pull complete`));
    expect(last[3]).toMatch(finalTotal);
    expect(frames.flat().filter((l) => finalTotal.test(l))).toHaveLength(1);
    expect(r.output).toContain('\x1b[32mPull complete\x1b[0m');
    // No log lines on a terminal; the summary still comes after the view.
    expect(r.output).not.toMatch(/: pull complete \(/);
    expect(last[4]).toMatch(new RegExp(`^pulled ${ref.replaceAll('.', '\\.')} `));

    // A second pull finds every layer there.
    const again = await underTerminal(['pull', '--root', root, ref], { NO_COLOR: '1' });
    expect(again.status, again.output).toBe(0);
    const final = strip(again.output)
      .split('\r\n')
      .map((l) => l.replace(/^\r+/, ''));
    for (const s of shorts) expect(final).toContain(`${s}: Already exists`);
    // NO_COLOR: escapes move the cursor, but never colour.
    expect(again.output).not.toMatch(/\x1b\[\d+m/);
  });

  it('prints nothing but the digest with --quiet, even on a terminal', async () => {
    const r = await underTerminal(['pull', '--root', join(work.dir, 'root-q'), '--quiet', ref], {});
    expect(r.status, r.output).toBe(0);
    expect(r.output).toBe(`${image.manifestDigest}\r\n`);
  });
});
