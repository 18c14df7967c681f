// Image signatures: the frame (types.ts), discovery of signature artifacts (discover.ts), the gate a
// pull waits on before it records an image (gate.ts), containers policy.json (policy.ts) with the
// Sigstore/cosign verifier (sigstore/), and the settings that name the user's policy files.
export type {
  DiscoveredSignature,
  ImageSignatures,
  SignatureCheck,
  SignatureKind,
  SignatureLevel,
  SignatureLimits,
  SignatureManifest,
  SignatureOutcome,
  SignatureSource,
  SignatureSubject,
  SignatureVerdict,
  SignatureVerifier,
  VerifyContext,
} from './types.js';
export {
  COSIGN_SIMPLESIGNING,
  NOTARY_SIGNATURE,
  SIGNATURE_ARTIFACT_TYPES,
  SIGSTORE_BUNDLE_V03,
  discoverSignatures,
  parseSignatureManifest,
  type Discovery,
  type DiscoverWhere,
  type SignatureRegistry,
} from './discover.js';
export {
  checkSignatures,
  DEFAULT_SIGNATURE_LIMITS,
  DEFAULT_MAX_ARTIFACT_BYTES,
  DEFAULT_MAX_SIGNATURES,
  DEFAULT_SIGNATURE_TIMEOUT_MS,
  gateCovers,
  verdictLine,
  type SignatureGate,
} from './gate.js';
export {
  containersPolicyFor,
  loadContainersPolicy,
  parseContainersPolicy,
  policyScopes,
  type AppliedPolicy,
  type ContainersPolicy,
  type PolicyRequirement,
  type SignedIdentity,
  type SigstoreRequirement,
} from './policy.js';
export { SigstoreVerifier } from './sigstore/verifier.js';
export { loadSignatureVerifiers, SIGNATURE_ENV, signaturesEnabled, signatureSettingsFromEnv, type SignatureSettings } from './settings.js';
