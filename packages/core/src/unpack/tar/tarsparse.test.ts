// Tests of sparse maps on their own: PAX 0.1 and 1.0, old GNU extension blocks, and the checks on regions.
import { describe, expect, it } from 'vitest';
import { FastpullError } from '../../errors.js';
import { checkSparse, oldGnuSparseMap, paxSparse, type SparseBlocks } from './tarsparse.js';

const invalid = (m: string): FastpullError => new FastpullError('INVALID_LAYER', m);
const records = (r: Record<string, string>): Map<string, Buffer> => new Map(Object.entries(r).map(([k, v]) => [k, Buffer.from(v)]));

/** Blocks served from `list`, counting what was read. */
function blocksOf(list: Buffer[], maxBytes = 1 << 20): SparseBlocks & { read: number } {
  const out = {
    read: 0,
    maxBytes,
    next: async (): Promise<Buffer> => {
      const b = list[out.read++];
      if (b === undefined) throw invalid('truncated');
      return b;
    },
    tooLarge: (message: string): FastpullError => new FastpullError('INVALID_LAYER', `${message} (limit)`),
  };
  return out;
}

const block = (text: string): Buffer => {
  const b = Buffer.alloc(512);
  b.write(text, 'latin1');
  return b;
};

describe('paxSparse', () => {
  it('is undefined for an entry without sparse records', async () => {
    expect(await paxSparse(records({ path: 'x' }), 10, blocksOf([]), invalid, {})).toBeUndefined();
  });

  it('reads a 0.1 map from its records, with the real name', async () => {
    const got = await paxSparse(
      records({
        'GNU.sparse.major': '0',
        'GNU.sparse.minor': '1',
        'GNU.sparse.size': '100',
        'GNU.sparse.numblocks': '2',
        'GNU.sparse.map': '0,4,90,10',
        'GNU.sparse.name': 'real',
      }),
      14,
      blocksOf([]),
      invalid,
      {},
    );
    expect(got).toEqual({
      sparse: [
        { offset: 0, length: 4 },
        { offset: 90, length: 10 },
      ],
      size: 100,
      dataSize: 14,
      name: 'real',
    });
  });

  it('reads a 1.0 map from the data blocks before the data, and counts them off the data', async () => {
    const blocks = blocksOf([block('2\n0\n4\n90\n10\n')]);
    const got = await paxSparse(records({ 'GNU.sparse.major': '1', 'GNU.sparse.minor': '0', 'GNU.sparse.realsize': '100' }), 512 + 14, blocks, invalid, {});
    expect(got).toEqual({
      sparse: [
        { offset: 0, length: 4 },
        { offset: 90, length: 10 },
      ],
      size: 100,
      dataSize: 14,
      name: undefined,
    });
    expect(blocks.read).toBe(1);
  });

  it('refuses unknown formats, missing sizes, mismatched counts and maps past the data or the limit', async () => {
    const bad = async (r: Record<string, string>, dataSize = 0, blocks = blocksOf([])): Promise<string> =>
      paxSparse(records(r), dataSize, blocks, invalid, {}).then(
        () => 'accepted',
        (e: Error) => e.message,
      );
    expect(await bad({ 'GNU.sparse.major': '2', 'GNU.sparse.minor': '0' })).toBe('unsupported GNU sparse format 2.0');
    expect(await bad({ 'GNU.sparse.map': '0,1' })).toBe('a sparse file without its size');
    expect(await bad({ 'GNU.sparse.map': '0,1', 'GNU.sparse.size': '1', 'GNU.sparse.numblocks': '2' })).toBe(
      'GNU.sparse.map does not match GNU.sparse.numblocks',
    );
    expect(await bad({ 'GNU.sparse.major': '1', 'GNU.sparse.minor': '0', 'GNU.sparse.size': '9' }, 100)).toBe('the sparse map runs past the entry data');
    expect(await bad({ 'GNU.sparse.major': '1', 'GNU.sparse.minor': '0', 'GNU.sparse.size': '9' }, 4096, blocksOf([block('9\n'), block('1\n')], 512))).toBe(
      'a sparse map exceeds 512 bytes (limit)',
    );
  });
});

describe('oldGnuSparseMap', () => {
  it("reads the header's regions, then extension blocks while they say more follow", async () => {
    const header = Buffer.alloc(512);
    header.write('00000000000\0' + '00000000004\0', 386, 'latin1');
    header[482] = 1;
    const ext = Buffer.alloc(512);
    ext.write('00000000144\0' + '00000000002\0', 0, 'latin1');
    const blocks = blocksOf([ext]);
    expect(await oldGnuSparseMap(header, blocks, invalid, '"s"', {})).toEqual([
      { offset: 0, length: 4 },
      { offset: 100, length: 2 },
    ]);
    expect(blocks.read).toBe(1);
    ext[504] = 1; // says another follows: the limit stops it
    expect(await oldGnuSparseMap(header, blocksOf([ext, ext, ext], 1024), invalid, '"s"', {}).catch((e: Error) => e.message)).toBe(
      'the sparse map of entry "s" exceeds 1024 bytes (limit)',
    );
  });
});

describe('checkSparse', () => {
  it('takes ascending regions inside the file that add up to the data stored', () => {
    expect(() =>
      checkSparse(
        [
          { offset: 0, length: 4 },
          { offset: 10, length: 2 },
        ],
        12,
        6,
        invalid,
      ),
    ).not.toThrow();
    expect(() =>
      checkSparse(
        [
          { offset: 4, length: 4 },
          { offset: 2, length: 1 },
        ],
        12,
        5,
        invalid,
      ),
    ).toThrow('sparse region 2+1 overlaps another');
    expect(() => checkSparse([{ offset: 8, length: 8 }], 12, 8, invalid)).toThrow('lies outside the file of 12 bytes');
    expect(() => checkSparse([{ offset: 0, length: 4 }], 12, 5, invalid)).toThrow('the sparse map covers 4 bytes but the entry stores 5');
    expect(() => checkSparse([], -1, 0, invalid)).toThrow('sparse file size -1');
  });
});
