// The COSE envelope of Notary Project signatures (COSE_Sign1, RFC 9052; specs: signature-envelope-cose.md):
// signed attributes in the protected header under string labels, times as CBOR tag 1, the chain in
// x5chain (label 33) of the unprotected header. The signature covers the Sig_structure
// ["Signature1", protected, external_aad (empty), payload].
import { decode, encode, type TagDecoder } from 'cborg';
import type { SignatureAlgorithm } from './chain.js';
import type { ParsedEnvelope } from './parsed.js';
import { schemeTime } from './jws.js';

const COSE_SIGN1_TAG = 18;
const ALGORITHMS: ReadonlyMap<number, SignatureAlgorithm> = new Map([
  [-37, 'PS256'],
  [-38, 'PS384'],
  [-39, 'PS512'],
  [-7, 'ES256'],
  [-35, 'ES384'],
  [-36, 'ES512'],
]);
const LABEL_ALG = 1;
const LABEL_CRIT = 2;
const LABEL_CONTENT_TYPE = 3;
const LABEL_X5CHAIN = 33;

/** Tag 1 (epoch time) becomes a Date wrapped so it cannot be mistaken for an untagged number. */
class EpochTime {
  constructor(readonly date: Date) {}
}

function tags(): { [tag: number]: TagDecoder } {
  const t: { [tag: number]: TagDecoder } = [];
  t[COSE_SIGN1_TAG] = (d) => d();
  t[1] = (d) => {
    const v = d();
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error('a tag 1 time is not a number');
    return new EpochTime(new Date(v * 1000));
  };
  return t;
}

const OPTIONS = { useMaps: true, rejectDuplicateMapKeys: true, allowIndefinite: false, allowUndefined: false, tags: tags() } as const;

function time(header: Map<unknown, unknown>, label: string): Date | undefined {
  const v = header.get(label);
  if (v === undefined) return undefined;
  if (!(v instanceof EpochTime)) throw new Error(`${label} is not a tag 1 time`);
  return v.date;
}

function bytes(v: unknown, what: string): Uint8Array {
  if (!(v instanceof Uint8Array)) throw new Error(`${what} is not a byte string`);
  return v;
}

/** A critical label as a name: standard integer labels this verifier reads by their JWS names. */
function labelName(label: unknown): string {
  if (typeof label === 'string') return label;
  if (label === LABEL_ALG) return 'alg';
  if (label === LABEL_CONTENT_TYPE) return 'cty';
  return `cose-label-${String(label)}`;
}

export function parseCose(data: Uint8Array): ParsedEnvelope {
  const msg: unknown = decode(data, OPTIONS);
  if (!Array.isArray(msg) || msg.length !== 4) throw new Error('not a COSE_Sign1 message');
  const [protectedBytes, unprotected, payloadBytes, signatureBytes] = msg as unknown[];
  const protectedRaw = bytes(protectedBytes, 'the protected header');
  const ph: unknown = decode(protectedRaw, OPTIONS);
  if (!(ph instanceof Map)) throw new Error('the protected header is not a map');
  if (!(unprotected instanceof Map)) throw new Error('the unprotected header is not a map');
  const algorithm = ALGORITHMS.get(ph.get(LABEL_ALG) as number);
  if (!algorithm) throw new Error(`algorithm ${String(ph.get(LABEL_ALG))} is not one the specification allows`);
  const contentType: unknown = ph.get(LABEL_CONTENT_TYPE);
  if (typeof contentType !== 'string') throw new Error('the protected header has no content type');
  const crit: unknown = ph.get(LABEL_CRIT);
  if (!Array.isArray(crit) || crit.length === 0) throw new Error('the protected header has no crit list');
  const { scheme, signingTime } = schemeTime(
    ph.get('io.cncf.notary.signingScheme'),
    time(ph, 'io.cncf.notary.signingTime'),
    time(ph, 'io.cncf.notary.authenticSigningTime'),
  );
  let chain: unknown = unprotected.get(LABEL_X5CHAIN);
  if (chain instanceof Uint8Array) chain = [chain];
  if (!Array.isArray(chain)) throw new Error('the unprotected header has no x5chain');
  const payload = bytes(payloadBytes, 'the payload');
  if (payload.length === 0) throw new Error('the payload is empty (detached payloads are not used by Notary Project signatures)');
  const signature = bytes(signatureBytes, 'the signature');
  if (signature.length === 0) throw new Error('the signature is empty');
  const present = new Set<string>();
  for (const k of ph.keys()) present.add(labelName(k));
  return {
    algorithm,
    contentType,
    scheme,
    signingTime,
    expiry: time(ph, 'io.cncf.notary.expiry'),
    critical: (crit as unknown[]).map(labelName).filter((n) => n !== 'alg' && n !== 'cty'),
    present,
    payload,
    certificates: chain.map((c, i) => bytes(c, `x5chain certificate ${i}`)),
    timestamped: unprotected.has('io.cncf.notary.timestampSignature'),
    signingInput: encode(['Signature1', protectedRaw, new Uint8Array(0), payload]),
    signature,
  };
}
