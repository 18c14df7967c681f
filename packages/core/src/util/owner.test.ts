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
    const sweeper = spawn(process.execPath, ['-e', `
      const fs = require('node:fs'), path = require('node:path');
      const native = require(${JSON.stringify(addon)});
      const parent = ${JSON.stringify(parent)};
      let taken = 0;
      const end = Date.now() + 4000;
      while (Date.now() < end && !fs.existsSync(path.join(parent, 'stop'))) {
        for (const name of fs.readdirSync(parent)) {
          let fd;
          try { fd = fs.openSync(path.join(parent, name, 'owner'), 'r'); } catch { continue; }
          if (native.tryLock(fd, true)) { taken++; fs.rmSync(path.join(parent, name), { recursive: true, force: true }); }
          fs.closeSync(fd);
        }
      }
      console.log(taken);
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    sweeper.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const done = new Promise<number>((resolve) => sweeper.on('exit', (code) => resolve(code ?? 1)));
    await new Promise((r) => setTimeout(r, 200));
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
    expect(Number(out.trim())).toBe(0);
    expect(failed).toBe(0);
  });
});
