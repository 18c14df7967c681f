// The revocation validation of a Notary Project signature (trust-store-trust-policy.md, "Certificate
// Revocation Evaluation"): every certificate of the signing chain but the root is checked, OCSP first
// where it names a responder, its CRL where OCSP gives no authentic answer or none is named; a
// certificate that names neither is taken as not revoked. One revoked certificate fails the
// validation; so does one whose status is unknown, because the specification fails the step when
// the status "cannot be determined" (the level then enforces or logs it).
import type { ChainCertificate } from '../chain.js';
import { CRL_TIMEOUT_MS, CrlCache, checkCrlStatus } from './crl.js';
import { OCSP_TIMEOUT_MS, checkOcsp } from './ocsp.js';
import { MAX_URLS_PER_CERTIFICATE, certificateAsn, crlURLs, ocspURLs, type CertificateStatus } from './status.js';

export { MAX_CRL_BYTES, MAX_CACHED_CRLS, MAX_CACHED_CRL_BYTES, CrlCache } from './crl.js';
export { MAX_OCSP_RESPONSE_BYTES } from './ocsp.js';
export { MAX_URLS_PER_CERTIFICATE, type CertificateStatus, type RevocationStatus } from './status.js';

export interface RevocationCheckOptions {
  /** The time the answers must be current at. */
  readonly now: Date;
  /** The authentic signing time (signing authority scheme): an entry invalid only after it does not count. */
  readonly signingTime?: Date;
  readonly signal?: AbortSignal;
}

export interface RevocationCheckerOptions {
  /** Milliseconds for one OCSP responder; default 2000, the specification's. */
  readonly ocspTimeoutMs?: number;
  /** Milliseconds for one CRL download; default 5000, the specification's. */
  readonly crlTimeoutMs?: number;
  /** The CRL cache; a fresh one by default. */
  readonly crls?: CrlCache;
}

/** Checks certificate chains by OCSP and CRL, keeping the CRLs it fetched until their nextUpdate. */
export class RevocationChecker {
  readonly crls: CrlCache;
  private readonly ocspTimeoutMs: number;
  private readonly crlTimeoutMs: number;

  constructor(options: RevocationCheckerOptions = {}) {
    this.crls = options.crls ?? new CrlCache();
    this.ocspTimeoutMs = options.ocspTimeoutMs ?? OCSP_TIMEOUT_MS;
    this.crlTimeoutMs = options.crlTimeoutMs ?? CRL_TIMEOUT_MS;
  }

  /** The status of `cert`, issued by `issuer`. Never throws. */
  async checkCertificate(cert: ChainCertificate, issuer: ChainCertificate, options: RevocationCheckOptions): Promise<CertificateStatus> {
    let ocsp: string[];
    let crl: string[];
    try {
      certificateAsn(issuer);
      ocsp = ocspURLs(cert).slice(0, MAX_URLS_PER_CERTIFICATE);
      crl = crlURLs(cert).slice(0, MAX_URLS_PER_CERTIFICATE);
    } catch (e) {
      return { status: 'unknown', message: `it or its issuer's OCSP or CRL extension cannot be read: ${(e as Error).message}` };
    }
    if (ocsp.length === 0 && crl.length === 0) return { status: 'good', message: 'names no OCSP responder or CRL' };
    const common = { now: options.now, ...(options.signingTime && { signingTime: options.signingTime }), ...(options.signal && { signal: options.signal }) };
    let byOcsp: CertificateStatus | undefined;
    if (ocsp.length > 0) {
      byOcsp = await checkOcsp(ocsp, cert, issuer, { ...common, timeoutMs: this.ocspTimeoutMs });
      if (byOcsp.status !== 'unknown' || crl.length === 0) return byOcsp;
    }
    const byCrl = await checkCrlStatus(this.crls, crl, cert, issuer, { ...common, timeoutMs: this.crlTimeoutMs });
    if (byCrl.status !== 'unknown' || !byOcsp) return byCrl;
    return { status: 'unknown', message: `${byOcsp.message}; ${byCrl.message}` };
  }

  /**
   * Checks every certificate of `chain` (leaf first, root last) but the root. Undefined when none is
   * revoked and every status is known; otherwise what is wrong, the revoked certificate first.
   */
  async checkChain(chain: readonly ChainCertificate[], options: RevocationCheckOptions): Promise<string | undefined> {
    const results = await Promise.all(chain.slice(0, -1).map((cert, i) => this.checkCertificate(cert, chain[i + 1]!, options)));
    const revoked = results.findIndex((r) => r.status === 'revoked');
    if (revoked >= 0) return `certificate ${chain[revoked]!.subject} is revoked: ${results[revoked]!.message}`;
    const unknown = results.findIndex((r) => r.status === 'unknown');
    if (unknown >= 0) return `the revocation status of certificate ${chain[unknown]!.subject} is unknown: ${results[unknown]!.message}`;
    return undefined;
  }
}

/** The checker verifications share by default: one CRL cache for the process, kept between pulls. */
export const sharedRevocationChecker = new RevocationChecker();
