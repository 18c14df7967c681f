// The parts of an X.509 certificate the chain checks need that node:crypto's X509Certificate does not
// give: each extension's criticality and value, and the three extensions the certificate requirements
// decode (key usage bits, basic constraints' CA flag and path length, extended key usage purposes).
// Read with the DER outline (der.ts) rather than the ASN.1 schema library, whose X.509 schemas cost
// more CPU to load than the rest of a verification; the revocation checks, which need more of a
// certificate, load that library when a certificate names an OCSP responder or a CRL.
import { BIT_STRING, BOOLEAN, children, elementAt, INTEGER, OBJECT_IDENTIFIER, OCTET_STRING, SEQUENCE, type Element } from './der.js';

/** One extension of a certificate, its value still DER. */
export interface CertificateExtension {
  readonly oid: string;
  readonly critical: boolean;
  readonly value: Uint8Array;
}

/** Extension and purpose identifiers this verifier reads (RFC 5280). */
export const OID = {
  keyUsage: '2.5.29.15',
  basicConstraints: '2.5.29.19',
  extKeyUsage: '2.5.29.37',
  crlDistributionPoints: '2.5.29.31',
  authorityInfoAccess: '1.3.6.1.5.5.7.1.1',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  codeSigning: '1.3.6.1.5.5.7.3.3',
  emailProtection: '1.3.6.1.5.5.7.3.4',
  timeStamping: '1.3.6.1.5.5.7.3.8',
  ocspSigning: '1.3.6.1.5.5.7.3.9',
} as const;

/** Key usage bits as flags: bit n of the BIT STRING (n = 0 first) is 2^n. */
export const KEY_USAGE = {
  digitalSignature: 1,
  nonRepudiation: 2,
  keyEncipherment: 4,
  dataEncipherment: 8,
  keyAgreement: 16,
  keyCertSign: 32,
  cRLSign: 64,
  encipherOnly: 128,
  decipherOnly: 256,
} as const;

function expectElement(buf: Uint8Array, at: number, tag: number, limit: number, what: string): Element {
  const el = elementAt(buf, at, limit);
  if (el.tag !== tag) throw new Error(`${what} is not where the certificate should have it`);
  return el;
}

/** Dotted text of an OBJECT IDENTIFIER's content. */
export function oidText(buf: Uint8Array, el: Element): string {
  if (el.end === el.content) throw new Error('an empty object identifier');
  const arcs: number[] = [];
  let value = 0;
  for (let i = el.content; i < el.end; i++) {
    const b = buf[i]!;
    value = value * 128 + (b & 0x7f);
    if (value > Number.MAX_SAFE_INTEGER / 128) throw new Error('an object identifier arc too large');
    if ((b & 0x80) === 0) {
      if (arcs.length === 0) arcs.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
      else arcs.push(value);
      value = 0;
    } else if (i === el.end - 1) throw new Error('a truncated object identifier');
  }
  return arcs.join('.');
}

/** The fields of the to-be-signed certificate, in order. */
function tbsFields(der: Uint8Array): Element[] {
  const cert = expectElement(der, 0, SEQUENCE, der.length, 'the certificate');
  const tbs = expectElement(der, cert.content, SEQUENCE, cert.end, 'the to-be-signed certificate');
  return [...children(der, tbs)];
}

/** The extensions of a DER certificate, in order (none for a certificate without the field). */
export function certificateExtensions(der: Uint8Array): CertificateExtension[] {
  // extensions [3] EXPLICIT comes last; the fields before it (version, serial, ..., unique IDs) are skipped.
  const field = tbsFields(der).find((c) => c.tag === 0xa3);
  if (!field) return [];
  const list = expectElement(der, field.content, SEQUENCE, field.end, 'the extension list');
  const out: CertificateExtension[] = [];
  for (const ext of children(der, list)) {
    if (ext.tag !== SEQUENCE) throw new Error('an extension is not a SEQUENCE');
    const parts = [...children(der, ext)];
    const hasCritical = parts[1]?.tag === BOOLEAN;
    const [id, value] = [parts[0], parts[hasCritical ? 2 : 1]];
    if (id?.tag !== OBJECT_IDENTIFIER || value?.tag !== OCTET_STRING || parts.length !== (hasCritical ? 3 : 2))
      throw new Error('an extension is not (id, critical, value)');
    const critical = hasCritical && parts[1]!.end > parts[1]!.content && der[parts[1]!.content] !== 0;
    out.push({ oid: oidText(der, id), critical, value: der.subarray(value.content, value.end) });
  }
  return out;
}

/**
 * The attribute types of the subject's RDNs, in order, as dotted identifiers: X509Certificate prints
 * the values (decoded from whichever string type) but names types by OpenSSL's own short names.
 */
export function subjectAttributeTypes(der: Uint8Array): string[][] {
  const fields = tbsFields(der);
  // version [0] is optional; then serial, signature algorithm, issuer, validity, subject.
  const subject = fields[fields[0]?.tag === 0xa0 ? 5 : 4];
  if (subject?.tag !== SEQUENCE) throw new Error('the subject is not where the certificate should have it');
  return [...children(der, subject)].map((rdn) =>
    [...children(der, rdn)].map((attr) => {
      const type = attr.tag === SEQUENCE ? elementAt(der, attr.content, attr.end) : undefined;
      if (type?.tag !== OBJECT_IDENTIFIER) throw new Error('a subject attribute has no type');
      return oidText(der, type);
    }),
  );
}

/** The first extension with `oid`. */
export function findExtension(extensions: readonly CertificateExtension[], oid: string): CertificateExtension | undefined {
  return extensions.find((e) => e.oid === oid);
}

/** The key usage extension's bits as {@link KEY_USAGE} flags. */
export function keyUsageFlags(value: Uint8Array): number {
  const bits = expectElement(value, 0, BIT_STRING, value.length, 'the key usage');
  const bytes = value.subarray(bits.content + 1, bits.end);
  let flags = 0;
  for (let n = 0; n < Math.min(bytes.length * 8, 9); n++) if (bytes[n >> 3]! & (0x80 >> (n & 7))) flags |= 1 << n;
  return flags;
}

/** The basic constraints extension: whether the subject is a CA, and its path length limit. */
export function basicConstraints(value: Uint8Array): { cA: boolean; pathLen?: number } {
  const seq = expectElement(value, 0, SEQUENCE, value.length, 'the basic constraints');
  let cA = false;
  let pathLen: number | undefined;
  for (const el of children(value, seq)) {
    if (el.tag === BOOLEAN) cA = el.end > el.content && value[el.content] !== 0;
    else if (el.tag === INTEGER) {
      if (el.end - el.content > 4 || value[el.content]! & 0x80) throw new Error('the path length constraint is negative or too large');
      pathLen = value.subarray(el.content, el.end).reduce((n, b) => n * 256 + b, 0);
    } else throw new Error('the basic constraints hold an unexpected element');
  }
  return pathLen === undefined ? { cA } : { cA, pathLen };
}

/** The purposes an extended key usage extension lists. */
export function extendedKeyUsages(value: Uint8Array): string[] {
  const seq = expectElement(value, 0, SEQUENCE, value.length, 'the extended key usage');
  return [...children(value, seq)].map((el) => {
    if (el.tag !== OBJECT_IDENTIFIER) throw new Error('an extended key usage purpose is not an object identifier');
    return oidText(value, el);
  });
}
