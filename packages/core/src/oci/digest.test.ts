import { describe, expect, it } from 'vitest';
import { isDigest, parseDigest, sha256Digest, verifyBytes } from './digest.js';

describe('digests', () => {
  it('accepts sha256 and sha512 of the right length', () => {
    expect(parseDigest(`sha256:${'0'.repeat(64)}`).hex).toHaveLength(64);
    expect(parseDigest(`sha512:${'f'.repeat(128)}`).algorithm).toBe('sha512');
  });

  it.each([
    `sha256:${'0'.repeat(63)}`,
    `sha256:${'0'.repeat(65)}`,
    `sha256:${'g'.repeat(64)}`,
    `SHA256:${'0'.repeat(64)}`,
    `sha256:${'0'.repeat(62)}/.`,
    `sha512:${'0'.repeat(64)}`,
    `sha256:../../${'0'.repeat(58)}`,
    'sha256',
    ':abc',
    '',
  ])('rejects %j with INVALID_DIGEST', (d) => {
    expect(() => parseDigest(d)).toThrowError(expect.objectContaining({ code: 'INVALID_DIGEST' }) as Error);
    expect(isDigest(d)).toBe(false);
  });

  it('verifies bytes and reports what it got', () => {
    const data = Buffer.from('hello');
    const d = sha256Digest(data);
    expect(d).toBe('sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824');
    expect(() => verifyBytes(data, d, 'x')).not.toThrow();
    expect(() => verifyBytes(Buffer.from('hellp'), d, 'x')).toThrowError(expect.objectContaining({ code: 'DIGEST_MISMATCH' }) as Error);
  });
});
