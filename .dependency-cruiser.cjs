// The import graph's rules: the floors of docs/architecture.md ("Rooms and floors"), checked by
// `pnpm run depcheck` (scripts/test.sh runs it, so CI does). A module imports only from its own room
// or from rooms on lower floors; rooms that share a floor do not import each other; no import cycle.
// Tests (*.test.ts) and their kits (*.testkit.ts) may reach anything and are not cruised.

const CORE = 'packages/core/src/';

// packages/core/src by floor, top first. A room is a folder (with everything under it) or a file at
// the top of src/. Keep this list and the drawing in docs/architecture.md the same.
const FLOORS = [
  ['index.ts', 'worker-ahead.ts', 'testing/'],
  ['service/'],
  ['pull/', 'gc/'],
  ['store/'],
  ['images/'],
  ['signatures/', 'unpack/'],
  ['registry/', 'snapshots/', 'content/'],
  ['oci/', 'util/'],
  ['native/'],
  ['tuning.ts', 'version.ts'],
  ['errors.ts'],
];

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const pathOf = (room) => `^${escape(CORE + room)}${room.endsWith('/') ? '' : '$'}`;
const anyOf = (rooms) => rooms.map(pathOf).join('|');

const layerRules = FLOORS.flatMap((floor, i) => {
  const above = FLOORS.slice(0, i).flat();
  return floor.map((room) => {
    const peers = floor.filter((r) => r !== room);
    const forbidden = [...above, ...peers];
    return {
      name: `floors:${room}`,
      comment: `${room} is on floor ${i + 1} of docs/architecture.md: it imports neither the rooms above it nor the other rooms of its floor`,
      severity: 'error',
      from: { path: pathOf(room) },
      to: { path: forbidden.length ? anyOf(forbidden) : '^$' },
    };
  });
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle ties its modules into one; break it by moving what both need a floor down.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-below-front-ends',
      comment: 'The library knows nothing of its front ends: packages/core imports neither the daemon nor the CLI.',
      severity: 'error',
      from: { path: '^packages/core/' },
      to: { path: '^packages/(daemon|cli)/|@fastpull/(daemon|cli)' },
    },
    {
      name: 'daemon-below-cli',
      comment: 'The CLI uses the daemon (its client), never the other way round.',
      severity: 'error',
      from: { path: '^packages/daemon/' },
      to: { path: '^packages/cli/|@fastpull/cli' },
    },
    {
      name: 'no-testing-in-product',
      comment: 'The test kit (@fastpull/core/testing) serves tests and the demo only.',
      severity: 'error',
      from: { path: '^packages/(core|daemon|cli)/src/', pathNot: `^${escape(CORE)}testing/` },
      to: { path: `^${escape(CORE)}testing/|@fastpull/core/testing` },
    },
    {
      name: 'floors:unplaced',
      comment: 'Every module of packages/core/src is in a room of FLOORS, so that the floors decide what it may import.',
      severity: 'error',
      from: { path: `^${escape(CORE)}`, pathNot: anyOf(FLOORS.flat()) },
      to: {},
    },
    {
      name: 'floors:unplaced-target',
      comment: 'Every module of packages/core/src is in a room of FLOORS, so that the floors decide who may import it.',
      severity: 'error',
      from: { path: `^${escape(CORE)}` },
      to: { path: `^${escape(CORE)}`, pathNot: anyOf(FLOORS.flat()) },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$|\\.testkit\\.ts$|/dist/|/generated/' },
    tsPreCompilationDeps: true,
    // The packages' tsconfig files extend the root's base; point at the core's for path resolution.
    tsConfig: { fileName: require('node:path').join(__dirname, 'packages/core/tsconfig.json') },
    enhancedResolveOptions: {
      // Workspace packages resolve each other's source, as the tests do.
      conditionNames: ['@fastpull/source', 'import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.cts', '.mjs', '.cjs', '.d.ts'],
      exportsFields: ['exports'],
      mainFields: ['module', 'main', 'types'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
