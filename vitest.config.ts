import { defineConfig } from 'vitest/config';

// Workspace packages resolve each other's TypeScript source in tests (the `@fastpull/source`
// export condition), so a test never runs against a stale build. They must also be inlined: an
// external (node_modules) package would be loaded by Node itself, with Node's conditions, from dist.
const conditions = ['@fastpull/source'];

// The suites that start a private containerd run once per containerd release: the default project
// runs them on Debian's 1.6 with everything else, and one project per release built by
// scripts/peers.sh runs them again there ($FASTPULL_CONTAINERD, read by test/containerd.ts).
// A release listed here that is not built fails its files; it does not skip them.
// test/deploy-containerd.test.ts starts each shipped config on every release it names, in the default project.
export const CONTAINERD_SUITES = [
  'test/containerd-cri.test.ts',
  'test/containerd-cri-registry.test.ts',
  'test/containerd-cri-restart.test.ts',
  'test/containerd-cri-pod.test.ts',
  'test/containerd-cri-faults.test.ts',
  'test/containerd-cri-signatures.test.ts',
  'test/containerd-snapshotter.test.ts',
  'test/containerd-boot-order.test.ts',
  'test/containerd-started-first.test.ts',
  'test/containerd-rollback.test.ts',
];
const releases = (process.env.FASTPULL_CONTAINERD_RELEASES ?? '1.7,2.2').split(',').filter(Boolean);
// 2.1 and later have two CRI pull paths: the transfer service (as deploy/containerd/config-2.1.toml
// ships) and use_local_image_pull; the suites that pull through CRI run on the second too.
const CRI_PULL_SUITES = [
  'test/containerd-cri.test.ts',
  'test/containerd-cri-registry.test.ts',
  'test/containerd-cri-pod.test.ts',
  'test/containerd-cri-faults.test.ts',
  'test/containerd-cri-signatures.test.ts',
];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    // Hang detectors, not limits: a test waits on events, and on a machine whose cores are all held by
    // other work a test that takes 10 s alone can take many times that. Tests set no shorter one.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    server: { deps: { inline: [/@fastpull\//] } },
    projects: [
      {
        extends: true,
        test: { name: 'default', include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts', 'bench/src/**/*.test.ts'] },
      },
      ...releases.map((name) => ({
        extends: true,
        test: { name: `containerd-${name}`, include: CONTAINERD_SUITES, env: { FASTPULL_CONTAINERD: name } },
      })),
      ...releases
        .filter((name) => name >= '2.1')
        .map((name) => ({
          extends: true,
          test: { name: `containerd-${name}-local-pull`, include: CRI_PULL_SUITES, env: { FASTPULL_CONTAINERD: name, FASTPULL_CRI_PULL: 'local' } },
        })),
    ],
  },
});
