// OCSP (RFC 6960) for one certificate: a request naming it by issuer and serial, sent to each responder
// the certificate names until one gives an authentic answer; the answer counts only when it is signed by
// the issuer or by a responder the issuer delegated to (id-kp-OCSPSigning), covers this certificate,
// and is current (thisUpdate not ahead, nextUpdate present and not past). No nonce is sent (as
// notation): responders that precompute answers ignore it, and nextUpdate bounds a replay.
import { createHash } from 'node:crypto';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import {
  BasicOCSPResponse,
  CertID,
  OCSPRequest,
  OCSPResponse,
  OCSPResponseStatus,
  Request,
  TBSRequest,
  id_pkix_ocsp_basic,
  type SingleResponse,
} from '@peculiar/asn1-ocsp';
import { AlgorithmIdentifier, ExtendedKeyUsage, id_ce_extKeyUsage, id_kp_OCSPSigning } from '@peculiar/asn1-x509';
import { parseCertificate, type ChainCertificate } from '../chain.js';
import { fetchBounded, httpURL } from './http.js';
import { CERT_ID_HASHES, checkSigned } from './signed.js';
import { certificateAsn, describeEntry, entryFacts, findExtension, revokedFor, serialOf, type CertificateStatus, type RevokedEntry } from './status.js';

/** Largest OCSP answer read (as notation): real ones are one or two KiB. */
export const MAX_OCSP_RESPONSE_BYTES = 20 * 1024;
/** Time for one responder to answer (the specification's default threshold). */
export const OCSP_TIMEOUT_MS = 2000;
/** Clock skew tolerated on thisUpdate. */
const SKEW_MS = 5 * 60 * 1000;
/** Responder certificates of one answer tried as the delegated signer. */
const MAX_RESPONDER_CERTIFICATES = 4;

const SHA1 = '1.3.14.3.2.26';

export interface OcspOptions {
  readonly now: Date;
  /** The authentic signing time, when the envelope has one. */
  readonly signingTime?: Date;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

function hash(name: string, data: ArrayBuffer | Uint8Array): Buffer {
  return createHash(name)
    .update(new Uint8Array(data instanceof Uint8Array ? data : new Uint8Array(data)))
    .digest();
}

/** The CertID of `cert` with `hashName` (node:crypto's name), from its issuer's name and key. */
function certId(cert: ChainCertificate, issuer: ChainCertificate, hashName: string): { name: Buffer; key: Buffer; serial: Buffer } {
  const name = hash(hashName, AsnConvert.serialize(certificateAsn(issuer).tbsCertificate.subject));
  const key = hash(hashName, certificateAsn(issuer).tbsCertificate.subjectPublicKeyInfo.subjectPublicKey);
  return { name, key, serial: serialOf(cert) };
}

/** A DER OCSPRequest for one certificate, its CertID hashed with SHA-1 as most responders require. */
export function ocspRequest(cert: ChainCertificate, issuer: ChainCertificate): Uint8Array {
  const id = certId(cert, issuer, 'sha1');
  const reqCert = new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: SHA1, parameters: new Uint8Array([0x05, 0x00]).buffer }),
    issuerNameHash: new OctetString(id.name),
    issuerKeyHash: new OctetString(id.key),
    serialNumber: new Uint8Array(id.serial).buffer,
  });
  const req = new OCSPRequest({ tbsRequest: new TBSRequest({ requestList: [new Request({ reqCert })] }) });
  return new Uint8Array(AsnConvert.serialize(req));
}

function delegatedFor(issuer: ChainCertificate, candidate: ChainCertificate, now: Date): string | undefined {
  if (!candidate.x509.checkIssued(issuer.x509) || !candidate.x509.verify(issuer.x509.publicKey))
    return `responder certificate ${candidate.subject} is not issued by ${issuer.subject}`;
  const eku = findExtension(certificateAsn(candidate).tbsCertificate.extensions, id_ce_extKeyUsage);
  if (!eku || !AsnConvert.parse(eku.extnValue.buffer, ExtendedKeyUsage).includes(id_kp_OCSPSigning))
    return `responder certificate ${candidate.subject} lacks the OCSP signing extended key usage`;
  if (now < candidate.notBefore || now > candidate.notAfter) return `responder certificate ${candidate.subject} is not valid now`;
  return undefined;
}

/** Undefined when the issuer or a delegated responder signed the answer; otherwise why not. */
function checkResponder(basic: BasicOCSPResponse, issuer: ChainCertificate, now: Date): string | undefined {
  const signed = basic.tbsResponseDataRaw;
  if (!signed) return 'the answer has no signed data';
  const byIssuer = checkSigned(signed, basic.signatureAlgorithm, basic.signature, issuer.x509.publicKey);
  if (typeof byIssuer === 'string') return byIssuer;
  if (byIssuer) return undefined;
  const problems: string[] = [];
  for (const c of (basic.certs ?? []).slice(0, MAX_RESPONDER_CERTIFICATES)) {
    let candidate: ChainCertificate;
    try {
      candidate = parseCertificate(new Uint8Array(AsnConvert.serialize(c)));
    } catch (e) {
      problems.push(`a responder certificate cannot be read: ${(e as Error).message}`);
      continue;
    }
    if (checkSigned(signed, basic.signatureAlgorithm, basic.signature, candidate.x509.publicKey) !== true) continue;
    const problem = delegatedFor(issuer, candidate, now);
    if (!problem) return undefined;
    problems.push(problem);
  }
  return problems[0] ?? `the answer's signature verifies neither with ${issuer.subject} nor with a responder certificate it delegated to`;
}

function covers(single: SingleResponse, cert: ChainCertificate, issuer: ChainCertificate): boolean {
  const hashName = CERT_ID_HASHES[single.certID.hashAlgorithm.algorithm];
  if (!hashName) return false;
  const want = certId(cert, issuer, hashName);
  const got = single.certID;
  return (
    want.serial.equals(Buffer.from(got.serialNumber)) &&
    want.name.equals(Buffer.from(got.issuerNameHash.buffer)) &&
    want.key.equals(Buffer.from(got.issuerKeyHash.buffer))
  );
}

/** Reads one responder's answer about `cert`: its status, or why it does not count. */
export function readOcspResponse(body: Uint8Array, cert: ChainCertificate, issuer: ChainCertificate, options: OcspOptions): CertificateStatus {
  let basic: BasicOCSPResponse;
  try {
    const outer = AsnConvert.parse(body, OCSPResponse);
    if (outer.responseStatus !== OCSPResponseStatus.successful)
      return { status: 'unknown', message: `the responder answered ${OCSPResponseStatus[outer.responseStatus] ?? outer.responseStatus}` };
    if (outer.responseBytes?.responseType !== id_pkix_ocsp_basic) return { status: 'unknown', message: 'the answer is not a basic OCSP response' };
    basic = AsnConvert.parse(outer.responseBytes.response.buffer, BasicOCSPResponse);
  } catch (e) {
    return { status: 'unknown', message: `the answer is not an OCSP response: ${(e as Error).message}` };
  }
  const responder = checkResponder(basic, issuer, options.now);
  if (responder) return { status: 'unknown', message: `the answer is not authentic: ${responder}` };
  const single = basic.tbsResponseData.responses.find((r) => covers(r, cert, issuer));
  if (!single) return { status: 'unknown', message: 'the answer does not cover this certificate' };
  const now = options.now.getTime();
  if (single.thisUpdate.getTime() > now + SKEW_MS)
    return { status: 'unknown', message: `the answer is dated ${single.thisUpdate.toISOString()}, in the future` };
  if (!single.nextUpdate) return { status: 'unknown', message: 'the answer has no nextUpdate, so its freshness is unknown' };
  if (single.nextUpdate.getTime() < now)
    return { status: 'unknown', message: `the answer is stale: its nextUpdate ${single.nextUpdate.toISOString()} is past` };
  const status = single.certStatus;
  if (status.good !== undefined) return { status: 'good', message: 'good' };
  if (status.revoked) {
    const { invalidityDate } = entryFacts(single.singleExtensions);
    const entry: RevokedEntry = {
      revokedAt: status.revoked.revocationTime,
      ...(status.revoked.revocationReason && { reason: status.revoked.revocationReason.reason }),
      ...(invalidityDate && { invalidityDate }),
    };
    if (!revokedFor(entry, options.signingTime)) return { status: 'good', message: `${describeEntry(entry)}, invalid only after the authentic signing time` };
    return { status: 'revoked', message: describeEntry(entry) };
  }
  return { status: 'unknown', message: 'the responder does not know the certificate' };
}

/**
 * Asks the responders `urls` (in order, until one gives an authentic answer) about `cert`.
 * Never throws: what went wrong with each responder is in the message of an unknown status.
 */
export async function checkOcsp(urls: readonly string[], cert: ChainCertificate, issuer: ChainCertificate, options: OcspOptions): Promise<CertificateStatus> {
  const body = ocspRequest(cert, issuer);
  const problems: string[] = [];
  for (const text of urls) {
    let answer: CertificateStatus;
    try {
      const url = httpURL(text);
      const got = await fetchBounded(url, {
        method: 'POST',
        body,
        contentType: 'application/ocsp-request',
        maxBytes: MAX_OCSP_RESPONSE_BYTES,
        timeoutMs: options.timeoutMs ?? OCSP_TIMEOUT_MS,
        ...(options.signal && { signal: options.signal }),
      });
      answer = readOcspResponse(got, cert, issuer, options);
    } catch (e) {
      answer = { status: 'unknown', message: (e as Error).message };
    }
    if (answer.status !== 'unknown') return { status: answer.status, message: `OCSP ${text}: ${answer.message}` };
    problems.push(`OCSP ${text}: ${answer.message}`);
    if (options.signal?.aborted) break;
  }
  return { status: 'unknown', message: problems.join('; ') };
}
