// Lint: ESLint's recommended rules and typescript-eslint's type-checked ones (promises nobody
// awaits or handles, promises passed where a callback's return is ignored, awaiting what is not a
// promise, values of type any flowing on unchecked, assertions the types already make), over the
// product, its tests and the bench. `pnpm run lint`; CI runs it through scripts/test.sh.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/*.d.ts', '**/*.cjs', '**/*.mjs', 'bench/.cache/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // The test configurations include what the build's leave out (*.test.ts beside the sources).
        project: [
          'packages/core/tsconfig.tests.json',
          'packages/daemon/tsconfig.tests.json',
          'packages/cli/tsconfig.tests.json',
          'bench/tsconfig.json',
          'test/tsconfig.json',
        ],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // Destructuring a field away (`const { secret: _secret, ...rest } = o`) and a parameter an
      // interface requires but an implementation does not read are named with a leading _.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // An async function that does not await still promises its errors as rejections, which is the
      // contract of the interfaces it implements (close(), an async generator over a buffer).
      '@typescript-eslint/require-await': 'off',
      // A caught value passed on as it came (rethrown, or a stream's error forwarded) is not ours to
      // wrap: wrapping would lose its stack and code.
      // (PromiseSettledResult's reason is typed any.)
      '@typescript-eslint/only-throw-error': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
    },
  },
  {
    // Sizes: a file in packages/*/src under 450 lines, every line counted; a function under 80,
    // its blank and comment lines not counted (a function's docblock and the reasons written
    // inside it are not what makes it hard to hold in mind). Tests and their kits are lists of
    // cases, not code to split; the generated gRPC types are as long as the .proto makes them.
    files: ['packages/*/src/**/*.ts', 'packages/*/src/**/*.cts'],
    ignores: ['**/*.test.ts', '**/*.testkit.ts', 'packages/daemon/src/generated/**'],
    rules: {
      'max-lines': ['error', { max: 450, skipBlankLines: false, skipComments: false }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
  {
    // The gRPC types are generated from the .proto (scripts/gen-proto.mjs): empty messages are empty interfaces.
    files: ['packages/daemon/src/generated/**'],
    rules: { '@typescript-eslint/no-empty-object-type': 'off', '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // The CommonJS launchers (they size libuv's pool before any ES module loads) use require.
    files: ['**/*.cts'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Tests read JSON, logs and gRPC answers as untyped data and check them with expect(), which
    // fails on any shape they do not have: `any` flowing through a test is checked where it lands.
    files: ['**/*.test.ts', 'test/**', '**/*.testkit.ts', 'packages/core/src/testing/**', 'bench/src/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Messages and paths built from that data print what it is; a wrong shape fails the expect().
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      // Terminal output is matched by its escape sequences.
      'no-control-regex': 'off',
    },
  },
);
