// A minimal, deterministic ustar writer that streams to a file descriptor and hashes what it writes:
// enough for generated benchmark layers (regular files, directories, symlinks) of any size, without
// holding a layer in memory.
import { createHash, type Hash } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';

const BLOCK = 512;
const FLUSH_AT = 4 * 1024 * 1024;
/** 2020-01-01T00:00:00Z, as the core test builder writes. */
export const TAR_MTIME = 1_577_836_800;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function splitName(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  throw new Error(`tar path too long for ustar: ${path}`);
}

function header(path: string, type: '0' | '2' | '5', size: number, mode: number, linkname = ''): Buffer {
  const h = Buffer.alloc(BLOCK);
  const { name, prefix } = splitName(path);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(TAR_MTIME, 12), 136, 'ascii');
  h.write('        ', 148, 'ascii');
  h.write(type, 156, 'ascii');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write('root', 265, 'ascii');
  h.write('root', 297, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 'ascii');
  return h;
}

/** Writes a tar to a file; `finish()` returns its SHA-256 (hex) and size. */
export class TarWriter {
  private readonly fd: number;
  private readonly hash: Hash = createHash('sha256');
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private size = 0;
  private readonly dirs = new Set<string>();

  constructor(path: string) {
    this.fd = openSync(path, 'w');
  }

  private out(b: Buffer): void {
    this.hash.update(b);
    this.size += b.byteLength;
    this.pending.push(b);
    this.pendingBytes += b.byteLength;
    if (this.pendingBytes >= FLUSH_AT) this.flush();
  }

  private flush(): void {
    const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    for (let off = 0; off < all.byteLength;) off += writeSync(this.fd, all, off);
    this.pending = [];
    this.pendingBytes = 0;
  }

  /** Writes the parent directories of `path` that were not written yet (mode 0755). */
  private parents(path: string): void {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) this.dir(parts.slice(0, i).join('/'));
  }

  dir(path: string, mode = 0o755): void {
    if (this.dirs.has(path)) return;
    this.parents(path);
    this.dirs.add(path);
    this.out(header(`${path}/`, '5', 0, mode));
  }

  symlink(path: string, target: string): void {
    this.parents(path);
    this.out(header(path, '2', 0, 0o777, target));
  }

  /** A regular file of `size` bytes; `fill` must emit exactly `size` bytes through `write`. */
  file(path: string, size: number, mode: number, fill: (write: (b: Buffer) => void) => void): void {
    this.parents(path);
    this.out(header(path, '0', size, mode));
    let written = 0;
    fill((b) => {
      written += b.byteLength;
      this.out(b);
    });
    if (written !== size) throw new Error(`tar entry ${path}: wrote ${written} bytes, declared ${size}`);
    const pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (pad > 0) this.out(Buffer.alloc(pad));
  }

  finish(): { sha256: string; size: number } {
    this.out(Buffer.alloc(2 * BLOCK));
    this.flush();
    closeSync(this.fd);
    return { sha256: this.hash.digest('hex'), size: this.size };
  }
}
