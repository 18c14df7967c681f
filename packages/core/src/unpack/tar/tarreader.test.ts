import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { chunksOf, makeTar, type Entry } from './tar.testkit.js';
import { type ParsedTarEntry, TarReader } from './tarreader.js';

const options = { what: 'test', maxHeaderBytes: 64 * 1024, maxTarBytes: 1 << 26 };

interface Read {
  entries: Array<
    Pick<ParsedTarEntry, 'type' | 'flag' | 'name' | 'linkname' | 'mode' | 'uid' | 'gid' | 'size' | 'mtime' | 'offset'> & {
      pax: string[];
      data: string | undefined;
    }
  >;
  /** Entries nextSync gave, and data takeData gave. */
  sync: number;
  syncData: number;
}

/**
 * Reads `tar` in `chunk`-byte pieces: with `sync`, each entry by nextSync when it can and each
 * read body by takeData when it can, else (and always without `sync`) by next() and data().
 * The body of every entry whose index is in `readBodies` is read; the rest are skipped.
 */
async function readAll(tar: Buffer, chunk: number, sync: boolean, readBodies: (i: number) => boolean): Promise<Read> {
  const reader = new TarReader(chunksOf(tar, chunk), options);
  const out: Read = { entries: [], sync: 0, syncData: 0 };
  for (let i = 0; ; i++) {
    let e = sync ? reader.nextSync() : undefined;
    if (e !== undefined && e !== null) out.sync++;
    if (e === undefined) e = await reader.next();
    if (e === null) break;
    let data: string | undefined;
    if (readBodies(i)) {
      let pieces = sync ? reader.takeData() : undefined;
      if (pieces !== undefined) out.syncData++;
      if (pieces === undefined) {
        pieces = [];
        for await (const p of reader.data()) pieces.push(p);
      }
      data = Buffer.concat(pieces).toString('latin1');
    }
    const { type, flag, name, linkname, mode, uid, gid, size, mtime, offset } = e;
    out.entries.push({ type, flag, name, linkname, mode, uid, gid, size, mtime, offset, pax: [...e.pax.keys()].sort(), data });
  }
  await reader.drain();
  expect(reader.bytesRead).toBe(tar.length);
  return out;
}

const entryArb: fc.Arbitrary<Entry> = fc.oneof(
  fc.record({ name: fc.stringMatching(/^[a-z]{1,12}$/), body: fc.uint8Array({ maxLength: 3000 }).map((b) => Buffer.from(b)) }),
  // Over 100 bytes: tar-stream writes a PAX header (or a ustar prefix) for the name.
  fc.record({ name: fc.stringMatching(/^[a-z]{1,8}$/).map((s) => `${'d/'.repeat(60)}${s}`), body: fc.string({ maxLength: 700 }) }),
  fc.record({ name: fc.stringMatching(/^[a-z]{1,12}$/), type: fc.constant('directory' as const) }),
  fc.record({ name: fc.stringMatching(/^[a-z]{1,12}$/), type: fc.constant('symlink' as const), linkname: fc.stringMatching(/^[a-z/]{1,40}$/) }),
  fc.record({ name: fc.stringMatching(/^[a-z]{1,12}$/), body: fc.string({ maxLength: 100 }), pax: fc.constant({ 'SCHILY.xattr.user.k': 'v' }) }),
);

describe('TarReader', () => {
  it('reads the same entries and bodies with nextSync and takeData as with next and data, whatever the chunking', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entryArb, { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 1, max: 9000 }),
        fc.integer({ min: 0, max: 3 }),
        async (entries, chunk, skipEvery) => {
          const tar = await makeTar(entries);
          const bodies = (i: number) => skipEvery === 0 || i % (skipEvery + 1) !== 0;
          const plain = await readAll(tar, chunk, false, bodies);
          const fast = await readAll(tar, chunk, true, bodies);
          expect(fast.entries).toEqual(plain.entries);
          expect(plain.entries).toHaveLength(entries.length);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('takes plain headers and buffered bodies without a promise, and leaves PAX headers and the end to next()', async () => {
    const tar = await makeTar([
      { name: 'a', body: 'alpha' },
      { name: 'dir', type: 'directory' },
      { name: 'x', body: 'with records', pax: { 'SCHILY.xattr.user.k': 'v' } },
      { name: 'b', body: Buffer.alloc(2000, 7) },
    ]);
    // One chunk: everything is buffered once the first read has pulled it.
    const r = await readAll(tar, tar.length, true, () => true);
    expect(r.entries.map((e) => e.name)).toEqual(['a', 'dir', 'x', 'b']);
    // 'a' comes by next() (nothing is buffered before the first pull), 'dir' and 'b' by nextSync, 'x' (PAX) by next().
    expect(r.sync).toBe(2);
    expect(r.syncData).toBe(4); // every body, a's too: the first pull brought all of the tar
    expect(r.entries[2]!.pax).toContain('SCHILY.xattr.user.k');
    expect(r.entries[3]!.data).toBe(Buffer.alloc(2000, 7).toString('latin1'));
  });

  it('takes nothing when the header or the body is not all buffered yet', async () => {
    const tar = await makeTar([
      { name: 'a', body: 'x'.repeat(80) },
      { name: 'b', body: 'y'.repeat(3000) },
    ]);
    // 600-byte pieces: the first pull brings a's header and body, not the rest of its padding.
    const reader = new TarReader(chunksOf(tar, 600), options);
    expect(reader.nextSync()).toBeUndefined();
    const a = await reader.next();
    expect(a?.name).toBe('a');
    expect(
      reader
        .takeData()
        ?.map((p) => p.toString())
        .join(''),
    ).toBe('x'.repeat(80));
    expect(reader.nextSync()).toBeUndefined(); // b's header starts at byte 1024
    const b = await reader.next();
    expect(b?.name).toBe('b');
    expect(reader.takeData()).toBeUndefined(); // 3000 bytes, few of them buffered
    let got = '';
    for await (const p of reader.data()) got += p.toString();
    expect(got).toBe('y'.repeat(3000));
    expect(reader.nextSync()).toBeUndefined(); // the end of the archive is next()'s
    expect(await reader.next()).toBeNull();
  });

  it('fails a corrupt header read by nextSync with INVALID_LAYER, as next() does', async () => {
    const tar = await makeTar([
      { name: 'a', body: 'alpha' },
      { name: 'b', body: 'beta' },
    ]);
    tar[1024 + 148] = tar[1024 + 148]! ^ 1; // b's checksum
    for (const sync of [false, true]) {
      const err = await readAll(tar, tar.length, sync, () => true).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isFastpullError(err) && err.code, `sync ${sync}`).toBe('INVALID_LAYER');
      expect((err as Error).message).toContain('header at byte 1024: bad checksum');
    }
  });
});
