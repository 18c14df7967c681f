// containerd's filter syntax for listing snapshots (`ctr snapshots ls` filters, and the one
// containerd's metadata layer sends to find a snapshot a remote snapshotter committed):
//   labels."containerd.io/snapshot.ref"==sha256:…,parent=="k8s.io/3/sha256:…"
// A filter is selectors joined by `,` (all must match); a list of filters matches when any does.
// A selector is a field path (`name`, `parent`, `kind`, `labels.<key>`; a part may be quoted) and
// optionally an operator (`==`, `!=`, `~=` a regular expression) and a value (quoted or bare).
// Regular expressions are Go's RE2 syntax, as containerd reads them, and run on a linear-time
// engine: a client's pattern can never make a match take longer than its pattern times its input.
import { createRequire } from 'node:module';
import type { RE2JS } from 're2js';
import { FastpullError } from '../../errors.js';

let engine: typeof RE2JS | undefined;

/**
 * The RE2 engine, loaded at the first `~=` selector: most filters containerd sends compare labels
 * and names, and a long-running process (fastpulld) that never sees a pattern does not hold the
 * engine's compiled code and source text (1.3 MiB of memory).
 */
function re2(): typeof RE2JS {
  engine ??= (createRequire(import.meta.url)('re2js') as typeof import('re2js')).RE2JS;
  return engine;
}

/** What a filter looks at in a snapshot. */
export interface FilterTarget {
  readonly name: string;
  readonly parent?: string;
  readonly kind: string;
  readonly labels: Readonly<Record<string, string>>;
}

type Operator = 'present' | '==' | '!=' | '~=';
interface Selector {
  readonly path: readonly string[];
  readonly op: Operator;
  readonly value: string;
  readonly re?: RE2JS;
}

/** A parsed filter list: `match` says whether a snapshot passes. */
export interface SnapshotFilter {
  match(target: FilterTarget): boolean;
}

const QUOTES = new Set(['"', '/', '|']);
const ESCAPES: Readonly<Record<string, string>> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  private fail(why: string): never {
    throw new FastpullError('INVALID_ARGUMENT', `filter ${JSON.stringify(this.s)}: ${why} at offset ${this.i}`);
  }

  private skipSpace(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
  }

  private quoted(): string {
    const quote = this.s[this.i++]!;
    let out = '';
    for (;;) {
      if (this.i >= this.s.length) this.fail('unterminated quoted string');
      const c = this.s[this.i++]!;
      if (c === quote) return out;
      if (c === '\n') this.fail('unterminated quoted string');
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.s[this.i++];
      if (e === undefined) this.fail('unterminated escape');
      if (e === quote) out += quote;
      else if (ESCAPES[e] !== undefined) out += ESCAPES[e];
      else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(this.s.slice(this.i, this.i + 2))) {
        out += String.fromCharCode(parseInt(this.s.slice(this.i, this.i + 2), 16));
        this.i += 2;
      } else this.fail(`unknown escape \\${e}`);
    }
  }

  private field(): string {
    this.skipSpace();
    if (QUOTES.has(this.s[this.i] ?? '')) return this.quoted();
    const m = /^[A-Za-z0-9_]+/.exec(this.s.slice(this.i));
    if (!m) this.fail('expected a field name');
    this.i += m[0].length;
    return m[0];
  }

  private value(): string {
    this.skipSpace();
    if (QUOTES.has(this.s[this.i] ?? '')) return this.quoted();
    const m = /^[^\s,]+/.exec(this.s.slice(this.i));
    if (!m) this.fail('expected a value');
    this.i += m[0].length;
    return m[0];
  }

  private selector(): Selector {
    const path = [this.field()];
    while (this.s[this.i] === '.') {
      this.i++;
      path.push(this.field());
    }
    this.skipSpace();
    const op = this.s.slice(this.i, this.i + 2);
    if (op !== '==' && op !== '!=' && op !== '~=') return { path, op: 'present', value: '' };
    this.i += 2;
    const value = this.value();
    if (op !== '~=') return { path, op, value };
    try {
      return { path, op, value, re: re2().compile(value) };
    } catch (e) {
      this.fail(`bad regular expression ${JSON.stringify(value)} (${e instanceof Error ? e.message : String(e)})`);
    }
  }

  parse(): Selector[] {
    const out = [this.selector()];
    for (;;) {
      this.skipSpace();
      if (this.i >= this.s.length) return out;
      if (this.s[this.i] !== ',') this.fail('expected "," or the end');
      this.i++;
      out.push(this.selector());
    }
  }
}

/** The value a field path has in a snapshot, as containerd's snapshot adaptor reads it. */
function field(t: FilterTarget, path: readonly string[]): string | undefined {
  switch (path[0]) {
    case 'name':
      return t.name;
    case 'parent':
      return t.parent ?? '';
    case 'kind':
      return t.kind;
    case 'labels': {
      const key = path.slice(1).join('.');
      return Object.prototype.hasOwnProperty.call(t.labels, key) ? t.labels[key] : undefined;
    }
    default:
      return undefined;
  }
}

function matches(sel: Selector, t: FilterTarget): boolean {
  const v = field(t, sel.path);
  switch (sel.op) {
    case 'present':
      return v !== undefined;
    case '==':
      return v === sel.value;
    case '!=':
      return (v ?? '') !== sel.value;
    case '~=':
      return sel.re!.test(v ?? '');
  }
}

/**
 * The most a List's filters may hold, all together, in UTF-16 code units: containerd's own filters
 * are a few hundred; the bound keeps a client's pattern (compiled, then run against every
 * snapshot) small.
 */
export const MAX_FILTERS_LENGTH = 64 * 1024;

/**
 * Parses containerd filters; none (or only empty ones) match everything. Throws INVALID_ARGUMENT
 * for a filter that does not parse, and for filters longer than {@link MAX_FILTERS_LENGTH}.
 * @example
 * const f = parseSnapshotFilters(['kind==committed,labels."containerd.io/snapshot.ref"==sha256:abc']);
 * f.match({ name: 'n', kind: 'committed', labels: { 'containerd.io/snapshot.ref': 'sha256:abc' } }); // true
 */
export function parseSnapshotFilters(filters: readonly string[]): SnapshotFilter {
  const length = filters.reduce((n, f) => n + f.length, 0);
  if (length > MAX_FILTERS_LENGTH)
    throw new FastpullError('INVALID_ARGUMENT', `filters of ${length} characters, over the ${MAX_FILTERS_LENGTH} a List may send`);
  const parsed = filters.map((f) => (f === '' ? [] : new Parser(f).parse()));
  return {
    match: (t) => parsed.length === 0 || parsed.some((sels) => sels.every((s) => matches(s, t))),
  };
}
