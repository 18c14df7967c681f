// Notary Project signatures: the trust policy and trust store of a notation configuration directory,
// JWS and COSE envelopes, and the verification workflow that turns them into a verdict.
export { MAX_CHAIN_CERTIFICATES } from './chain.js';
export { COSE_MEDIA_TYPE, JWS_MEDIA_TYPE, MAX_ENVELOPE_BYTES } from './envelope.js';
export { applicablePolicy, loadNotaryConfig, parseTrustPolicy, POLICY_FILES } from './policy.js';
export { MAX_SIGNATURES_EVALUATED, verifyNotary, type VerifyNotaryOptions } from './verify.js';
export type {
  Action,
  CheckResult,
  LevelName,
  NotaryConfig,
  NotarySignature,
  NotaryVerdict,
  Outcome,
  SignatureResult,
  TargetDescriptor,
  TrustPolicy,
  Validation,
} from './types.js';
export { fetchNotarySignatures, NOTARY_ARTIFACT_TYPE, type UnreadableSignature } from './fetch.js';
