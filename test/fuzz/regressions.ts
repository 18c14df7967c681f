// Inputs the hostile-input campaign once failed on, kept as concrete cases tried on every run
// (test/reliability-fuzz.test.ts). Each says what went wrong and what the fix was.

export interface Regression {
  readonly parser: 'reference' | 'digest' | 'manifest' | 'www-authenticate' | 'hosts.toml' | 'fastpulld.toml' | 'tar';
  /** The input: text, or for 'tar' the stream gzipped, as base64. */
  readonly input: string;
  /** What it did wrong before the fix. */
  readonly why: string;
  /** What it must give now, where a parser's answer is checked exactly. */
  readonly expect?: unknown;
  /** For 'tar': the sizes of the chunks the stream is fed in. */
  readonly chunks?: readonly number[];
}

export const REGRESSIONS: readonly Regression[] = [
  {
    parser: 'www-authenticate',
    input: 'a __proto__=""',
    why: 'a parameter named __proto__ was lost (params was a plain object); params now have no prototype',
    expect: '[{"scheme":"a","params":{"__proto__":""}}]',
  },
  {
    parser: 'www-authenticate',
    input: 'Bearer realm="https://auth/token",constructor="x",__proto__="y"',
    why: 'parameters named like Object.prototype members must be plain parameters',
    expect: '[{"scheme":"bearer","params":{"realm":"https://auth/token","constructor":"x","__proto__":"y"}}]',
  },
  {
    parser: 'hosts.toml',
    input: 'header.__proto__ = []\n',
    why: 'header.__proto__ = [] made an array the prototype of the headers object; headers now have no prototype',
    expect: ['__proto__'],
  },
  {
    parser: 'hosts.toml',
    input: 'server = "https://r.example"\nheader.__proto__ = "x"\nheader.X-Ok = "1"\n',
    why: 'a header named __proto__ was silently dropped',
    expect: ['__proto__', 'X-Ok'],
  },
  {
    parser: 'hosts.toml',
    input: 'dial_timeout = "35792m"\n',
    why: 'a dial timeout over 2^31-1 ms was kept, and a Node timer runs such a delay after 1 ms; it is now clamped',
  },
  {
    parser: 'hosts.toml',
    input: `dial_timeout = "${'9'.repeat(400)}h"\n`,
    why: 'an overlong duration gave an infinite dial timeout',
  },
  {
    parser: 'hosts.toml',
    input: `a = ${'['.repeat(20_000)}`,
    why: 'deeply nested arrays overflowed the stack (RangeError instead of INVALID_ARGUMENT); nesting is now limited to 16',
  },
  { parser: 'hosts.toml', input: 'client = [["c.cert", "c.key"]]\n', why: 'the two-deep nesting hosts.toml uses stays accepted' },
  {
    parser: 'fastpulld.toml',
    input: '[log_level]\nx = 0',
    why: 'a table as log_level threw a TypeError (String() of a prototype-less TOML table)',
    expect: 'INVALID_ARGUMENT',
  },
  { parser: 'fastpulld.toml', input: '[group]\nx = 0', why: 'a table as group threw a TypeError', expect: 'INVALID_ARGUMENT' },
  { parser: 'fastpulld.toml', input: '[metrics_address]\nx = 0', why: 'a table as metrics_address threw a TypeError', expect: 'INVALID_ARGUMENT' },
  { parser: 'fastpulld.toml', input: 'group = 1000', why: 'a numeric gid stays accepted', expect: 'ok' },
  {
    parser: 'fastpulld.toml',
    input: 'shutdown_timeout = 1e10',
    why: 'a shutdown timeout past what a timer holds was accepted, and the timer would fire at once',
    expect: 'INVALID_ARGUMENT',
  },
  { parser: 'fastpulld.toml', input: 'shutdown_timeout = "99999999999m"', why: 'as above, in minutes', expect: 'INVALID_ARGUMENT' },
  { parser: 'fastpulld.toml', input: 'chunk_size = "8388608G"', why: 'a chunk size past 2^53 was accepted', expect: 'INVALID_ARGUMENT' },
  { parser: 'fastpulld.toml', input: 'chunk_size = "99999999999999999999G"', why: 'an infinite-ish chunk size was accepted', expect: 'INVALID_ARGUMENT' },
  {
    parser: 'tar',
    // A PAX header of size 0, then a file "a", then the end marker.
    input:
      'H4sIAAAAAAACA9PT19N3CEis8EhNTEktYqAJMDAwMDAzMQHTBgYG6DSYbWhsbmRuYggRNzQ0NTRiUKhgoAMoLS5JLGIwMKCGJ5E9N0RAIh3sIDn+DcyNzcwZFAxG438UjIJRMApoBgC6/9/7AAgAAA==',
    chunks: [1, 512, 1024, 4096],
    why: 'an empty PAX header ending exactly where the buffered bytes ended threw a TypeError (take(0) read chunks[0] of an empty buffer); a valid layer could hit it at a read boundary',
    expect: 'ok',
  },
  {
    parser: 'tar',
    // A PAX header whose size is -1 in base-256, then a file "a".
    input:
      'H4sIAAAAAAACA9PT19N3CEis8EhNTEktYqAJaACTjEsaUPgMDP+RAEwsPk6AwcDQxNjYkEGhgoEOoLS4JLGIwcCAOp5E0EMEJNLBDgMDAwMzExMwbWBggE6D2YbG5kbmJoZQcXNjM3MGBYOhFP/onhsFo2AUjIJBDgDkttqOAAgAAA==',
    chunks: [1, 512, 4096],
    why: 'a negative meta-header size was read as an empty header (or threw a TypeError); Go refuses it, so it is INVALID_LAYER now',
    expect: 'INVALID_LAYER',
  },
  {
    parser: 'tar',
    // A GNU long name header whose size is -512 in base-256.
    input:
      'H4sIAAAAAAACA9PT19N38MnPS/fJzMtmoA1oAJOMSxpQ+AwM/+HgH1wsPk6AwcDQ2NTYkEHBh4EOoLS4JLGIwcCAOp5E0EMEJNLBDgMDAwMzExMwbWBggE6D2YbG5kbmJoZQcXNjM3MGBYOhFP/onhsFo2AUjIJBDgDT0P7KAAgAAA==',
    chunks: [1, 512, 4096],
    why: 'as above for a GNU long name',
    expect: 'INVALID_LAYER',
  },
];
