// CRLs (RFC 5280) for one certificate: fetched from the distribution points it names (in order, until
// one gives an authentic CRL), checked (signed by the certificate's issuer under its name, nextUpdate
// present and not past, no critical extension not understood, not a delta CRL), and looked up by
// serial. A checked CRL is kept until its nextUpdate, by URL and issuer, in a cache bounded in entries
// and bytes, so a daemon asks a distribution point once per CRL it publishes, not once per pull.
import { createHash } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  AlgorithmIdentifier,
  CRLReasons,
  KeyUsage,
  KeyUsageFlags,
  id_ce_cRLReasons,
  id_ce_deltaCRLIndicator,
  id_ce_freshestCRL,
  id_ce_invalidityDate,
  id_ce_issuingDistributionPoint,
  id_ce_keyUsage,
  RevokedCertificate,
  TBSCertList,
} from '@peculiar/asn1-x509';
import type { ChainCertificate } from '../chain.js';
import { BIT_STRING, children, elementAt, GENERALIZED_TIME, INTEGER, SEQUENCE, sequenceOf, UTC_TIME } from '../der.js';
import { fetchBounded, httpURL } from './http.js';
import { checkSigned } from './signed.js';
import { certificateAsn, describeEntry, entryFacts, findExtension, revokedFor, serialOf, type CertificateStatus, type RevokedEntry } from './status.js';

/** Largest CRL read: a CA's code signing CRL is kilobytes; public web CAs' largest are a few MiB. */
export const MAX_CRL_BYTES = 10 * 1024 * 1024;
/** Time for one distribution point to send its CRL (the specification's default threshold). */
export const CRL_TIMEOUT_MS = 5000;
/** CRLs kept at most, and their bytes as fetched at most, in one cache. */
export const MAX_CACHED_CRLS = 32;
export const MAX_CACHED_CRL_BYTES = 32 * 1024 * 1024;
const SKEW_MS = 5 * 60 * 1000;
/** CRL extensions a CRL may mark critical and still be used. */
const UNDERSTOOD_CRITICAL = new Set([id_ce_issuingDistributionPoint]);
const UNDERSTOOD_ENTRY_CRITICAL = new Set([id_ce_cRLReasons, id_ce_invalidityDate]);

/** A CRL that checked out against one issuer: what a lookup needs, nothing more. */
interface CheckedCrl {
  readonly nextUpdate: Date;
  /** The DER of its revokedCertificates list (empty: none), outlined entry by entry only on lookup. */
  readonly revoked: Uint8Array;
  readonly bytes: number;
}

export interface CrlOptions {
  readonly now: Date;
  readonly signingTime?: Date;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

/** A CRL taken apart: the signed bytes, the header parsed (without the entries), the entries' DER. */
interface CrlParts {
  readonly signed: Uint8Array;
  readonly algorithm: AlgorithmIdentifier;
  readonly signature: ArrayBuffer;
  readonly tbs: TBSCertList;
  readonly revoked: Uint8Array;
}

/** Outlines the CRL (CertificateList, RFC 5280 5.1) and parses all of it but the list of entries. */
function partsOf(der: Uint8Array): CrlParts {
  const outer = elementAt(der, 0);
  if (outer.tag !== SEQUENCE || outer.end !== der.length) throw new Error('not one DER SEQUENCE');
  const [tbs, alg, sig, extra] = [...children(der, outer)];
  if (!tbs || !alg || !sig || extra || tbs.tag !== SEQUENCE || sig.tag !== BIT_STRING || der[sig.content] !== 0) throw new Error('not a CertificateList');
  const fields = [...children(der, tbs)];
  // version?, signature, issuer, thisUpdate, nextUpdate?, revokedCertificates?, [0] crlExtensions?
  let i = (fields[0]?.tag === INTEGER ? 1 : 0) + 3;
  if (fields[i]?.tag === UTC_TIME || fields[i]?.tag === GENERALIZED_TIME) i++;
  const list = fields[i]?.tag === SEQUENCE ? fields[i] : undefined;
  const head = sequenceOf(fields.filter((f) => f !== list).map((f) => der.subarray(f.start, f.end)));
  return {
    signed: der.subarray(tbs.start, tbs.end),
    algorithm: AsnConvert.parse(der.subarray(alg.start, alg.end), AlgorithmIdentifier),
    signature: Uint8Array.from(der.subarray(sig.content + 1, sig.end)).buffer,
    tbs: AsnConvert.parse(head, TBSCertList),
    revoked: list ? Uint8Array.from(der.subarray(list.start, list.end)) : new Uint8Array(0),
  };
}

function issuedUnder(crl: CrlParts, issuer: ChainCertificate): string | undefined {
  const name = Buffer.from(AsnConvert.serialize(crl.tbs.issuer));
  if (!name.equals(Buffer.from(AsnConvert.serialize(certificateAsn(issuer).tbsCertificate.subject)))) return `the CRL's issuer is not ${issuer.subject}`;
  const ku = findExtension(certificateAsn(issuer).tbsCertificate.extensions, id_ce_keyUsage);
  if (ku && (AsnConvert.parse(ku.extnValue.buffer, KeyUsage).toNumber() & KeyUsageFlags.cRLSign) === 0)
    return `${issuer.subject} may not sign CRLs (its key usage lacks CRL signing)`;
  const ok = checkSigned(crl.signed, crl.algorithm, crl.signature, issuer.x509.publicKey);
  if (typeof ok === 'string') return ok;
  return ok ? undefined : `the CRL's signature does not verify with the key of ${issuer.subject}`;
}

/** Parses and checks a CRL fetched for a certificate issued by `issuer`; a string says why it does not count. */
export function checkCrl(der: Uint8Array, issuer: ChainCertificate, now: Date): CheckedCrl | string {
  let crl: CrlParts;
  try {
    crl = partsOf(der);
  } catch (e) {
    return `not a DER CRL: ${(e as Error).message}`;
  }
  const tbs = crl.tbs;
  const issued = issuedUnder(crl, issuer);
  if (issued) return issued;
  if (findExtension(tbs.crlExtensions, id_ce_deltaCRLIndicator)) return 'it is a delta CRL, not a base CRL';
  if (findExtension(tbs.crlExtensions, id_ce_freshestCRL)) return 'it names a delta CRL, and delta CRLs are not supported';
  const critical = tbs.crlExtensions?.find((x) => x.critical && !UNDERSTOOD_CRITICAL.has(x.extnID));
  if (critical) return `it has the critical extension ${critical.extnID}, which is not understood`;
  const thisUpdate = tbs.thisUpdate.getTime();
  if (thisUpdate.getTime() > now.getTime() + SKEW_MS) return `it is dated ${thisUpdate.toISOString()}, in the future`;
  if (!tbs.nextUpdate) return 'it has no nextUpdate, so its freshness is unknown';
  const nextUpdate = tbs.nextUpdate.getTime();
  if (nextUpdate < now) return `it is stale: its nextUpdate ${nextUpdate.toISOString()} is past`;
  return { nextUpdate, revoked: crl.revoked, bytes: der.length };
}

/** The entries of the list that name `serial` (its INTEGER content bytes), parsed; a string for one that cannot be used. */
function entriesFor(revoked: Uint8Array, serial: Buffer): RevokedEntry[] | string {
  const found: RevokedEntry[] = [];
  if (revoked.length === 0) return found;
  for (const entry of children(revoked, elementAt(revoked, 0))) {
    const first = elementAt(revoked, entry.content, entry.end);
    if (first.tag !== INTEGER || !serial.equals(revoked.subarray(first.content, first.end))) continue;
    const e = AsnConvert.parse(revoked.subarray(entry.start, entry.end), RevokedCertificate);
    const critical = e.crlEntryExtensions?.find((x) => x.critical && !UNDERSTOOD_ENTRY_CRITICAL.has(x.extnID));
    if (critical) return `its entry has the critical extension ${critical.extnID}, which is not understood`;
    found.push({ revokedAt: e.revocationDate.getTime(), ...entryFacts(e.crlEntryExtensions) });
  }
  return found;
}

/** What a checked CRL says about `cert`, as the specification and notation read hold and removal. */
export function lookUp(crl: CheckedCrl, cert: ChainCertificate, signingTime: Date | undefined): CertificateStatus {
  let entries: RevokedEntry[] | string;
  try {
    entries = entriesFor(crl.revoked, serialOf(cert));
  } catch (e) {
    return { status: 'unknown', message: `its list of entries cannot be read: ${(e as Error).message}` };
  }
  if (typeof entries === 'string') return { status: 'unknown', message: entries };
  let latestTemporary: RevokedEntry | undefined;
  for (const entry of entries) {
    if (!revokedFor(entry, signingTime)) return { status: 'good', message: `${describeEntry(entry)}, invalid only after the authentic signing time` };
    if (entry.reason === CRLReasons.certificateHold || entry.reason === CRLReasons.removeFromCRL) {
      if (!latestTemporary || latestTemporary.revokedAt < entry.revokedAt) latestTemporary = entry;
      continue;
    }
    return { status: 'revoked', message: describeEntry(entry) };
  }
  if (latestTemporary?.reason === CRLReasons.certificateHold) return { status: 'revoked', message: describeEntry(latestTemporary) };
  return { status: 'good', message: 'not listed' };
}

/** Checked CRLs by distribution point and issuer, until their nextUpdate; least recently used leave first. */
export class CrlCache {
  private readonly crls = new Map<string, CheckedCrl>();
  private readonly inflight = new Map<string, Promise<CheckedCrl | string>>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = MAX_CACHED_CRLS,
    private readonly maxBytes = MAX_CACHED_CRL_BYTES,
  ) {}

  /** How many CRLs are held. */
  get size(): number {
    return this.crls.size;
  }

  private keyOf(url: string, issuer: ChainCertificate): string {
    return `${createHash('sha256').update(issuer.der).digest('hex')} ${url}`;
  }

  private take(key: string, now: Date): CheckedCrl | undefined {
    const crl = this.crls.get(key);
    if (!crl) return undefined;
    this.crls.delete(key);
    if (crl.nextUpdate < now) {
      this.bytes -= crl.bytes;
      return undefined;
    }
    this.crls.set(key, crl);
    return crl;
  }

  private put(key: string, crl: CheckedCrl): void {
    if (crl.bytes > this.maxBytes) return;
    this.crls.set(key, crl);
    this.bytes += crl.bytes;
    for (const [k, v] of this.crls) {
      if (this.crls.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.crls.delete(k);
      this.bytes -= v.bytes;
    }
  }

  /** The checked CRL of `url` for certificates of `issuer`: cached, or fetched once for all who ask at the same time. */
  async get(url: string, issuer: ChainCertificate, options: CrlOptions): Promise<CheckedCrl | string> {
    const key = this.keyOf(url, issuer);
    const cached = this.take(key, options.now);
    if (cached) return cached;
    let pending = this.inflight.get(key);
    if (!pending) {
      // Shared by every verification that asks meanwhile, so bounded by its own time limit only: one
      // pull that stops must not fail another's check.
      pending = this.fetch(url, issuer, options).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    const signal = options.signal;
    if (!signal) return pending;
    if (signal.aborted) return 'the verification stopped';
    return new Promise((resolve) => {
      const stop = (): void => resolve('the verification stopped');
      signal.addEventListener('abort', stop, { once: true });
      void pending.then((r) => {
        signal.removeEventListener('abort', stop);
        resolve(r);
      });
    });
  }

  private async fetch(url: string, issuer: ChainCertificate, options: CrlOptions): Promise<CheckedCrl | string> {
    let der: Buffer;
    try {
      der = await fetchBounded(httpURL(url), { method: 'GET', maxBytes: MAX_CRL_BYTES, timeoutMs: options.timeoutMs ?? CRL_TIMEOUT_MS });
    } catch (e) {
      return (e as Error).message;
    }
    const crl = checkCrl(der, issuer, options.now);
    if (typeof crl !== 'string') this.put(this.keyOf(url, issuer), crl);
    return crl;
  }
}

/**
 * Fetches the CRL of each of `urls` in order until one checks out, and looks `cert` up in it.
 * Never throws: what went wrong with each distribution point is in the message of an unknown status.
 */
export async function checkCrlStatus(
  cache: CrlCache,
  urls: readonly string[],
  cert: ChainCertificate,
  issuer: ChainCertificate,
  options: CrlOptions,
): Promise<CertificateStatus> {
  if (findExtension(certificateAsn(cert).tbsCertificate.extensions, id_ce_freshestCRL))
    return { status: 'unknown', message: 'the certificate names a delta CRL, and delta CRLs are not supported' };
  const problems: string[] = [];
  for (const url of urls) {
    const crl = await cache.get(url, issuer, options);
    if (typeof crl !== 'string') {
      const found = lookUp(crl, cert, options.signingTime);
      return { status: found.status, message: `CRL ${url}: ${found.message}` };
    }
    problems.push(`CRL ${url}: ${crl}`);
    if (options.signal?.aborted) break;
  }
  return { status: 'unknown', message: problems.join('; ') };
}
