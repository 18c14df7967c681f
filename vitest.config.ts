import { defineConfig } from 'vitest/config';

// Workspace packages resolve each other's TypeScript source in tests (the `@fastpull/source`
// export condition), so a test never runs against a stale build. They must also be inlined: an
// external (node_modules) package would be loaded by Node itself, with Node's conditions, from dist.
const conditions = ['@fastpull/source'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts', 'bench/src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    server: { deps: { inline: [/@fastpull\//] } },
  },
});
