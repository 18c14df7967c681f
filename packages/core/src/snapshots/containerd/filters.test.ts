import { describe, expect, it } from 'vitest';
import { isFastpullError } from '../../errors.js';
import { MAX_FILTERS_LENGTH, parseSnapshotFilters } from './filters.js';

const named = (name: string) => ({ name, kind: 'active', labels: {} });
const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return isFastpullError(e) ? e.code : `not a FastpullError: ${String(e)}`;
  }
  return undefined;
};

describe('snapshot filters: regular expressions', () => {
  it('matches a pattern that backtracks exponentially in a backtracking engine, and answers', () => {
    // A backtracking engine takes 2^n steps here: with 64 `a`s it would not finish in any run.
    const f = parseSnapshotFilters(['name~="^(a+)+$"']);
    expect(f.match(named(`${'a'.repeat(64)}!`))).toBe(false);
    expect(f.match(named('a'.repeat(64)))).toBe(true);
    const nested = parseSnapshotFilters(['name~="(x+x+)+y"']);
    expect(nested.match(named('x'.repeat(5000)))).toBe(false);
  });

  it("reads Go's RE2 syntax, as containerd does", () => {
    expect(parseSnapshotFilters(['name~="(?i)^ABC/"']).match(named('abc/d'))).toBe(true);
    expect(parseSnapshotFilters(['name~="^[[:alpha:]]+\\\\z"']).match(named('abc'))).toBe(true);
    expect(parseSnapshotFilters(['name~="^[[:alpha:]]+\\\\z"']).match(named('abc1'))).toBe(false);
    expect(parseSnapshotFilters(['name~="^(?P<ns>[a-z]+)/"']).match(named('k8s/x'))).toBe(false);
    expect(parseSnapshotFilters(['name~="^(?P<ns>[a-z0-9]+)/"']).match(named('k8s/x'))).toBe(true);
    // Matching is a search, as Go's MatchString: unanchored unless the pattern anchors it.
    expect(parseSnapshotFilters(['name~=b/c']).match(named('a/b/c/d'))).toBe(true);
  });

  it('refuses what RE2 does not have (backreferences, lookaround) with INVALID_ARGUMENT', () => {
    expect(codeOf(() => parseSnapshotFilters(['name~="(a)\\\\1"']))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseSnapshotFilters(['name~="a(?=b)"']))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseSnapshotFilters(['name~="a{1001}"']))).toBe('INVALID_ARGUMENT');
  });

  it(`refuses filters longer than ${MAX_FILTERS_LENGTH} characters in all`, () => {
    const half = `name~=${'a'.repeat(MAX_FILTERS_LENGTH / 2)}`;
    expect(codeOf(() => parseSnapshotFilters([half, half]))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseSnapshotFilters([half]))).toBeUndefined();
  });
});
