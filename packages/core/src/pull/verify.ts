// The verify step of a layer: what the unpack pass computed (blob digest and size, diffID) against
// what the manifest and config promise, and the truthful error when the pass itself failed.
import { FastpullError, isFastpullError } from '../errors.js';
import { hashFile } from '../content/store.js';
import type { Digest } from '../oci/digest.js';
import type { ImageLayer } from '../images/store.js';
import type { UnpackedLayer } from '../unpack/index.js';
import { BLOB_DIGEST_DETAIL, UNDIAGNOSED_CODES } from '../unpack/pool/pass-codes.js';

/**
 * Throws unless the pass read exactly the manifest's size (SIZE_MISMATCH), its blob digest is the
 * manifest's (DIGEST_MISMATCH; `onBadBlob` runs first) and its diffID is the config's
 * (DIGEST_MISMATCH). Only then may the layer be committed.
 */
export async function verifyUnpacked(
  layer: ImageLayer,
  r: Pick<UnpackedLayer, 'blobDigest' | 'diffID' | 'compressedSize' | 'uncompressedSize'>,
  onBadBlob: () => Promise<unknown>,
): Promise<void> {
  const what = `layer ${layer.digest}`;
  if (r.compressedSize !== layer.size) {
    throw new FastpullError('SIZE_MISMATCH', `${what}: blob is ${r.compressedSize} bytes, manifest says ${layer.size}`, {
      details: { want: layer.size, got: r.compressedSize },
    });
  }
  if (r.blobDigest !== layer.digest) {
    await onBadBlob();
    throw new FastpullError('DIGEST_MISMATCH', `${what}: blob digest mismatch: got ${r.blobDigest}, want ${layer.digest} (${r.compressedSize} bytes checked)`, {
      details: { want: layer.digest, got: r.blobDigest, size: r.compressedSize },
    });
  }
  if (r.diffID !== layer.diffID) {
    throw new FastpullError('DIGEST_MISMATCH', `${what}: diffID mismatch: uncompressed layer is ${r.diffID}, config says ${layer.diffID}`, {
      details: { want: layer.diffID, got: r.diffID, size: r.uncompressedSize },
    });
  }
}

/**
 * The error to report for a failed unpack pass. A blob that fails to decompress or extract may
 * simply be corrupt: then the truthful error is the digest mismatch, not whatever the decoder
 * tripped over (`onBadBlob` runs first). Hashing the blob again costs a read, on the failure path
 * only; a pass that freed part of the blob as it went has hashed the rest itself (its error's
 * BLOB_DIGEST_DETAIL). ABORTED, NO_SPACE and UNSUPPORTED_MEDIA_TYPE say all there is already.
 * `freedBytes`: how much of the blob's start the pass was allowed to free (the watermark's grant);
 * when some was and the error tells no digest (a worker thread that died, or the rest of the blob
 * could not be read), the file cannot tell either, and the error is returned as it is.
 */
export async function diagnoseUnpackFailure(
  e: unknown,
  blobPath: string,
  layer: ImageLayer,
  onBadBlob: () => Promise<unknown>,
  freedBytes = 0,
): Promise<unknown> {
  if (isFastpullError(e) && UNDIAGNOSED_CODES.has(e.code)) return e;
  let got: Digest;
  const told = isFastpullError(e) ? e.details[BLOB_DIGEST_DETAIL] : undefined;
  if (typeof told !== 'string' && freedBytes > 0) return e;
  try {
    got = typeof told === 'string' ? (told as Digest) : await hashFile(blobPath, layer.digest);
  } catch {
    return e;
  }
  if (got === layer.digest) return e;
  await onBadBlob();
  return new FastpullError('DIGEST_MISMATCH', `layer ${layer.digest}: blob digest mismatch: got ${got}, want ${layer.digest}`, {
    cause: e,
    details: { want: layer.digest, got },
  });
}
