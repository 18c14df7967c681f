// The signature kinds whose verifiers load from a directory of their own configuration. The Notary
// Project's verifier lives in ./notary/: `loadNotationVerifier(dir)` reads a directory laid out as
// notation's (`trustpolicy.json` or `trustpolicy.oci.json`, `truststore/`), throws INVALID_ARGUMENT
// for anything unusable, and returns a SignatureVerifier of kind 'notation'. It is imported when a
// notation configuration is named, so its CBOR and ASN.1 libraries load only then.
import type { SignatureVerifier } from './types.js';

/** Loads the Notary Project verifier from a notation configuration directory. */
export async function loadNotationVerifier(dir: string): Promise<SignatureVerifier> {
  return (await import('./notary/verifier.js')).loadNotationVerifier(dir);
}
