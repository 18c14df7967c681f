// chainID: the identity of a stack of layers (OCI image spec, config.md "Layer ChainID").
import { createHash } from 'node:crypto';
import { FastpullError } from '../errors.js';
import { validateDigest, type Digest } from './digest.js';

/**
 * chainID(L1) = diffID(L1); chainID(L1..Ln) = sha256(chainID(L1..Ln-1) + " " + diffID(Ln)).
 * Returns one chainID per layer, bottom first; snapshots are named by them. Throws INVALID_DIGEST
 * for a bad diffID.
 * @example chainIDs([d1, d2]) // [d1, sha256(d1 + ' ' + d2)]
 */
export function chainIDs(diffIDs: readonly string[]): Digest[] {
  const out: Digest[] = [];
  for (const raw of diffIDs) {
    const diffID = validateDigest(raw);
    const parent = out[out.length - 1];
    out.push(parent === undefined ? diffID : `sha256:${createHash('sha256').update(`${parent} ${diffID}`).digest('hex')}`);
  }
  return out;
}

/**
 * The chainID of the whole stack (its top layer's). Throws INVALID_ARGUMENT for an empty list and
 * INVALID_DIGEST for a bad diffID.
 * @example
 * chainID(config.rootfs.diff_ids) === image.chainID
 */
export function chainID(diffIDs: readonly string[]): Digest {
  const ids = chainIDs(diffIDs);
  const top = ids[ids.length - 1];
  if (top === undefined) throw new FastpullError('INVALID_ARGUMENT', 'chainID of an empty layer list');
  return top;
}
