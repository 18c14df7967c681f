import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FastpullError } from '../errors.js';
import { sha256Digest } from '../oci/digest.js';
import { sampleImage } from '../testing/sample.js';
import type { ImageLayer } from '../images/store.js';
import { UnpackPool } from '../unpack/index.js';
import { BLOB_DIGEST_DETAIL } from '../unpack/layer.js';
import { LayerDownload } from './download.js';
import { LayerProgress } from './progress.js';
import { downloadContext, freshStore, serve, workDir, type Served } from './pull.testkit.js';
import { diagnoseUnpackFailure, verifyUnpacked } from './verify.js';

const work = workDir('verify');
afterAll(() => work.cleanup());
const pool = new UnpackPool({ size: 1, threads: false });
afterAll(() => pool.close());

/** Downloads layer 0 from the registry into a fresh store and runs the unpack pass over it. */
async function downloadAndUnpack(served: Served, name: string) {
  const store = freshStore(work.dir, name);
  const layer = served.layers[0]!;
  const ctx = downloadContext(served, store);
  const download = await LayerDownload.start(ctx, layer, layer, new LayerProgress({ index: 0, ...layer }, undefined));
  const dest = join(work.dir, `${name}-fs`);
  mkdirSync(dest);
  const unpacked = await Promise.allSettled([
    download.done,
    pool.run({ blobPath: download.blobPath, mediaType: layer.mediaType, dest, follow: { watermark: download.watermark.buffer, size: layer.size } }),
  ]);
  ctx.watch.stop();
  return { store, layer, download, fetched: unpacked[0], unpacked: unpacked[1] };
}

describe('verifying an unpacked layer', () => {
  it('passes what matches the manifest and config, and names what does not', async () => {
    const served = await serve(await sampleImage(3, { layers: 1 }));
    try {
      const { layer, download, unpacked } = await downloadAndUnpack(served, 'good');
      if (unpacked.status !== 'fulfilled') throw unpacked.reason;
      const r = unpacked.value;
      let bad = 0;
      const onBadBlob = async () => void bad++;
      await verifyUnpacked(layer, r, onBadBlob);
      await expect(verifyUnpacked(layer, { ...r, compressedSize: r.compressedSize - 1 }, onBadBlob)).rejects.toMatchObject({
        code: 'SIZE_MISMATCH',
        details: { want: layer.size, got: layer.size - 1 },
      });
      const other = sha256Digest('other');
      await expect(verifyUnpacked(layer, { ...r, blobDigest: other }, onBadBlob)).rejects.toMatchObject({
        code: 'DIGEST_MISMATCH',
        details: { want: layer.digest, got: other },
      });
      expect(bad).toBe(1);
      await expect(verifyUnpacked(layer, { ...r, diffID: other }, onBadBlob)).rejects.toMatchObject({
        code: 'DIGEST_MISMATCH',
        details: { want: layer.diffID, got: other },
      });
      expect(bad).toBe(1); // a wrong diffID says nothing about the blob
      // The unpack pass failing over a good blob keeps its own error.
      const own = new FastpullError('HOSTILE_LAYER', 'a path escapes');
      expect(await diagnoseUnpackFailure(own, download.blobPath, layer, onBadBlob)).toBe(own);
      await download.close(false);
    } finally {
      await served.close();
    }
  });

  it('reports a corrupt download as the digest mismatch it is, not as the decoder error it caused', async () => {
    const image = await sampleImage(4, { layers: 1 });
    const served = await serve(image);
    try {
      served.reg.faults.corruptBlob = new Set([image.layers[0]!.digest]);
      const { layer, download, fetched, unpacked } = await downloadAndUnpack(served, 'corrupt');
      expect(fetched.status).toBe('fulfilled');
      // The flipped byte breaks the gzip stream: the decoder fails first.
      expect(unpacked.status).toBe('rejected');
      const failure: unknown = (unpacked as PromiseRejectedResult).reason;
      expect(failure).not.toMatchObject({ code: 'DIGEST_MISMATCH' });
      let bad = 0;
      const onBadBlob = async () => void bad++;
      expect(await diagnoseUnpackFailure(failure, download.blobPath, layer, onBadBlob)).toMatchObject({
        code: 'DIGEST_MISMATCH',
        details: { want: layer.digest },
        cause: failure,
      });
      expect(bad).toBe(1);
      // ABORTED says all there is: no re-hash.
      const aborted = new FastpullError('ABORTED', 'stopped');
      expect(await diagnoseUnpackFailure(aborted, download.blobPath, layer, onBadBlob)).toBe(aborted);
      expect(bad).toBe(1);
      await download.close(false);
    } finally {
      await served.close();
    }
  });

  it('takes the digest a pass that freed part of the blob computed, and never hashes a file whose start is gone', async () => {
    const blob = Buffer.from('the blob as the registry served it');
    const layer = { digest: sha256Digest(blob), size: blob.length } as ImageLayer;
    // The file on disk no longer holds the blob (its start was freed): hashing it would say mismatch.
    const freed = join(work.dir, 'freed');
    writeFileSync(freed, Buffer.alloc(blob.length));
    let bad = 0;
    const onBadBlob = async () => void bad++;
    const tarError = new FastpullError('INVALID_LAYER', 'bad tar header', { details: { [BLOB_DIGEST_DETAIL]: layer.digest } });
    expect(await diagnoseUnpackFailure(tarError, freed, layer, onBadBlob, 8192)).toBe(tarError);
    const other = sha256Digest('other bytes');
    const corrupt = new FastpullError('INVALID_LAYER', 'corrupt gzip stream', { details: { [BLOB_DIGEST_DETAIL]: other } });
    expect(await diagnoseUnpackFailure(corrupt, freed, layer, onBadBlob, 8192)).toMatchObject({
      code: 'DIGEST_MISMATCH',
      details: { want: layer.digest, got: other },
      cause: corrupt,
    });
    expect(bad).toBe(1);
    // The pass was allowed to free bytes but its error tells nothing (a worker thread that died):
    // the file cannot tell either.
    const died = new FastpullError('INTERNAL', 'unpack worker exited with status 1');
    expect(await diagnoseUnpackFailure(died, freed, layer, onBadBlob, 8192)).toBe(died);
    expect(bad).toBe(1);
    // No digest told and nothing freed: the file is hashed, as before.
    const plain = new FastpullError('INVALID_LAYER', 'corrupt gzip stream');
    expect(await diagnoseUnpackFailure(plain, freed, layer, onBadBlob)).toMatchObject({
      code: 'DIGEST_MISMATCH',
      details: { want: layer.digest, got: sha256Digest(Buffer.alloc(blob.length)) },
    });
  });
});
