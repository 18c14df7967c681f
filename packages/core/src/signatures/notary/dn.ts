// X.509 distinguished names as the trust policy's `x509.subject:` identities compare them: RFC 4514
// strings parsed into attribute -> value maps, one value per attribute, C, ST and O required; an
// identity matches a certificate when each of its attributes has the same value in the subject. A
// certificate's subject values come from node:crypto's X509Certificate, its attribute types from the
// DER, so that no ASN.1 schema library is loaded for it.

/** Attribute type names of the subject attributes trust policies name, by OID. */
const SHORT_NAMES: Readonly<Record<string, string>> = {
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
const REQUIRED = ['C', 'ST', 'O'] as const;

export type DistinguishedName = ReadonlyMap<string, string>;

/** A certificate's subject: its RDNs in order, each a list of [type, value]. */
export type SubjectRDNs = readonly (readonly (readonly [string, string])[])[];

/** Splits on separators that no backslash escapes. */
function splitUnescaped(s: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && i + 1 < s.length) {
      current += c + s[i + 1]!;
      i++;
    } else if (c === separator) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

function unescapeValue(raw: string): string {
  // Unescaped spaces at either end are not part of the value (RFC 4514 section 3).
  const trimmed = raw.replace(/^ +/, '').replace(/(?<!\\) +$/, '');
  const bytes: number[] = [];
  for (let i = 0; i < trimmed.length; i++) {
    const c = trimmed[i]!;
    if (c === '\\') {
      const hex = trimmed.slice(i + 1, i + 3);
      if (/^[0-9a-fA-F]{2}$/.test(hex)) {
        bytes.push(Number.parseInt(hex, 16));
        i += 2;
        continue;
      }
      if (i + 1 >= trimmed.length) throw new Error('a trailing backslash escapes nothing');
      i++;
      bytes.push(...Buffer.from(trimmed[i]!, 'utf8'));
      continue;
    }
    bytes.push(...Buffer.from(c, 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

function checkRequired(dn: Map<string, string>, what: string): void {
  for (const attr of REQUIRED) {
    if (!dn.get(attr)) throw new Error(`${what} has no ${attr} attribute: C, ST (or S) and O are required`);
  }
}

/** Parses an RFC 4514 DN; throws an Error that says what is wrong with it. */
export function parseDN(text: string): DistinguishedName {
  if (text.includes('=#')) throw new Error(`distinguished name ${JSON.stringify(text)}: hex-encoded values (=#) are not supported`);
  const dn = new Map<string, string>();
  for (const rdn of splitUnescaped(text, ',')) {
    if (splitUnescaped(rdn, '+').length > 1) throw new Error(`distinguished name ${JSON.stringify(text)} has a multi-valued RDN`);
    const eq = rdn.indexOf('=');
    if (eq <= 0) throw new Error(`distinguished name ${JSON.stringify(text)}: ${JSON.stringify(rdn.trim())} is not TYPE=VALUE`);
    let type = rdn.slice(0, eq).trim().toUpperCase();
    if (!/^([A-Z][A-Z0-9-]*|\d+(\.\d+)*)$/.test(type))
      throw new Error(`distinguished name ${JSON.stringify(text)}: bad attribute type ${JSON.stringify(type)}`);
    if (type === 'S') type = 'ST';
    if (dn.has(type)) throw new Error(`distinguished name ${JSON.stringify(text)} names ${type} twice`);
    dn.set(type, unescapeValue(rdn.slice(eq + 1)));
  }
  checkRequired(dn, `distinguished name ${JSON.stringify(text)}`);
  return dn;
}

/**
 * The subject's RDNs from X509Certificate's `subject` (the values, one RDN a line, RFC 2253 escaped,
 * a multi-valued RDN's values joined by " + ") and the attribute types read from the DER
 * (`subjectAttributeTypes`): types by the names trust policies use, else as dotted identifiers.
 */
export function readSubject(printed: string, types: readonly (readonly string[])[]): SubjectRDNs {
  const lines = printed === '' ? [] : printed.split('\n');
  if (lines.length !== types.length) throw new Error(`the subject has ${types.length} RDNs but ${lines.length} were printed`);
  return lines.map((line, i) => {
    // A "+" inside a value is escaped; an unescaped one joins the values of a multi-valued RDN.
    const parts = splitUnescaped(line, '+');
    if (parts.length !== types[i]!.length) throw new Error('a multi-valued RDN of the subject was printed with another number of values');
    return parts.map((part, j): [string, string] => {
      const eq = part.indexOf('=');
      if (eq <= 0) throw new Error(`the subject has an attribute without a type: ${JSON.stringify(part)}`);
      const oid = types[i]![j]!;
      return [SHORT_NAMES[oid] ?? oid, unescapeValue(part.slice(eq + 1))];
    });
  });
}

/** The subject as a DN map; throws when it lacks C, ST or O, repeats one, or has a multi-valued RDN. */
export function subjectDN(subject: SubjectRDNs): DistinguishedName {
  const dn = new Map<string, string>();
  for (const rdn of subject) {
    if (rdn.length > 1) throw new Error('the certificate subject has a multi-valued RDN');
    for (const [type, value] of rdn) {
      if (dn.has(type)) throw new Error(`the certificate subject names ${type} twice`);
      dn.set(type, value);
    }
  }
  checkRequired(dn, 'the certificate subject');
  return dn;
}

/** Whether every attribute of `identity` has the same value in `subject`. */
export function isSubsetDN(identity: DistinguishedName, subject: DistinguishedName): boolean {
  for (const [k, v] of identity) if (subject.get(k) !== v) return false;
  return true;
}

/** The subject in RFC 4514 order (most significant RDN last), for messages. */
export function formatName(subject: SubjectRDNs): string {
  return [...subject]
    .reverse()
    .map((rdn) => rdn.map(([type, value]) => `${type}=${value}`).join('+'))
    .join(',');
}
