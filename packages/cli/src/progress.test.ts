import { describe, expect, it } from 'vitest';
import type { Digest, PullEvent } from '@fastpull/core';
import { LiveProgress, LogProgress } from './progress.js';

const MiB = 1024 * 1024;
const A = `sha256:${'a'.repeat(64)}` as Digest;
const B = `sha256:${'b'.repeat(64)}` as Digest;

const resolved: PullEvent = {
  type: 'resolved',
  name: '127.0.0.1:5000/app:1',
  manifest: `sha256:${'c'.repeat(64)}` as Digest,
  platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
  layers: [
    { digest: A, size: 40 * MiB, chainID: A },
    { digest: B, size: 2 * MiB, chainID: B },
  ],
};
const layer = (index: number, state: 'waiting' | 'fetching' | 'extracting' | 'verifying' | 'committed' | 'exists', bytes: number): PullEvent => ({
  type: 'layer',
  index,
  digest: index === 0 ? A : B,
  state,
  bytes,
  total: index === 0 ? 40 * MiB : 2 * MiB,
});

/** A sink that keeps what was written, and a clock the test moves. */
function harness(color = false, columns = 120) {
  let out = '';
  const clock = { t: 1000 };
  const live = new LiveProgress({ out: { write: (s: string) => (out += s) }, now: () => clock.t, color, columns });
  return { live, clock, written: () => out, take: () => ((s) => ((out = ''), s))(out) };
}

const strip = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/\r/g, '');

describe('LiveProgress', () => {
  it('draws one line per layer and a total, then redraws them in place', () => {
    const h = harness();
    h.live.event(resolved);
    const first = h.take();
    expect(first.startsWith(`127.0.0.1:5000/app:1: resolved sha256:${'c'.repeat(64)} (linux/arm64/v8), 2 layers\n`)).toBe(true);
    expect(strip(first).split('\n').slice(1, 4)).toEqual(['aaaaaaaaaaaa: Waiting', 'bbbbbbbbbbbb: Waiting', 'Total: 0/2 layers  0 B/42.0 MiB']);
    expect(first).not.toContain('\x1b[3A');

    h.clock.t += 200;
    h.live.event(layer(0, 'fetching', 0));
    const second = h.take();
    // Back up over the 3 lines drawn before, erase each and write it again.
    expect(second.startsWith('\x1b[3A')).toBe(true);
    expect(second.match(/\r\x1b\[2K/g)).toHaveLength(3);
    expect(strip(second)).toContain('aaaaaaaaaaaa: Downloading        [>                       ]  0 B/40.0 MiB');
  });

  it('shows bytes, rate and ETA while downloading, and the final state once at the end', () => {
    const h = harness();
    h.live.event(resolved);
    h.live.event(layer(0, 'fetching', 0));
    h.clock.t += 1000;
    h.live.event(layer(0, 'fetching', 8 * MiB));
    h.live.event(layer(1, 'waiting', 0));
    h.take();
    h.live.tick();
    const [a, b, total] = h.live.lines();
    // 8 MiB in 1 s; 32 MiB left: 4 s.
    expect(a).toBe('aaaaaaaaaaaa: Downloading        [====>                   ]  8.0 MiB/40.0 MiB  8.0 MiB/s  ETA 4s');
    expect(b).toBe('bbbbbbbbbbbb: Waiting');
    expect(total).toBe('Total: 0/2 layers  8.0 MiB/42.0 MiB  8.0 MiB/s  ETA 5s');

    // The ETA counts down between events.
    h.clock.t += 2000;
    expect(h.live.lines()[0]).toMatch(/ETA 2s$/);

    h.live.event(layer(0, 'extracting', 0));
    expect(h.live.lines()[0]).toMatch(/^aaaaaaaaaaaa: Downloading /); // the unpacker follows the download
    h.live.event(layer(0, 'fetching', 40 * MiB));
    expect(h.live.lines()[0]).toBe('aaaaaaaaaaaa: Extracting         40.0 MiB');
    h.live.event(layer(0, 'verifying', 40 * MiB));
    expect(h.live.lines()[0]).toBe('aaaaaaaaaaaa: Verifying          40.0 MiB');
    h.live.event(layer(0, 'committed', 40 * MiB));
    h.live.event(layer(1, 'exists', 2 * MiB));
    h.clock.t += 500;
    h.take();
    h.live.event({
      type: 'done',
      image: {} as never,
      timings: { resolveMs: 1, totalMs: 3500, layers: [], phases: { fetchMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0 } },
    });
    const final = strip(h.take()).split('\n');
    expect(final.slice(0, 3)).toEqual(['aaaaaaaaaaaa: Pull complete      40.0 MiB', 'bbbbbbbbbbbb: Already exists', 'Total: 2/2 layers  40.0 MiB in 3.50s']);
    // Nothing more after the final frame.
    h.live.tick();
    h.live.finish();
    expect(h.written()).toBe('');
  });

  it('gives the unpack pass a bar of the bytes it consumed, with its own rate and ETA', () => {
    const h = harness();
    h.live.event(resolved);
    h.live.event(layer(0, 'fetching', 0));
    h.clock.t += 1000;
    h.live.event(layer(0, 'fetching', 40 * MiB));
    const extracting = (unpacked: number): PullEvent => ({ ...layer(0, 'extracting', 40 * MiB), unpacked }) as PullEvent;
    h.live.event(extracting(8 * MiB));
    // One sample: no rate yet.
    expect(h.live.lines()[0]).toBe('aaaaaaaaaaaa: Extracting         [====>                   ]  8.0 MiB/40.0 MiB');
    h.clock.t += 2000;
    h.live.event(extracting(24 * MiB));
    // 16 MiB in 2 s; 16 MiB left: 2 s, counting down between events.
    expect(h.live.lines()[0]).toBe('aaaaaaaaaaaa: Extracting         [==============>         ]  24.0 MiB/40.0 MiB  8.0 MiB/s  ETA 2s');
    h.clock.t += 1000;
    expect(h.live.lines()[0]).toMatch(/ETA 1s$/);
    // The total still counts downloaded bytes: all of this layer's are in; the other's are overdue.
    expect(h.live.lines()[2]).toBe('Total: 0/2 layers  40.0 MiB/42.0 MiB  40.0 MiB/s');
    h.live.event(layer(0, 'verifying', 40 * MiB));
    expect(h.live.lines()[0]).toBe('aaaaaaaaaaaa: Verifying          40.0 MiB');
  });

  it('redraws at most every 100 ms on events, and on every tick', () => {
    const h = harness();
    h.live.event(resolved);
    h.take();
    h.clock.t += 10;
    h.live.event(layer(0, 'fetching', 0));
    h.live.event(layer(1, 'fetching', 0));
    expect(h.written()).toBe('');
    h.clock.t += 90;
    h.live.event(layer(1, 'fetching', MiB));
    expect(h.take()).not.toBe('');
    h.clock.t += 1;
    h.live.tick();
    expect(h.take()).not.toBe('');
  });

  it('colours the state only when asked, and cuts lines to the terminal width', () => {
    const plain = harness(false);
    plain.live.event(resolved);
    expect(plain.written()).not.toMatch(/\x1b\[\d+m/);
    const colored = harness(true);
    colored.live.event(resolved);
    expect(colored.written()).toContain('\x1b[2mWaiting\x1b[0m');
    colored.clock.t += 1000;
    colored.live.event(layer(1, 'committed', 2 * MiB));
    expect(colored.written()).toContain('\x1b[32mPull complete\x1b[0m');

    const medium = harness(false, 80);
    medium.live.event(resolved);
    medium.clock.t += 1000;
    medium.live.event(layer(0, 'fetching', 0));
    medium.clock.t += 1000;
    medium.live.event(layer(0, 'fetching', 4 * MiB));
    // Too wide with the bar: the bar goes, the numbers stay.
    expect(strip(medium.take()).split('\n')).toContain('aaaaaaaaaaaa: Downloading        4.0 MiB/40.0 MiB  4.0 MiB/s  ETA 9s');

    const narrow = harness(true, 30);
    narrow.live.event(resolved);
    narrow.clock.t += 1000;
    narrow.live.event(layer(0, 'fetching', MiB));
    const rows = strip(narrow.take())
      .split('\n')
      .filter((l) => l !== '');
    for (const r of rows.slice(1)) expect(r.length).toBeLessThanOrEqual(29);
  });
});

describe('LogProgress', () => {
  it('writes a line per state change of a layer, never one per chunk', () => {
    let out = '';
    const log = new LogProgress({ write: (s: string) => (out += s) }, () => 0);
    log.event(resolved);
    log.event(layer(0, 'waiting', 0));
    log.event(layer(0, 'fetching', 0));
    for (let i = 1; i <= 10; i++) log.event(layer(0, 'fetching', 4 * i * MiB));
    log.event(layer(0, 'extracting', 0));
    log.event(layer(0, 'verifying', 40 * MiB));
    log.event(layer(0, 'committed', 40 * MiB));
    log.event(layer(1, 'exists', 2 * MiB));
    expect(out.split('\n')).toEqual([
      `127.0.0.1:5000/app:1: resolved sha256:${'c'.repeat(64)} (linux/arm64/v8), 2 layers`,
      '  aaaaaaaaaaaa: waiting',
      '  aaaaaaaaaaaa: downloading (40.0 MiB)',
      '  aaaaaaaaaaaa: download complete',
      '  aaaaaaaaaaaa: extracting',
      '  aaaaaaaaaaaa: verifying',
      '  aaaaaaaaaaaa: pull complete (40.0 MiB)',
      '  bbbbbbbbbbbb: already exists',
      '',
    ]);
    expect(out).not.toContain('\x1b');
  });
});
