import { defineConfig } from 'vitest/config';

// Workspace packages resolve each other's TypeScript source in tests (the `@fastpull/source`
// export condition), so a test never runs against a stale build.
export default defineConfig({
  resolve: { conditions: ['@fastpull/source'] },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts', 'bench/src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
