// The Notary Project verifier's words: trust policy statements, validations, levels and the verdict.
// Types mirror the trust policy document of the Notary Project specification (trust-store-trust-policy.md,
// version 1.0) and its signature envelopes (signature-envelope-jws.md, signature-envelope-cose.md).

/** The validations of one signature, in the order the specification runs them. */
export const VALIDATIONS = ['integrity', 'authenticity', 'authenticTimestamp', 'expiry', 'revocation'] as const;
export type Validation = (typeof VALIDATIONS)[number];

/** What a failure of a validation does: refuses the signature, is logged, or is not checked. */
export type Action = 'enforce' | 'log' | 'skip';

export type LevelName = 'strict' | 'permissive' | 'audit' | 'skip';

/** A level with its overrides applied: the action for each validation. */
export interface Level {
  readonly name: LevelName;
  readonly actions: Readonly<Record<Validation, Action>>;
}

/** One statement of trustpolicy.json, validated. */
export interface TrustPolicy {
  readonly name: string;
  readonly registryScopes: readonly string[];
  readonly level: Level;
  /** `afterCertExpiry` or `always` (the default): when a timestamp countersignature is required. */
  readonly verifyTimestamp: 'always' | 'afterCertExpiry';
  /** `TYPE:NAME` with TYPE ca, signingAuthority or tsa. */
  readonly trustStores: readonly string[];
  /** `*`, or `x509.subject:` DNs parsed into attribute -> value maps. */
  readonly trustedIdentities: '*' | readonly ReadonlyMap<string, string>[];
}

/** A notation configuration directory, loaded: its trust policy and the certificates it names. */
export interface NotaryConfig {
  /** The directory read. */
  readonly dir: string;
  /** The policy file read: trustpolicy.oci.json or trustpolicy.json. */
  readonly file: string;
  readonly policies: readonly TrustPolicy[];
  /** DER certificates by trust store (`ca:NAME`, `signingAuthority:NAME`, `tsa:NAME`). */
  readonly stores: ReadonlyMap<string, readonly Uint8Array[]>;
}

/** The manifest a signature must name, exactly. */
export interface TargetDescriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
}

/** A signature found for the manifest: the envelope blob of one signature manifest. */
export interface NotarySignature {
  /** The signature manifest's digest, to name it in the verdict. */
  readonly digest: string;
  /** `application/jose+json` or `application/cose`. */
  readonly mediaType: string;
  readonly envelope: Uint8Array;
}

/** One validation of one signature: passed, or failed with the reason, and what the level does with it. */
export interface CheckResult {
  readonly validation: Validation;
  readonly action: Action;
  readonly ok: boolean;
  readonly reason?: string;
}

/** What the verifier concluded about one signature. */
export interface SignatureResult {
  readonly digest: string;
  /** True when no enforced validation failed. */
  readonly accepted: boolean;
  /** The validations run, up to the first enforced failure. */
  readonly checks: readonly CheckResult[];
}

/**
 * - verified: a signature passed every validation.
 * - logged: a signature was accepted with logged failures, or (audit) none was present.
 * - skipped: the policy's level is skip, or no statement covers the repository.
 * - invalid: signatures were present and none was accepted.
 * - missing: no signature was present and the level requires one.
 */
export type Outcome = 'verified' | 'logged' | 'skipped' | 'invalid' | 'missing';

export interface NotaryVerdict {
  readonly kind: 'notation';
  /** The statement that applied; undefined when none covers the repository. */
  readonly policy?: string;
  readonly level?: LevelName;
  readonly outcome: Outcome;
  /** True when the outcome lets the image be used: verified, logged or skipped. */
  readonly trusted: boolean;
  /** The signature that decided a verified or logged outcome. */
  readonly signature?: string;
  readonly signatures: readonly SignatureResult[];
  /** One line for logs and errors: which check failed for which signature, or why none counted. */
  readonly reason?: string;
}
