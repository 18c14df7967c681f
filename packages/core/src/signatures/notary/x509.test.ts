// The certificate fields the chain checks read without the ASN.1 schema library (extensions through
// the DER outline, the subject through X509Certificate) must read as that library reads them: a
// differential over certificates openssl makes, with every key usage bit, extended key usages,
// path lengths, critical flags, escaped and multi-valued subjects, and none at all.
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AsnConvert } from '@peculiar/asn1-schema';
import { BasicConstraints, Certificate, ExtendedKeyUsage, KeyUsage } from '@peculiar/asn1-x509';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCertificate } from './chain.js';
import { formatName, readSubject, subjectDN } from './dn.js';
import { basicConstraints, certificateExtensions, extendedKeyUsages, findExtension, keyUsageFlags, OID, subjectAttributeTypes } from './x509.js';

const dir = mkdtempSync(join(tmpdir(), 'fastpull-x509-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

writeFileSync(
  join(dir, 'x.cnf'),
  [
    '[req]',
    'distinguished_name = dn',
    '[dn]',
    '[none]',
    '[leaf]',
    'keyUsage = critical, digitalSignature',
    'extendedKeyUsage = codeSigning',
    'basicConstraints = CA:FALSE',
    '[ca]',
    'basicConstraints = critical, CA:TRUE, pathlen:0',
    'keyUsage = critical, keyCertSign, cRLSign',
    'subjectKeyIdentifier = hash',
    '[all]',
    'keyUsage = digitalSignature, nonRepudiation, keyEncipherment, dataEncipherment, keyAgreement, keyCertSign, cRLSign, encipherOnly, decipherOnly',
    'extendedKeyUsage = critical, serverAuth, clientAuth, codeSigning, emailProtection, timeStamping, OCSPSigning, 1.2.3.4.5.99999.1234567890123',
    'authorityInfoAccess = OCSP;URI:http://127.0.0.1/ocsp',
    'crlDistributionPoints = URI:http://127.0.0.1/x.crl',
    'basicConstraints = critical, CA:TRUE, pathlen:300',
    'subjectAltName = DNS:example.com',
    '[bits]',
    'keyUsage = critical, nonRepudiation, keyAgreement',
    '',
  ].join('\n'),
);
execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', join(dir, 'k.pem')], { stdio: 'pipe' });

/** A self-signed certificate with the extensions of `section` and `subject` (openssl -subj syntax). */
function make(section: string, subject: string, multi = false): Uint8Array {
  const out = join(dir, 'c.pem');
  const args = [
    'req',
    '-x509',
    '-config',
    join(dir, 'x.cnf'),
    '-extensions',
    section,
    '-key',
    join(dir, 'k.pem'),
    '-out',
    out,
    '-days',
    '1',
    '-utf8',
    '-subj',
    subject,
  ];
  execFileSync('openssl', multi ? [...args, '-multivalue-rdn'] : args, { stdio: 'pipe' });
  return new Uint8Array(new X509Certificate(readFileSync(out)).raw);
}

/** The subject as the verifier read it with the schema library: attribute names by OID, values as text. */
const NAMES: Record<string, string> = {
  '2.5.4.3': 'CN',
  '2.5.4.5': 'SERIALNUMBER',
  '2.5.4.6': 'C',
  '2.5.4.7': 'L',
  '2.5.4.8': 'ST',
  '2.5.4.9': 'STREET',
  '2.5.4.10': 'O',
  '2.5.4.11': 'OU',
  '2.5.4.17': 'POSTALCODE',
};
function librarySubject(der: Uint8Array): { rdns: [string, string][][]; text: string } {
  const name = AsnConvert.parse(der, Certificate).tbsCertificate.subject;
  const rdns = [...name].map((rdn) => rdn.map((a): [string, string] => [NAMES[a.type] ?? a.type, a.value.toString()]));
  return {
    rdns,
    text: [...rdns]
      .reverse()
      .map((rdn) => rdn.map(([t, v]) => `${t}=${v}`).join('+'))
      .join(','),
  };
}

const SECTIONS = ['none', 'leaf', 'ca', 'all', 'bits'];
const SUBJECTS: [string, boolean][] = [
  ['/C=US/ST=WA/O=fastpull/CN=signer', false],
  ['/C=US/ST=WA/L=Seattle/street=1 Main St/postalCode=98101/serialNumber=42/O=fastpull/OU=build/CN=signer', false],
  ['/C=US/ST=Wash\\, A /O=é ü \\+ "q" <x>;\\\\/CN= lead', false],
  ['/C=US/ST=WA/O=fastpull/CN=a+serialNumber=7', true],
  ['/C=US/ST=WA/O=one/O=two', false],
  ['/C=US/ST=WA/O=fastpull/emailAddress=a@example.com/SN=surname/DC=dc', false],
  ['/CN=no country', false],
];

describe('certificate fields read without the ASN.1 schema library', () => {
  it('extensions: the same identifiers, critical flags and values, and the same key usage, basic constraints and extended key usage', () => {
    for (const section of SECTIONS) {
      const der = make(section, '/C=US/ST=WA/O=fastpull/CN=x');
      const ours = certificateExtensions(der);
      const theirs = AsnConvert.parse(der, Certificate).tbsCertificate.extensions ?? [];
      expect(
        ours.map((e) => [e.oid, e.critical, Buffer.from(e.value).toString('hex')]),
        section,
      ).toEqual(theirs.map((e) => [e.extnID, e.critical, Buffer.from(e.extnValue.buffer).toString('hex')]));
      if (section === 'none') expect(ours).toEqual([]);
      const ku = findExtension(ours, OID.keyUsage);
      if (ku) expect(keyUsageFlags(ku.value), section).toBe(AsnConvert.parse(ku.value, KeyUsage).toNumber());
      const bc = findExtension(ours, OID.basicConstraints);
      if (bc) {
        const lib = AsnConvert.parse(bc.value, BasicConstraints);
        expect(basicConstraints(bc.value), section).toEqual({ cA: lib.cA, ...(lib.pathLenConstraint !== undefined && { pathLen: lib.pathLenConstraint }) });
      }
      const eku = findExtension(ours, OID.extKeyUsage);
      if (eku) expect(extendedKeyUsages(eku.value), section).toEqual([...AsnConvert.parse(eku.value, ExtendedKeyUsage)]);
    }
    const all = certificateExtensions(make('all', '/CN=x'));
    expect(keyUsageFlags(findExtension(all, OID.keyUsage)!.value)).toBe(511);
    expect(extendedKeyUsages(findExtension(all, OID.extKeyUsage)!.value)).toContain('1.2.3.4.5.99999.1234567890123');
    expect(basicConstraints(findExtension(all, OID.basicConstraints)!.value)).toEqual({ cA: true, pathLen: 300 });
  });

  it('the subject: the same attributes and values for trusted identities, the same text in messages', () => {
    for (const [subject, multi] of SUBJECTS) {
      const der = make('leaf', subject, multi);
      const rdns = readSubject(new X509Certificate(der).subject, subjectAttributeTypes(der));
      const lib = librarySubject(der);
      expect(rdns, subject).toEqual(lib.rdns);
      expect(formatName(rdns), subject).toBe(lib.text);
      expect(parseCertificate(der).subject, subject).toBe(lib.text);
      const flat = lib.rdns.flat();
      const multiValued = lib.rdns.some((r) => r.length > 1);
      const repeated = new Set(flat.map(([t]) => t)).size !== flat.length;
      const complete = ['C', 'ST', 'O'].every((t) => flat.some(([n, v]) => n === t && v !== ''));
      if (multiValued || repeated || !complete) {
        expect(() => subjectDN(rdns), subject).toThrow(multiValued ? /multi-valued/ : repeated ? /twice/ : /has no/);
      } else {
        expect([...subjectDN(rdns)], subject).toEqual(flat);
      }
    }
  });

  it('a truncated or malformed certificate or extension is an error, not a wrong answer', () => {
    const der = make('all', '/C=US/ST=WA/O=fastpull/CN=x');
    expect(() => certificateExtensions(der.subarray(0, der.length - 80))).toThrow(/truncated/);
    expect(() => keyUsageFlags(Uint8Array.from([0x04, 0x01, 0x00]))).toThrow(/key usage/);
    expect(() => basicConstraints(Uint8Array.from([0x30, 0x03, 0x02, 0x01, 0xff]))).toThrow(/negative/);
    expect(() => extendedKeyUsages(Uint8Array.from([0x30, 0x02, 0x06, 0x00]))).toThrow(/empty object identifier/);
  });
});
