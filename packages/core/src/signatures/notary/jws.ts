// The JWS envelope of Notary Project signatures (JSON serialization, flattened; specs:
// signature-envelope-jws.md): protected header with the signed attributes, x5c chain and signing agent
// in the unprotected header, ECDSA signatures as r||s.
import type { SignatureAlgorithm } from './chain.js';
import type { ParsedEnvelope, SigningScheme } from './parsed.js';

const ALGORITHMS: readonly SignatureAlgorithm[] = ['PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'];
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function b64url(value: unknown, what: string): Buffer {
  if (typeof value !== 'string' || !BASE64URL.test(value)) throw new Error(`${what} is not base64url`);
  return Buffer.from(value, 'base64url');
}

export function parseTime(value: unknown, what: string): Date {
  if (typeof value !== 'string' || !RFC3339.test(value)) throw new Error(`${what} is not an RFC 3339 time`);
  const t = new Date(value);
  if (Number.isNaN(t.getTime())) throw new Error(`${what} is not a valid time`);
  return t;
}

function optionalTime(header: Record<string, unknown>, name: string): Date | undefined {
  return header[name] === undefined ? undefined : parseTime(header[name], name);
}

/** The signing time the scheme names, checking the other time attribute is absent. */
export function schemeTime(scheme: unknown, signingTime: Date | undefined, authentic: Date | undefined): { scheme: SigningScheme; signingTime: Date } {
  if (scheme === 'notary.x509') {
    if (authentic) throw new Error('io.cncf.notary.authenticSigningTime must not be present under notary.x509');
    if (!signingTime) throw new Error('io.cncf.notary.signingTime is missing');
    return { scheme, signingTime };
  }
  if (scheme === 'notary.x509.signingAuthority') {
    if (signingTime) throw new Error('io.cncf.notary.signingTime must not be present under notary.x509.signingAuthority');
    if (!authentic) throw new Error('io.cncf.notary.authenticSigningTime is missing');
    return { scheme, signingTime: authentic };
  }
  throw new Error(`signing scheme ${JSON.stringify(scheme)} is neither notary.x509 nor notary.x509.signingAuthority`);
}

export function parseJws(bytes: Uint8Array): ParsedEnvelope {
  const env: unknown = JSON.parse(Buffer.from(bytes).toString('utf8'));
  if (typeof env !== 'object' || env === null || Array.isArray(env)) throw new Error('not a JWS JSON object');
  const { protected: protectedB64, payload: payloadB64, signature: signatureB64, header } = env as Record<string, unknown>;
  const protectedJson: unknown = JSON.parse(b64url(protectedB64, 'protected').toString('utf8'));
  if (typeof protectedJson !== 'object' || protectedJson === null || Array.isArray(protectedJson)) throw new Error('the protected header is not a JSON object');
  const ph = protectedJson as Record<string, unknown>;
  const algorithm = ph.alg as SignatureAlgorithm;
  if (!ALGORITHMS.includes(algorithm)) throw new Error(`algorithm ${JSON.stringify(ph.alg)} is not one the specification allows`);
  if (typeof ph.cty !== 'string') throw new Error('the protected header has no cty');
  if (!Array.isArray(ph.crit) || ph.crit.length === 0 || ph.crit.some((c) => typeof c !== 'string')) throw new Error('the protected header has no crit list');
  const { scheme, signingTime } = schemeTime(
    ph['io.cncf.notary.signingScheme'],
    optionalTime(ph, 'io.cncf.notary.signingTime'),
    optionalTime(ph, 'io.cncf.notary.authenticSigningTime'),
  );
  const unprotected = (typeof header === 'object' && header !== null ? header : {}) as Record<string, unknown>;
  const x5c = unprotected.x5c;
  if (!Array.isArray(x5c) || x5c.some((c) => typeof c !== 'string')) throw new Error('the unprotected header has no x5c list');
  const signature = b64url(signatureB64, 'signature');
  if (signature.length === 0) throw new Error('the signature is empty');
  const payload = b64url(payloadB64, 'payload');
  if (payload.length === 0) throw new Error('the payload is empty');
  return {
    algorithm,
    contentType: ph.cty,
    scheme,
    signingTime,
    expiry: optionalTime(ph, 'io.cncf.notary.expiry'),
    critical: ph.crit as string[],
    present: new Set(Object.keys(ph)),
    payload,
    certificates: (x5c as string[]).map((c) => Buffer.from(c, 'base64')),
    timestamped: unprotected['io.cncf.notary.timestampSignature'] !== undefined,
    signingInput: Buffer.from(`${protectedB64 as string}.${payloadB64 as string}`, 'ascii'),
    signature,
  };
}
