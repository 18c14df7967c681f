import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { chainID, chainIDs } from './chainid.js';

const d = (c: string) => `sha256:${c.repeat(64)}`;

describe('chainID', () => {
  it('is the diffID for one layer and the hash of "parent diffID" above it', () => {
    const [a, b, c] = [d('a'), d('b'), d('c')];
    const ab = `sha256:${createHash('sha256').update(`${a} ${b}`).digest('hex')}`;
    const abc = `sha256:${createHash('sha256').update(`${ab} ${c}`).digest('hex')}`;
    expect(chainIDs([a, b, c])).toEqual([a, ab, abc]);
    expect(chainID([a, b, c])).toBe(abc);
  });

  it('depends on order', () => {
    expect(chainID([d('a'), d('b')])).not.toBe(chainID([d('b'), d('a')]));
  });

  it('matches a value computed independently', () => {
    // printf '<a> <b>' | sha256sum
    const a = 'sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef';
    const b = 'sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8c7c22955b46d4';
    expect(chainID([a, b])).toBe('sha256:cd656746ac8598066faede83b62e2f78db0cfee0b31dca8d5496ac3d0e45391d');
  });

  it('rejects invalid diffIDs and empty stacks', () => {
    expect(() => chainIDs(['sha256:xyz'])).toThrowError(expect.objectContaining({ code: 'INVALID_DIGEST' }) as Error);
    expect(() => chainID([])).toThrowError(expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error);
  });
});
