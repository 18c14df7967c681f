// Helpers shared by the applyLayer tests (not part of the build): raw tar headers and PAX records, and a sandbox per test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const isRoot = process.getuid?.() === 0;

export const hasGnuTar = ((): boolean => {
  try {
    return execFileSync('tar', ['--version'], { encoding: 'utf8' }).includes('GNU tar');
  } catch {
    return false;
  }
})();

/** A raw ustar header block, for tars tar-stream's packer cannot write (binary PAX values, odd names). */
export function rawHeader(name: string | Buffer, typeflag: string, size: number, mode = 0o644, dev: readonly [number, number] = [0, 0]): Buffer {
  const b = Buffer.alloc(512);
  if (Buffer.isBuffer(name)) name.copy(b, 0, 0, 100);
  else b.write(name, 0, 100, 'utf8');
  b.write(`${mode.toString(8).padStart(7, '0')}\0`, 100);
  b.write('0000000\0', 108);
  b.write('0000000\0', 116);
  b.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  b.write(`${(1_600_000_000).toString(8).padStart(11, '0')}\0`, 136);
  b.write(typeflag, 156);
  b.write('ustar\x0000', 257, 'latin1');
  b.write(`${dev[0].toString(8).padStart(7, '0')}\0`, 329);
  b.write(`${dev[1].toString(8).padStart(7, '0')}\0`, 337);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}

/** One PAX record, `LEN key=value\n`, where LEN counts itself. */
export function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

/** A fresh sandbox: `dest` (its `fs`) is the empty snapshot directory applyLayer writes into. */
export function makeSandbox(): { sandbox: string; dest: string } {
  const sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-apply-'));
  const dest = path.join(sandbox, 'fs');
  fs.mkdirSync(dest);
  return { sandbox, dest };
}

export function removeSandbox(sandbox: string): void {
  if (!isRoot) execFileSync('chmod', ['-R', 'u+w', sandbox]); // layers leave 0555 directories; symlinks are not followed
  fs.rmSync(sandbox, { recursive: true, force: true });
}

/** Everything in the sandbox besides the snapshot dir (and the test's own `outside` and `again`): must stay empty. */
export function outsideDest(sandbox: string): string[] {
  return fs.readdirSync(sandbox).filter((n) => n !== 'fs' && n !== 'outside' && n !== 'again');
}
