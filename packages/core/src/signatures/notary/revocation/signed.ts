// Signatures of the signed structures revocation reads (an OCSP response's ResponseData, a CRL's
// TBSCertList): the bytes as received, the algorithm the structure names, and an issuer's key, checked
// with node:crypto. Only the algorithms CAs sign these with today are accepted; SHA-1 is not.
import { verify, type KeyObject } from 'node:crypto';
import type { AlgorithmIdentifier } from '@peculiar/asn1-x509';

/** Algorithm OID -> the hash node:crypto names (null: the algorithm has its own, as Ed25519). */
const ALGORITHMS: Readonly<Record<string, { hash: string | null; ecdsa?: true }>> = {
  '1.2.840.113549.1.1.11': { hash: 'sha256' },
  '1.2.840.113549.1.1.12': { hash: 'sha384' },
  '1.2.840.113549.1.1.13': { hash: 'sha512' },
  '1.2.840.10045.4.3.2': { hash: 'sha256', ecdsa: true },
  '1.2.840.10045.4.3.3': { hash: 'sha384', ecdsa: true },
  '1.2.840.10045.4.3.4': { hash: 'sha512', ecdsa: true },
  '1.3.101.112': { hash: null },
};

/** Hash algorithm OIDs of an OCSP CertID -> node:crypto's name. */
export const CERT_ID_HASHES: Readonly<Record<string, string>> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};

/**
 * Whether `signature` over `signed` verifies with `key` under `algorithm`; a string saying why not
 * when the algorithm is not one accepted here.
 */
export function checkSigned(signed: ArrayBuffer | Uint8Array, algorithm: AlgorithmIdentifier, signature: ArrayBuffer, key: KeyObject): boolean | string {
  const alg = ALGORITHMS[algorithm.algorithm];
  if (!alg) return `signature algorithm ${algorithm.algorithm} is not supported`;
  const data = new Uint8Array(signed instanceof Uint8Array ? signed : new Uint8Array(signed));
  const sig = new Uint8Array(signature);
  try {
    if (alg.ecdsa) return verify(alg.hash, data, { key, dsaEncoding: 'der' }, sig);
    return verify(alg.hash, data, key, sig);
  } catch {
    // A key of another type than the algorithm (an RSA algorithm, an EC key) does not verify.
    return false;
  }
}
