// What OCSP and CRL tell about one certificate, in the words of the specification's certificate
// revocation evaluation, and the pieces of a certificate both read: the URLs it names, its serial,
// and the entry facts (reason, invalidity date) both kinds of answer carry.
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  AuthorityInfoAccessSyntax,
  CRLDistributionPoints,
  CRLReason,
  CRLReasons,
  Certificate,
  InvalidityDate,
  id_ad_ocsp,
  id_ce_cRLDistributionPoints,
  id_ce_cRLReasons,
  id_ce_invalidityDate,
  id_pe_authorityInfoAccess,
  type Extension,
} from '@peculiar/asn1-x509';
import type { ChainCertificate } from '../chain.js';

const parsed = new WeakMap<ChainCertificate, Certificate>();

/**
 * The certificate as the ASN.1 library reads it, parsed once: the revocation checks need more of it
 * (issuer name and key, serial, access extensions) than the chain checks read without the library.
 */
export function certificateAsn(cert: ChainCertificate): Certificate {
  let asn = parsed.get(cert);
  if (!asn) {
    asn = AsnConvert.parse(cert.der, Certificate);
    parsed.set(cert, asn);
  }
  return asn;
}

/** The URLs of each kind read per certificate at most: real certificates name one or two. */
export const MAX_URLS_PER_CERTIFICATE = 3;

/**
 * - good: an authentic answer says the certificate is not revoked.
 * - revoked: an authentic answer says it is.
 * - unknown: no authentic answer (unreachable, malformed, badly signed, stale, status unknown).
 */
export type RevocationStatus = 'good' | 'revoked' | 'unknown';

/** The answer about one certificate. */
export interface CertificateStatus {
  readonly status: RevocationStatus;
  /** Where it came from, or why there is none, in words. */
  readonly message: string;
}

/** The facts of a revocation entry (OCSP RevokedInfo with its extensions, or a CRL entry). */
export interface RevokedEntry {
  readonly revokedAt: Date;
  readonly reason?: CRLReasons;
  readonly invalidityDate?: Date;
}

export function findExtension(extensions: readonly Extension[] | undefined, oid: string): Extension | undefined {
  return extensions?.find((e) => e.extnID === oid);
}

function uris(names: readonly { uniformResourceIdentifier?: string }[] | undefined): string[] {
  return (names ?? []).flatMap((n) => (n.uniformResourceIdentifier !== undefined ? [n.uniformResourceIdentifier] : []));
}

/** The OCSP responder URLs of the certificate's authority information access. */
export function ocspURLs(cert: ChainCertificate): string[] {
  const ext = findExtension(certificateAsn(cert).tbsCertificate.extensions, id_pe_authorityInfoAccess);
  if (!ext) return [];
  const aia = AsnConvert.parse(ext.extnValue.buffer, AuthorityInfoAccessSyntax);
  return uris(aia.filter((ad) => ad.accessMethod === id_ad_ocsp).map((ad) => ad.accessLocation));
}

/** The full-name URIs of the certificate's CRL distribution points. */
export function crlURLs(cert: ChainCertificate): string[] {
  const ext = findExtension(certificateAsn(cert).tbsCertificate.extensions, id_ce_cRLDistributionPoints);
  if (!ext) return [];
  const points = AsnConvert.parse(ext.extnValue.buffer, CRLDistributionPoints);
  return points.flatMap((p) => uris(p.distributionPoint?.fullName));
}

/** The serial number as DER content bytes, as both answers carry it. */
export function serialOf(cert: ChainCertificate): Buffer {
  return Buffer.from(certificateAsn(cert).tbsCertificate.serialNumber);
}

/** Reads the reason code and invalidity date extensions of an entry. */
export function entryFacts(extensions: readonly Extension[] | undefined): { reason?: CRLReasons; invalidityDate?: Date } {
  const reason = findExtension(extensions, id_ce_cRLReasons);
  const invalidity = findExtension(extensions, id_ce_invalidityDate);
  return {
    ...(reason && { reason: AsnConvert.parse(reason.extnValue.buffer, CRLReason).reason }),
    ...(invalidity && { invalidityDate: AsnConvert.parse(invalidity.extnValue.buffer, InvalidityDate).value }),
  };
}

/**
 * Whether an entry makes the certificate revoked for a signature made at `signingTime` (the
 * authentic signing time, when the envelope has one): the specification counts a certificate whose
 * invalidity date is after that time as not revoked for it.
 */
export function revokedFor(entry: RevokedEntry, signingTime: Date | undefined): boolean {
  return !(signingTime && entry.invalidityDate && signingTime < entry.invalidityDate);
}

/** An entry in words: `revoked at T (keyCompromise)`. */
export function describeEntry(entry: RevokedEntry): string {
  const reason = entry.reason !== undefined ? ` (${CRLReasons[entry.reason] ?? `reason ${entry.reason}`})` : '';
  return `revoked at ${entry.revokedAt.toISOString()}${reason}`;
}
