// node:zlib's gunzip of one file to nowhere, the way a Node puller would stream it (64 KiB chunks).
import { createReadStream } from 'node:fs';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';

const file = process.argv[2];
if (!file) throw new Error('usage: inflate-child.js FILE.gz');
await pipeline(
  createReadStream(file, { highWaterMark: 1024 * 1024 }),
  createGunzip({ chunkSize: 64 * 1024 }),
  new Writable({
    write(_chunk: Buffer, _enc, cb) {
      cb();
    },
  }),
);
