// The signature kinds whose verifiers load from a directory of their own configuration. The Notary
// Project's verifier lives in ./notary/ and plugs in here: `loadNotationVerifier(dir)` reads a
// directory laid out as notation's (`trustpolicy.json` or `trustpolicy.oci.json`, `truststore/`),
// throws INVALID_ARGUMENT for anything unusable, and returns a SignatureVerifier of kind 'notation'.
import type { SignatureVerifier } from './types.js';

/** Loads the Notary Project verifier from a notation configuration directory; undefined while not built in. */
export const loadNotationVerifier: ((dir: string) => Promise<SignatureVerifier>) | undefined = undefined;
