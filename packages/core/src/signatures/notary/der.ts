// The outline of a DER encoding: tag, length and where each element starts and ends, nothing decoded.
// Two readers use it instead of the ASN.1 schema library. A CRL's list of entries is only outlined,
// because that library builds an object tree for every node, and a CRL of 200,000 entries (7 MiB)
// took it over 40 seconds and more than a GiB of heap (docs/notation.md): the library gets the small
// pieces (the header without the list, the one entry that names the certificate). And a
// certificate's extensions are read with it (x509.ts), because loading the library's X.509 schemas
// costs more CPU than the rest of a verification, and most chains need nothing else from them.

/** One element: its tag byte and where its header, content and end lie in the buffer. */
export interface Element {
  readonly tag: number;
  readonly start: number;
  readonly content: number;
  readonly end: number;
}

export const SEQUENCE = 0x30;
export const INTEGER = 0x02;
export const BIT_STRING = 0x03;
export const UTC_TIME = 0x17;
export const GENERALIZED_TIME = 0x18;
export const BOOLEAN = 0x01;
export const OCTET_STRING = 0x04;
export const OBJECT_IDENTIFIER = 0x06;

/** The element at `at`, which must end by `limit`. Throws on a truncated or indefinite-length one. */
export function elementAt(buf: Uint8Array, at: number, limit = buf.length): Element {
  if (at + 2 > limit) throw new Error('truncated DER');
  const tag = buf[at]!;
  if ((tag & 0x1f) === 0x1f) throw new Error('a multi-byte tag, which no field read here has');
  let length = buf[at + 1]!;
  let p = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4) throw new Error('an indefinite or oversized DER length');
    length = 0;
    for (let i = 0; i < bytes; i++) {
      if (p >= limit) throw new Error('truncated DER');
      length = length * 256 + buf[p++]!;
    }
  }
  const end = p + length;
  if (end > limit) throw new Error('truncated DER');
  return { tag, start: at, content: p, end };
}

/** The elements inside a constructed one, in order. */
export function* children(buf: Uint8Array, parent: Element): Generator<Element> {
  for (let at = parent.content; at < parent.end;) {
    const child = elementAt(buf, at, parent.end);
    yield child;
    at = child.end;
  }
}

/** A SEQUENCE holding `parts` (each a whole element), DER encoded. */
export function sequenceOf(parts: readonly Uint8Array[]): Uint8Array {
  const length = parts.reduce((n, p) => n + p.length, 0);
  let header: number[];
  if (length < 0x80) header = [SEQUENCE, length];
  else {
    const bytes: number[] = [];
    for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n % 256);
    header = [SEQUENCE, 0x80 | bytes.length, ...bytes];
  }
  return Buffer.concat([Uint8Array.from(header), ...parts]);
}
