// The frame of the hostile-input campaign (test/reliability-fuzz.test.ts): seeds, run counts, the
// "result or documented error, in bounded time" check, and the count of inputs tried per parser.
import fc from 'fast-check';
import { expect } from 'vitest';
import { isFastpullError, type ErrorCode } from '@fastpull/core';

/** FASTPULL_RELIABILITY_LONG=1: the long variant, RUN_SCALE times the default runs. */
export const LONG = process.env.FASTPULL_RELIABILITY_LONG === '1';
const RUN_SCALE = 25;

/** The base seed: fixed unless FASTPULL_FUZZ_SEED says otherwise (each property adds its own offset). */
export const BASE_SEED = (() => {
  const s = process.env.FASTPULL_FUZZ_SEED;
  if (s === undefined || s === '') return 20_250_808;
  const n = Number(s);
  if (!Number.isSafeInteger(n)) throw new Error(`FASTPULL_FUZZ_SEED=${s}: want an integer`);
  return n;
})();

/** Runs of a property: `n` by default, RUN_SCALE times more in the long variant. */
export function runs(n: number): number {
  return LONG ? n * RUN_SCALE : n;
}

/** fast-check parameters: a fixed seed per property (reproducible), printed on failure by fast-check and by us. */
export interface RunParams {
  readonly seed: number;
  readonly numRuns: number;
  readonly verbose: fc.VerbosityLevel;
}
export function params(offset: number, numRuns: number): RunParams {
  return { seed: BASE_SEED + offset, numRuns: runs(numRuns), verbose: fc.VerbosityLevel.Verbose };
}

/** Inputs tried per parser, and the slowest one, for the report at the end of the suite. */
export const tally = new Map<string, { inputs: number; ok: number; errors: Map<string, number>; maxMs: number }>();

function count(parser: string, outcome: string, ms: number): void {
  let t = tally.get(parser);
  if (!t) tally.set(parser, (t = { inputs: 0, ok: 0, errors: new Map(), maxMs: 0 }));
  t.inputs++;
  if (outcome === 'ok') t.ok++;
  else t.errors.set(outcome, (t.errors.get(outcome) ?? 0) + 1);
  t.maxMs = Math.max(t.maxMs, ms);
}

/** What one parse gave: its value, or the FastpullError it threw. */
export type Outcome<T> = { ok: true; value: T; ms: number } | { ok: false; code: ErrorCode; error: Error; ms: number };

/**
 * CPU milliseconds (user + system) this process has used: what a parse costs, whatever else the
 * machine runs. Wall time on a loaded machine also counts the time this process waited for a core.
 */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** How long an async parse may take in wall time before it counts as hung, per ms of its CPU ceiling. */
const HANG_WALL_FACTOR = 20;

function judge<T>(
  parser: string,
  allowed: readonly ErrorCode[],
  ceilingMs: number,
  describe: () => string,
  r: Outcome<T> | { thrown: unknown; ms: number },
): Outcome<T> {
  if ('thrown' in r) {
    const e = r.thrown;
    count(parser, `not a FastpullError`, r.ms);
    throw new Error(`${parser}: threw something else than a FastpullError on ${describe()}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  }
  count(parser, r.ok ? 'ok' : r.code, r.ms);
  if (!r.ok && !allowed.includes(r.code)) {
    throw new Error(`${parser}: code ${r.code} (want one of ${allowed.join(', ')}) on ${describe()}: ${r.error.message}`);
  }
  if (r.ms > ceilingMs) throw new Error(`${parser}: took ${r.ms.toFixed(1)} ms of CPU (ceiling ${ceilingMs} ms) on ${describe()}`);
  return r;
}

/**
 * Runs a synchronous parser on one input: it must return, or throw a FastpullError whose code is in
 * `allowed`, within `ceilingMs` of CPU time (a blow-up shows there; a loaded machine's waits do not).
 * Anything else fails the property with the input shown.
 */
export function parseSync<T>(parser: string, allowed: readonly ErrorCode[], ceilingMs: number, input: unknown, fn: () => T): Outcome<T> {
  const t = cpuMs();
  let r: Outcome<T> | { thrown: unknown; ms: number };
  try {
    const value = fn();
    r = { ok: true, value, ms: cpuMs() - t };
  } catch (e) {
    const ms = cpuMs() - t;
    r = isFastpullError(e) ? { ok: false, code: e.code, error: e, ms } : { thrown: e, ms };
  }
  return judge(parser, allowed, ceilingMs, () => show(input), r);
}

/**
 * As {@link parseSync} for a parser that returns a promise. Its CPU time may include other work of
 * this process meanwhile (none runs during the campaign). A hang, which uses no CPU, is cut at
 * HANG_WALL_FACTOR times the ceiling in wall time.
 */
export async function parseAsync<T>(
  parser: string,
  allowed: readonly ErrorCode[],
  ceilingMs: number,
  input: unknown,
  fn: () => Promise<T>,
): Promise<Outcome<T>> {
  const t = cpuMs();
  const hangMs = ceilingMs * HANG_WALL_FACTOR;
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HangError(`${parser}: no answer within ${hangMs} ms on ${show(input)}`)), hangMs);
  });
  let r: Outcome<T> | { thrown: unknown; ms: number };
  try {
    const value = await Promise.race([fn(), hang]);
    r = { ok: true, value, ms: cpuMs() - t };
  } catch (e) {
    if (e instanceof HangError) throw e;
    const ms = cpuMs() - t;
    r = isFastpullError(e) ? { ok: false, code: e.code, error: e, ms } : { thrown: e, ms };
  } finally {
    clearTimeout(timer);
  }
  return judge(parser, allowed, ceilingMs, () => show(input), r);
}

class HangError extends Error {}

/** An input as a test failure shows it: JSON for strings and objects, base64 for bytes; cut at 2000 characters. */
export function show(input: unknown): string {
  let s: string;
  if (Buffer.isBuffer(input) || input instanceof Uint8Array) s = `base64:${Buffer.from(input).toString('base64')}`;
  else {
    try {
      s = JSON.stringify(input) ?? String(input);
    } catch {
      s = String(input);
    }
  }
  return s.length > 2000 ? `${s.slice(0, 2000)}... (${s.length} characters)` : s;
}

/** Asserts a property, printing the seed of the run (fast-check's own report adds the shrunk counterexample and path). */
export async function check<Ts extends [unknown, ...unknown[]]>(name: string, prop: fc.IAsyncProperty<Ts> | fc.IProperty<Ts>, p: RunParams): Promise<void> {
  const out = await fc.check(prop as fc.IAsyncProperty<Ts>, p);
  if (out.failed) {
    const report = (fc.defaultReportMessage(out) ?? 'failed').split('\nEncountered failures were:')[0];
    const why = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
    expect.fail(`${name} (FASTPULL_FUZZ_SEED=${BASE_SEED}, fast-check seed ${out.seed}):\n${report}\n${why}`);
  }
}

/** One line per parser: inputs tried, how many parsed, the codes of the others, the slowest input. */
export function tallyReport(): string {
  const lines = [...tally.entries()].map(([p, t]) => {
    const errs = [...t.errors.entries()].map(([c, n]) => `${c} ${n}`).join(', ');
    return `${p}: ${t.inputs} inputs (${t.ok} ok${errs ? `, ${errs}` : ''}), slowest ${t.maxMs.toFixed(1)} ms of CPU`;
  });
  const total = [...tally.values()].reduce((a, t) => a + t.inputs, 0);
  return `${lines.join('\n')}\ntotal: ${total} inputs (seed ${BASE_SEED}${LONG ? ', long' : ''})`;
}

// --- generators shared by several parsers ---

/** Any string: mostly printable ASCII, sometimes any UTF-16 unit (lone surrogates, NUL, controls). */
export const anyString = (maxLength = 300): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength }) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength }) },
    { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'/:@.-_[]%\0\n\t \\"\'=,;'), maxLength: Math.min(maxLength, 60) }) },
  );

/** `s` with up to `n` random edits: a character inserted, deleted, replaced or duplicated. */
export function mutateString(s: fc.Arbitrary<string>, alphabet = '/:@.-_[]aZ09\0 \n"\\=,#\'{}'): fc.Arbitrary<string> {
  const edit = fc.record({
    op: fc.constantFrom('insert', 'delete', 'replace', 'dup', 'truncate'),
    at: fc.nat(),
    ch: fc.oneof(fc.constantFrom(...alphabet), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
  });
  return fc.tuple(s, fc.array(edit, { maxLength: 4 })).map(([base, edits]) => {
    let out = base;
    for (const e of edits) {
      const at = out.length === 0 ? 0 : e.at % (out.length + 1);
      if (e.op === 'insert') out = out.slice(0, at) + e.ch + out.slice(at);
      else if (e.op === 'delete') out = out.slice(0, at) + out.slice(at + 1);
      else if (e.op === 'replace') out = out.slice(0, at) + e.ch + out.slice(at + 1);
      else if (e.op === 'dup') out = out.slice(0, at) + out.slice(at, at + 8) + out.slice(at);
      else out = out.slice(0, at);
    }
    return out;
  });
}

/** Lowercase hex of exactly `n` characters. */
export const hex = (n: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: n, maxLength: n });

/** A valid sha256 digest string. */
export const digestArb: fc.Arbitrary<string> = hex(64).map((h) => `sha256:${h}`);
