// Reads the public surface of @fastpull/core with the TypeScript compiler API: which names each entry
// point exports (values and types), and whether each export is documented the way the library
// promises (a TSDoc summary on everything, an @example on every function and class, a comment on
// every public member of an interface or class, no `any` in a public signature). surface.test.ts compares the result with the committed list.
//
// A `.testkit.ts` file: type-checked with the tests, never built into dist (core does not depend on
// typescript at run time).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/** The entry points: package export path, and the source file behind it (relative to `src/`). */
export const ENTRY_POINTS = {
  '.': 'index.ts',
  './content': 'content/index.ts',
  './snapshots': 'snapshots/index.ts',
  './registry': 'registry/index.ts',
  './testing': 'testing/index.ts',
  './tuning': 'tuning.ts',
  './unpack': 'unpack/index.ts',
  './worker-ahead': 'worker-ahead.ts',
} as const;

/** A package export path of {@link ENTRY_POINTS}. */
export type EntryPoint = keyof typeof ENTRY_POINTS;

/** What the analysis found for one entry point. */
export interface EntrySurface {
  /** Exported names, sorted; type-only exports are written `type Name`. */
  readonly names: string[];
  /** Documentation and typing problems, one line each (`Name: what is wrong`); empty when none. */
  readonly problems: string[];
}

/**
 * Analyses the entry points under `srcDir` (the package's `src/`), using the compiler options of
 * the tsconfig.json next to it. `entries` defaults to {@link ENTRY_POINTS}.
 */
export function analyseSurface<E extends string = EntryPoint>(
  srcDir: string,
  entries: Readonly<Record<E, string>> = ENTRY_POINTS as unknown as Record<E, string>,
): Record<E, EntrySurface> {
  const configPath = join(dirname(srcDir), 'tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    configPath,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error(`cannot read ${configPath}`);
  const files = Object.values<string>(entries).map((f) => join(srcDir, f));
  const program = ts.createProgram(files, { ...parsed.options, noEmit: true, composite: false, declaration: false, declarationMap: false });
  const checker = program.getTypeChecker();
  const out = {} as Record<E, EntrySurface>;
  for (const [entry, file] of Object.entries(entries) as [E, string][]) {
    const source = program.getSourceFile(join(srcDir, file));
    if (!source) throw new Error(`${file}: not in the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (!moduleSymbol) throw new Error(`${file}: not a module`);
    const names: string[] = [];
    const problems: string[] = [];
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const isValue = (target.flags & ts.SymbolFlags.Value) !== 0;
      names.push(isValue ? exported.name : `type ${exported.name}`);
      problems.push(...checkExport(checker, target).map((p) => `${exported.name}: ${p}`));
    }
    out[entry] = { names: names.sort(compareNames), problems };
  }
  return out;
}

/** Sorts by name, ignoring the `type ` prefix and case. */
function compareNames(a: string, b: string): number {
  const key = (s: string) => s.replace(/^type /, '').toLowerCase();
  return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a < b ? -1 : a > b ? 1 : 0;
}

/** The documentation and typing problems of one exported symbol. */
function checkExport(checker: ts.TypeChecker, symbol: ts.Symbol): string[] {
  const problems: string[] = [];
  const summary = ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
  if (summary === '') problems.push('no TSDoc summary');
  if (isCallable(checker, symbol) || symbol.flags & ts.SymbolFlags.Class) {
    const tags = symbol.getJsDocTags(checker).map((t) => t.name);
    if (!tags.includes('example')) problems.push('no @example');
  }
  for (const where of anyIn(checker, symbol)) problems.push(`\`any\` in ${where}`);
  if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class)) {
    for (const member of publicMembers(checker, checker.getDeclaredTypeOfSymbol(symbol))) {
      if (ts.displayPartsToString(member.getDocumentationComment(checker)).trim() === '') problems.push(`member ${member.name} has no comment`);
    }
  }
  return problems;
}

/** The public members of an interface or class that this package declares (not inherited from a library). */
function publicMembers(checker: ts.TypeChecker, type: ts.Type): ts.Symbol[] {
  return checker.getPropertiesOfType(type).filter((p) => {
    const d = p.valueDeclaration ?? p.declarations?.[0];
    if (!d || d.getSourceFile().isDeclarationFile || p.name.startsWith('#')) return false;
    return (ts.getCombinedModifierFlags(d) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
  });
}

/** True for functions, and for constants holding one. */
function isCallable(checker: ts.TypeChecker, symbol: ts.Symbol): boolean {
  if (symbol.flags & ts.SymbolFlags.Function) return true;
  if (!(symbol.flags & ts.SymbolFlags.Variable)) return false;
  const decl = symbol.valueDeclaration;
  if (!decl) return false;
  return checker.getTypeOfSymbolAtLocation(symbol, decl).getCallSignatures().length > 0;
}

const ANY = /\bany\b/;
const FULL = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.InTypeAlias;

/** Where `any` appears in the public typing of `symbol`: its type, signatures and public members. */
function anyIn(checker: ts.TypeChecker, symbol: ts.Symbol): string[] {
  const found: string[] = [];
  const decl = symbol.declarations?.[0];
  if (!decl) return found;
  const show = (t: ts.Type) => checker.typeToString(t, undefined, FULL);
  const signatures = (t: ts.Type, where: string) => {
    for (const s of [...t.getCallSignatures(), ...t.getConstructSignatures()]) {
      for (const p of s.getParameters()) {
        if (ANY.test(show(checker.getTypeOfSymbolAtLocation(p, decl)))) found.push(`${where} parameter ${p.name}`);
      }
      if (ANY.test(show(s.getReturnType()))) found.push(`${where} return type`);
    }
  };
  const members = (t: ts.Type, where: string) => {
    if (t.isUnionOrIntersection()) {
      for (const part of t.types) members(part, where);
      return;
    }
    if (!(t.flags & ts.TypeFlags.Object)) return;
    for (const p of checker.getPropertiesOfType(t)) {
      const d = p.valueDeclaration ?? p.declarations?.[0];
      // Members of library types (String, Map, ...) are not ours to check.
      if (!d || d.getSourceFile().isDeclarationFile) continue;
      if (ts.getCombinedModifierFlags(d) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
      if (p.name.startsWith('#')) continue;
      const pt = checker.getTypeOfSymbolAtLocation(p, d);
      if (pt.getCallSignatures().length > 0) signatures(pt, `${where}.${p.name}`);
      else if (ANY.test(show(pt))) found.push(`${where}.${p.name}`);
    }
  };
  if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
    const t = checker.getDeclaredTypeOfSymbol(symbol);
    if (ANY.test(show(t))) found.push('its type');
    members(t, symbol.name);
  }
  if (symbol.flags & ts.SymbolFlags.Class) {
    members(checker.getDeclaredTypeOfSymbol(symbol), symbol.name);
    signatures(checker.getTypeOfSymbolAtLocation(symbol, decl), symbol.name);
  } else if (symbol.flags & (ts.SymbolFlags.Function | ts.SymbolFlags.Variable)) {
    const t = checker.getTypeOfSymbolAtLocation(symbol, decl);
    if (t.getCallSignatures().length > 0) signatures(t, symbol.name);
    else if (ANY.test(show(t))) found.push('its type');
  }
  return found;
}

/**
 * Problems with the package.json `exports` of `packageDir`: every entry point must map the
 * `@fastpull/source` condition to its source file, and `types` and `default` to the build output.
 */
export function checkPackageExports(packageDir: string): string[] {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { exports?: Record<string, unknown> };
  const problems: string[] = [];
  for (const [entry, file] of Object.entries(ENTRY_POINTS)) {
    const want = {
      '@fastpull/source': `./src/${file}`,
      types: `./dist/${file.replace(/\.ts$/, '.d.ts')}`,
      default: `./dist/${file.replace(/\.ts$/, '.js')}`,
    };
    const got = pkg.exports?.[entry];
    if (JSON.stringify(got) !== JSON.stringify(want))
      problems.push(`exports[${JSON.stringify(entry)}] is ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  const known = new Set<string>([...Object.keys(ENTRY_POINTS), './package.json']);
  for (const entry of Object.keys(pkg.exports ?? {})) if (!known.has(entry)) problems.push(`exports[${JSON.stringify(entry)}] is not a known entry point`);
  return problems;
}
