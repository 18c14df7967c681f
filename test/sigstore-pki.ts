// Keyless Sigstore material for tests, all on this machine: a private Fulcio-like CA (openssl) that
// issues short-lived code-signing certificates carrying Fulcio's OIDC-issuer extensions and an
// email SAN, and a transparency log of one entry per bundle that does what Rekor v1 does for a
// DSSE entry (canonical body, integrated time, signed entry timestamp, a one-leaf Merkle tree and
// its signed checkpoint; for cosign's `.sig` tag, a hashedrekord entry as its layer annotation), so
// that cosign-made signatures can be given a log entry offline.
import { execFileSync } from 'node:child_process';
import { createHash, generateKeyPairSync, sign, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Fulcio's certificate extensions: the OIDC issuer, raw (v1) and DER UTF8String (v2). */
const ISSUER_V1 = '1.3.6.1.4.1.57264.1.1';
const ISSUER_V2 = '1.3.6.1.4.1.57264.1.8';

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA in `dir`: `<name>.pem` and `<name>.key`. */
export function makeCA(dir: string, name: string): string {
  openssl(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`]);
  openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-key',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '30',
    '-subj',
    `/O=fastpull test/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return join(dir, `${name}.pem`);
}

/**
 * A signing certificate `<name>.pem` (key `<name>.key`, PKCS#8 PEM) issued by `ca` for `email` on
 * `issuer`, valid from now for a day, as Fulcio issues them: email SAN, code-signing EKU, issuer extensions.
 */
export function issueSigningCert(dir: string, ca: string, name: string, email: string, issuer: string): string {
  openssl(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.ec.key`]);
  openssl(dir, ['pkcs8', '-topk8', '-nocrypt', '-in', `${name}.ec.key`, '-out', `${name}.key`]);
  openssl(dir, ['req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', '/']);
  const ext = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=codeSigning',
    `subjectAltName=critical,email:${email}`,
    `${ISSUER_V1}=DER:${Buffer.from(issuer).toString('hex')}`,
    `${ISSUER_V2}=ASN1:UTF8String:${issuer}`,
  ];
  writeFileSync(join(dir, `${name}.ext`), `${ext.join('\n')}\n`);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-extfile',
    `${name}.ext`,
  ]);
  return join(dir, `${name}.pem`);
}

/** Canonical JSON (RFC 8785 for the plain strings, numbers and objects Rekor uses). */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

const sha256 = (b: Buffer | string): Buffer => createHash('sha256').update(b).digest();

/** A test transparency log: its key, and log entries for DSSE bundles. */
export class TestRekor {
  readonly publicKey: KeyObject;
  private readonly privateKey: KeyObject;
  /** Its log ID: the SHA-256 of its public key (DER SubjectPublicKeyInfo), as Rekor's. */
  readonly logID: Buffer;
  private index = 0;

  constructor(readonly origin = 'rekor.fastpull.test') {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.publicKey = pair.publicKey;
    this.privateKey = pair.privateKey;
    this.logID = sha256(this.publicKey.export({ type: 'spki', format: 'der' }));
  }

  /** Its public key as PEM (policy.json's rekorPublicKeyPath). */
  pem(): string {
    return this.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  }

  /**
   * `bundle` (a cosign DSSE bundle, JSON) with a log entry of its envelope integrated at
   * `integratedTime` (seconds), the way a Rekor v1 bundle holds it: SET and inclusion proof.
   */
  logged(bundle: Record<string, unknown>, integratedTime: number): Record<string, unknown> {
    const env = bundle.dsseEnvelope as { payload: string; payloadType: string; signatures: { sig: string }[] };
    const material = bundle.verificationMaterial as { certificate?: { rawBytes: string }; publicKey?: unknown };
    const verifier = material.certificate
      ? Buffer.from(new X509Certificate(Buffer.from(material.certificate.rawBytes, 'base64')).toString()).toString('base64')
      : '';
    const body = {
      apiVersion: '0.0.1',
      kind: 'dsse',
      spec: {
        envelopeHash: { algorithm: 'sha256', value: sha256(canonical(env)).toString('hex') },
        payloadHash: { algorithm: 'sha256', value: sha256(Buffer.from(env.payload, 'base64')).toString('hex') },
        signatures: env.signatures.map((s) => ({ signature: s.sig, verifier })),
      },
    };
    const bodyBytes = Buffer.from(canonical(body));
    const logIndex = this.index++;
    const set = sign(
      'sha256',
      Buffer.from(canonical({ body: bodyBytes.toString('base64'), integratedTime, logID: this.logID.toString('hex'), logIndex })),
      this.privateKey,
    );
    // A tree of this entry alone: the root is the leaf hash, the proof has no hashes.
    const root = sha256(Buffer.concat([Buffer.from([0]), bodyBytes]));
    const note = `${this.origin} - 1\n1\n${root.toString('base64')}\n`;
    const noteSig = Buffer.concat([this.logID.subarray(0, 4), sign('sha256', Buffer.from(note), this.privateKey)]);
    const entry = {
      logIndex: String(logIndex),
      logId: { keyId: this.logID.toString('base64') },
      kindVersion: { kind: 'dsse', version: '0.0.1' },
      integratedTime: String(integratedTime),
      inclusionPromise: { signedEntryTimestamp: set.toString('base64') },
      inclusionProof: {
        logIndex: '0',
        rootHash: root.toString('base64'),
        treeSize: '1',
        hashes: [],
        checkpoint: { envelope: `${note}\n\u2014 ${this.origin} ${noteSig.toString('base64')}\n` },
      },
      canonicalizedBody: bodyBytes.toString('base64'),
    };
    return { ...bundle, verificationMaterial: { ...material, tlogEntries: [entry] } };
  }

  /**
   * cosign's `dev.sigstore.cosign/bundle` layer annotation for a `.sig` tag signature (`sig`, base64,
   * over `payload`) by `verifier` (a certificate or public key, PEM): a Rekor v1 hashedrekord entry
   * integrated at `integratedTime` with its SET.
   */
  annotation(payload: Buffer, sig: string, verifier: string, integratedTime: number): string {
    const body = {
      apiVersion: '0.0.1',
      kind: 'hashedrekord',
      spec: {
        data: { hash: { algorithm: 'sha256', value: sha256(payload).toString('hex') } },
        signature: { content: sig, publicKey: { content: Buffer.from(verifier).toString('base64') } },
      },
    };
    const b64 = Buffer.from(canonical(body)).toString('base64');
    const logIndex = this.index++;
    const logID = this.logID.toString('hex');
    const set = sign('sha256', Buffer.from(canonical({ body: b64, integratedTime, logID, logIndex })), this.privateKey);
    return JSON.stringify({ SignedEntryTimestamp: set.toString('base64'), Payload: { body: b64, integratedTime, logIndex, logID } });
  }

  /** A Sigstore trusted root naming this log and `ca` (PEM file), for `cosign verify --trusted-root`. */
  trustedRoot(ca: string): string {
    const root = new X509Certificate(readFileSync(ca));
    const start = '2020-01-01T00:00:00Z';
    return JSON.stringify({
      mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
      tlogs: [
        {
          baseUrl: `https://${this.origin}`,
          hashAlgorithm: 'SHA2_256',
          publicKey: {
            rawBytes: this.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
            keyDetails: 'PKIX_ECDSA_P256_SHA_256',
            validFor: { start },
          },
          logId: { keyId: this.logID.toString('base64') },
        },
      ],
      certificateAuthorities: [
        {
          subject: { organization: 'fastpull test', commonName: 'ca' },
          uri: 'https://fulcio.fastpull.test',
          certChain: { certificates: [{ rawBytes: root.raw.toString('base64') }] },
          validFor: { start },
        },
      ],
      ctlogs: [],
      timestampAuthorities: [],
    });
  }
}
