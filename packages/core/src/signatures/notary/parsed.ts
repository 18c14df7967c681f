// What either envelope format (JWS, COSE) yields once parsed: below the parsers and the verifier
// that picks one, so that neither parser imports the module that imports it.
import type { SignatureAlgorithm } from './chain.js';

export type SigningScheme = 'notary.x509' | 'notary.x509.signingAuthority';

/** What either envelope format yields once parsed (nothing here is trusted before `checkIntegrity`). */
export interface ParsedEnvelope {
  readonly algorithm: SignatureAlgorithm;
  readonly contentType: string;
  readonly scheme: SigningScheme;
  readonly signingTime: Date;
  readonly expiry?: Date;
  /** Names of the protected attributes marked critical. */
  readonly critical: readonly string[];
  /** Names of every protected attribute present. */
  readonly present: ReadonlySet<string>;
  readonly payload: Uint8Array;
  readonly certificates: readonly Uint8Array[];
  /** Whether an RFC 3161 timestamp countersignature is attached. */
  readonly timestamped: boolean;
  /** The bytes the signature covers, and the signature in the JWS/COSE (IEEE P1363 for ECDSA) form. */
  readonly signingInput: Uint8Array;
  readonly signature: Uint8Array;
}
