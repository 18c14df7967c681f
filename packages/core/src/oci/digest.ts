// Content digests: `algorithm:hex`, validated before any use (a digest names files on disk).
import { createHash } from 'node:crypto';
import { FastpullError } from '../errors.js';

/** A validated digest string such as `sha256:<64 hex>`. */
export type Digest = `${string}:${string}`;

const HEX_LENGTH: Readonly<Record<string, number>> = { sha256: 64, sha512: 128 };

/**
 * Validates a digest: a known algorithm and lowercase hex of exactly its length.
 * @example parseDigest('sha256:' + 'a'.repeat(64)) // { algorithm: 'sha256', hex: 'aaa...' }
 */
export function parseDigest(value: string): { algorithm: 'sha256' | 'sha512'; hex: string; digest: Digest } {
  if (typeof value !== 'string') throw new FastpullError('INVALID_DIGEST', `invalid digest: not a string`);
  const colon = value.indexOf(':');
  const algorithm = colon > 0 ? value.slice(0, colon) : '';
  const hex = value.slice(colon + 1);
  const want = HEX_LENGTH[algorithm];
  if (want === undefined) {
    throw new FastpullError('INVALID_DIGEST', `invalid digest ${JSON.stringify(value.slice(0, 80))}: unsupported algorithm ${JSON.stringify(algorithm)}`);
  }
  if (hex.length !== want || !/^[0-9a-f]+$/.test(hex)) {
    throw new FastpullError('INVALID_DIGEST', `invalid digest ${JSON.stringify(value.slice(0, 140))}: want ${want} lowercase hex characters after "${algorithm}:"`);
  }
  return { algorithm: algorithm as 'sha256' | 'sha512', hex, digest: value as Digest };
}

/** Validates and returns the digest. */
export function validateDigest(value: string): Digest {
  return parseDigest(value).digest;
}

/** True when `value` is a valid digest. */
export function isDigest(value: unknown): value is Digest {
  if (typeof value !== 'string') return false;
  try {
    parseDigest(value);
    return true;
  } catch {
    return false;
  }
}

/** sha256 digest of bytes. */
export function sha256Digest(data: Uint8Array | string): Digest {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Digest of `data` computed with the same algorithm as `like`. */
export function digestLike(like: Digest, data: Uint8Array): Digest {
  const { algorithm } = parseDigest(like);
  return `${algorithm}:${createHash(algorithm).update(data).digest('hex')}`;
}

/** Throws DIGEST_MISMATCH unless `data` hashes to `want`. */
export function verifyBytes(data: Uint8Array, want: Digest, what: string): void {
  const got = digestLike(want, data);
  if (got !== want) {
    throw new FastpullError('DIGEST_MISMATCH', `${what}: digest mismatch: got ${got}, want ${want} (${data.byteLength} bytes checked)`, {
      details: { want, got, size: data.byteLength },
    });
  }
}
