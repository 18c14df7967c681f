// Certificate chains of Notary Project signatures: the certificate requirements of the specification
// (signature-specification.md, "Certificate Requirements") checked the way notation checks them: leaf
// first, each certificate issued by the next, a self-signed root last, key usage and basic constraints
// per position, code signing and no other purpose in the leaf's extended key usage, supported keys.
import { X509Certificate, type KeyObject } from 'node:crypto';
import { formatName, readSubject, type SubjectRDNs } from './dn.js';
import {
  basicConstraints as readBasicConstraints,
  certificateExtensions,
  extendedKeyUsages,
  findExtension,
  KEY_USAGE,
  keyUsageFlags,
  OID,
  subjectAttributeTypes,
  type CertificateExtension,
} from './x509.js';

/** Most certificates one envelope may carry: real chains are 2-4 long; each costs a signature check. */
export const MAX_CHAIN_CERTIFICATES = 10;

/** A JWS/COSE signature algorithm, named as JWS names it. */
export type SignatureAlgorithm = 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512';

/** One certificate of a chain, parsed once. */
export interface ChainCertificate {
  readonly der: Uint8Array;
  readonly x509: X509Certificate;
  /** The subject's RDNs, for trusted identities. */
  readonly subjectRDNs: SubjectRDNs;
  /** The subject in RFC 4514 text, for messages. */
  readonly subject: string;
  readonly extensions: readonly CertificateExtension[];
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export function parseCertificate(der: Uint8Array): ChainCertificate {
  const x509 = new X509Certificate(der);
  const notBefore = new Date(x509.validFrom);
  const notAfter = new Date(x509.validTo);
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime()))
    throw new Error(`the certificate's validity (${x509.validFrom} to ${x509.validTo}) cannot be read`);
  const subjectRDNs = readSubject(x509.subject, subjectAttributeTypes(der));
  return { der, x509, subjectRDNs, subject: formatName(subjectRDNs), notBefore, notAfter, extensions: certificateExtensions(der) };
}

/** The signature algorithm the specification pairs with a certificate's key; undefined for a key it does not allow. */
export function keyAlgorithm(key: KeyObject): SignatureAlgorithm | undefined {
  const d = key.asymmetricKeyDetails;
  if (key.asymmetricKeyType === 'rsa') return ({ 2048: 'PS256', 3072: 'PS384', 4096: 'PS512' } as const)[d?.modulusLength as 2048];
  if (key.asymmetricKeyType === 'ec') return ({ prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' } as const)[d?.namedCurve as 'prime256v1'];
  return undefined;
}

function keyUsage(cert: ChainCertificate): number | string {
  const ext = findExtension(cert.extensions, OID.keyUsage);
  if (!ext) return `certificate ${cert.subject}: key usage extension must be present`;
  if (!ext.critical) return `certificate ${cert.subject}: key usage extension must be marked critical`;
  return keyUsageFlags(ext.value);
}

function basicConstraints(cert: ChainCertificate): { cA: boolean; pathLen?: number } | undefined {
  const ext = findExtension(cert.extensions, OID.basicConstraints);
  return ext && readBasicConstraints(ext.value);
}

const EXCLUDED_EKUS: Readonly<Record<string, string>> = {
  [OID.serverAuth]: 'server authentication',
  [OID.clientAuth]: 'client authentication',
  [OID.emailProtection]: 'email protection',
  [OID.timeStamping]: 'time stamping',
  [OID.ocspSigning]: 'OCSP signing',
};

function checkLeaf(cert: ChainCertificate): string | undefined {
  if (basicConstraints(cert)?.cA) return `leaf certificate ${cert.subject}: basic constraints must not say CA`;
  const ku = keyUsage(cert);
  if (typeof ku === 'string') return ku;
  if ((ku & KEY_USAGE.digitalSignature) === 0) return `leaf certificate ${cert.subject}: key usage must include digital signature`;
  const forbidden =
    KEY_USAGE.keyEncipherment |
    KEY_USAGE.dataEncipherment |
    KEY_USAGE.keyAgreement |
    KEY_USAGE.keyCertSign |
    KEY_USAGE.cRLSign |
    KEY_USAGE.encipherOnly |
    KEY_USAGE.decipherOnly;
  if ((ku & forbidden) !== 0) return `leaf certificate ${cert.subject}: key usage must be digital signature only`;
  const eku = findExtension(cert.extensions, OID.extKeyUsage);
  if (eku) {
    for (const oid of extendedKeyUsages(eku.value)) {
      const purpose = EXCLUDED_EKUS[oid];
      if (purpose) return `leaf certificate ${cert.subject}: extended key usage must not include ${purpose} (code signing certificates only)`;
    }
  }
  if (!keyAlgorithm(cert.x509.publicKey)) return `leaf certificate ${cert.subject}: its key is not RSA 2048/3072/4096 or EC P-256/P-384/P-521`;
  return undefined;
}

function checkCA(cert: ChainCertificate, expectedPathLen: number): string | undefined {
  const bc = basicConstraints(cert);
  if (!bc?.cA) return `certificate ${cert.subject}: basic constraints must be present and say CA`;
  if (bc.pathLen !== undefined && bc.pathLen < expectedPathLen)
    return `certificate ${cert.subject}: path length ${bc.pathLen} is less than the ${expectedPathLen} below it`;
  const ku = keyUsage(cert);
  if (typeof ku === 'string') return ku;
  if ((ku & KEY_USAGE.keyCertSign) === 0) return `certificate ${cert.subject}: key usage must include certificate signing`;
  return undefined;
}

function issuedBy(cert: ChainCertificate, issuer: ChainCertificate): boolean {
  return cert.x509.checkIssued(issuer.x509) && cert.x509.verify(issuer.x509.publicKey);
}

function outsideValidity(cert: ChainCertificate, at: Date): boolean {
  return at < cert.notBefore || at > cert.notAfter;
}

/**
 * Checks a chain (leaf first) against the certificate requirements; with `signingTime`, also that each
 * certificate was valid then. Returns what is wrong, or undefined.
 */
export function checkCodeSigningChain(chain: readonly ChainCertificate[], signingTime?: Date): string | undefined {
  if (chain.length === 0) return 'the envelope carries no certificate';
  if (chain.length > MAX_CHAIN_CERTIFICATES) return `the envelope carries ${chain.length} certificates, more than ${MAX_CHAIN_CERTIFICATES}`;
  for (const [i, cert] of chain.entries()) {
    if (signingTime && outsideValidity(cert, signingTime)) return `certificate ${cert.subject} was not valid at the signing time ${signingTime.toISOString()}`;
    const selfSigned = issuedBy(cert, cert);
    if (chain.length === 1) {
      if (!selfSigned) return `certificate ${cert.subject} is alone in the chain but not self-signed`;
    } else if (i === chain.length - 1) {
      if (!selfSigned) return `root certificate ${cert.subject} is not self-signed: the chain must end with its root`;
    } else {
      if (selfSigned) return `certificate ${cert.subject} is self-signed but is not the chain's root`;
      if (!issuedBy(cert, chain[i + 1]!)) return `certificate ${cert.subject} is not issued by ${chain[i + 1]!.subject}`;
    }
    let problem: string | undefined;
    try {
      problem = i === 0 ? checkLeaf(cert) : checkCA(cert, i - 1);
    } catch (e) {
      problem = `certificate ${cert.subject}: an extension cannot be read: ${(e as Error).message}`;
    }
    if (problem) return problem;
  }
  return undefined;
}

/** The first certificate of the chain found in the trusted set (byte-equal), or undefined. */
export function trustedAnchor(chain: readonly ChainCertificate[], trusted: readonly Uint8Array[]): ChainCertificate | undefined {
  return chain.find((c) => trusted.some((t) => Buffer.compare(Buffer.from(t), Buffer.from(c.der)) === 0));
}

/** The chain's certificates outside their validity period at `at`, with the reason. */
export function validityProblem(chain: readonly ChainCertificate[], at: Date): string | undefined {
  for (const cert of chain) {
    if (at < cert.notBefore) return `certificate ${cert.subject} is not valid until ${cert.notBefore.toISOString()}`;
    if (at > cert.notAfter) return `certificate ${cert.subject} expired at ${cert.notAfter.toISOString()}`;
  }
  return undefined;
}
