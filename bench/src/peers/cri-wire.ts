// The two CRI messages the benchmark's client sends and reads, in protobuf's wire format by hand:
// PullImageRequest and ImageStatusRequest are both { 1: ImageSpec { 1: image name } }, and
// PullImageResponse is { 1: image_ref } (cri-api runtime.v1 field numbers).

/** A non-negative integer as a protobuf varint (arithmetic, not 32-bit operators: any safe integer). */
export function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Buffer.from(out);
}

/** Field 1, wire type 2 (bytes, string or message). */
export const field1 = (body: Buffer): Buffer => Buffer.concat([Buffer.from([0x0a]), varint(body.byteLength), body]);
/** PullImageRequest and ImageStatusRequest alike: { image: ImageSpec { image: name } }. */
export const imageRequest = (name: string): Buffer => field1(field1(Buffer.from(name, 'utf8')));

/** The varint at `at`, and where it ends. */
export function readVarint(buf: Buffer, at: number): [number, number] {
  let n = 0;
  for (let shift = 0; at < buf.byteLength; shift += 7) {
    const b = buf[at++]!;
    n += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) break;
  }
  return [n, at];
}

/** Field 1 of a message when it comes first and length-delimited (PullImageResponse.image_ref), else ''. */
export function readField1(buf: Buffer): string {
  const [tag, at] = readVarint(buf, 0);
  if (tag !== 0x0a) return '';
  const [len, start] = readVarint(buf, at);
  return buf.subarray(start, start + len).toString('utf8');
}
