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
    throw new FastpullError(
      'INVALID_DIGEST',
      `invalid digest ${JSON.stringify(value.slice(0, 140))}: want ${want} lowercase hex characters after "${algorithm}:"`,
    );
  }
  return { algorithm: algorithm as 'sha256' | 'sha512', hex, digest: value as Digest };
}

/**
 * Validates a digest and returns it typed as {@link Digest}. Throws INVALID_DIGEST when it is not one.
 * @example
 * const d: Digest = validateDigest(process.argv[2] ?? '');
 */
export function validateDigest(value: string): Digest {
  return parseDigest(value).digest;
}

/**
 * True when `value` is a valid digest (a string {@link parseDigest} accepts); never throws.
 * @example
 * if (isDigest(input)) console.log('pinned to', input);
 */
export function isDigest(value: unknown): value is Digest {
  if (typeof value !== 'string') return false;
  try {
    parseDigest(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * The sha256 digest of `data` (a string is hashed as UTF-8).
 * @example
 * sha256Digest('') // 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
 */
export function sha256Digest(data: Uint8Array | string): Digest {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/**
 * The digest of `data` computed with the algorithm of `like` (sha256 or sha512). Throws
 * INVALID_DIGEST when `like` is not a valid digest.
 * @example
 * const got = digestLike(desc.digest, bytes); // same algorithm as the descriptor's
 */
export function digestLike(like: Digest, data: Uint8Array): Digest {
  const { algorithm } = parseDigest(like);
  return `${algorithm}:${createHash(algorithm).update(data).digest('hex')}`;
}

/**
 * Checks bytes against their digest. Throws DIGEST_MISMATCH (with `want`, `got` and `size` in
 * details) unless `data` hashes to `want`; `what` starts the error message.
 * @example
 * verifyBytes(await store.content.readBytes(image.config.digest), image.config.digest, 'config');
 */
export function verifyBytes(data: Uint8Array, want: Digest, what: string): void {
  const got = digestLike(want, data);
  if (got !== want) {
    throw new FastpullError('DIGEST_MISMATCH', `${what}: digest mismatch: got ${got}, want ${want} (${data.byteLength} bytes checked)`, {
      details: { want, got, size: data.byteLength },
    });
  }
}
