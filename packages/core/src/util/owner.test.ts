// claimDir against a sweeper in another process: a freshly claimed directory is never taken for litter.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { claimDir } from './owner.js';

const addon = fileURLToPath(new URL('../../native/build/Release/fastpull_native.node', import.meta.url));

describe('claimDir', () => {
  it('never shows a sweeper in another process an owner file it could lock', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'fastpull-owner-'));
    // The sweeper does what sweepDeadDirs does to a directory whose owner lock it can take: remove it.
    const sweeper = spawn(
      process.execPath,
      [
        '-e',
        `
      const fs = require('node:fs'), path = require('node:path');
      const native = require(${JSON.stringify(addon)});
      const parent = ${JSON.stringify(parent)};
      // A directory found locked stays locked until the test releases them all at the end: later
      // passes skip it, so each pass costs what the new claims added.
      const locked = new Set();
      let taken = 0, tried = 0;
      process.stdout.write('ready\\n');
      // Until told to stop (a minute at most, should the test die first).
      const end = Date.now() + 60000;
      while (Date.now() < end && !fs.existsSync(path.join(parent, 'stop'))) {
        for (const name of fs.readdirSync(parent)) {
          if (locked.has(name)) continue;
          let fd;
          try { fd = fs.openSync(path.join(parent, name, 'owner'), 'r'); } catch { continue; }
          tried++;
          if (native.tryLock(fd, true)) { taken++; fs.rmSync(path.join(parent, name), { recursive: true, force: true }); }
          else locked.add(name);
          fs.closeSync(fd);
        }
      }
      process.stdout.write(JSON.stringify({ taken, tried }) + '\\n');
    `,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    // The claims start once the sweeper is sweeping (it has loaded and printed 'ready'), whatever the load.
    const ready = new Promise<void>((resolve, reject) => {
      sweeper.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.startsWith('ready\n')) resolve();
      });
      sweeper.on('exit', (code) => reject(new Error(`the sweeper exited with ${code} before it was ready`)));
    });
    const done = new Promise<number>((resolve) => sweeper.on('exit', (code) => resolve(code ?? 1)));
    await ready;
    const releases: (() => void)[] = [];
    let failed = 0;
    try {
      for (let i = 0; i < 3000; i++) {
        const dir = join(parent, `d${i}`);
        mkdirSync(dir);
        try {
          releases.push(claimDir(dir));
        } catch {
          failed++;
        }
        if (!existsSync(dir)) failed++;
      }
    } finally {
      mkdirSync(join(parent, 'stop'));
      expect(await done).toBe(0);
      for (const r of releases) r();
      rmSync(parent, { recursive: true, force: true });
    }
    const { taken, tried } = JSON.parse(out.slice('ready\n'.length)) as { taken: number; tried: number };
    expect(taken).toBe(0);
    expect(failed).toBe(0);
    // The sweeper really raced the claims: it opened owner files of claimed directories meanwhile.
    expect(tried).toBeGreaterThan(0);
  });
});
