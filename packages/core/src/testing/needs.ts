// What a test needs of the machine, and what happens when it is missing: the test skips and says
// why, except where FASTPULL_REQUIRE names the piece (a comma-separated list, or `all`), as the
// project's CI does; there a missing piece fails the file with its reason, so a run cannot turn
// green by skipping what it was meant to run. It imports nothing: a test of the process's own memory
// imports it without loading the rest of the testing kit.

/**
 * The parts of a machine tests may need. `root` and `overlay` are what a machine allows; the others
 * are programs or builds.
 */
export type Piece =
  | 'root'
  | 'overlay'
  | 'tmpfs'
  | 'userns'
  | 'registry'
  | 'tinyproxy'
  | 'containerd'
  | 'runc'
  | 'strace'
  | 'addon'
  | 'isal'
  | 'zstd'
  | 'pigz'
  | 'igzip'
  | 'tar'
  | 'umoci'
  | 'setpriv'
  | 'script'
  | 'python-grpc'
  | 'systemd-analyze'
  | 'npm'
  | 'glibc'
  | 'python'
  | 'build'
  | 'blockdev';

const said = new Set<string>();

function required(piece: Piece, env: NodeJS.ProcessEnv): boolean {
  const list = (env.FASTPULL_REQUIRE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return list.includes('all') || list.includes(piece);
}

function sayOnce(line: string): void {
  if (said.has(line)) return;
  said.add(line);
  console.warn(line);
}

/**
 * True when a test needing `piece` must skip: `missing` says why the piece is absent (undefined when
 * it is here). Where FASTPULL_REQUIRE names the piece it throws instead, failing the file with that
 * reason. Use it as the condition of `describe.skipIf` / `it.skipIf`.
 *
 * @example
 * describe.skipIf(lacks('registry', findDistributionBinary() ? undefined : 'docker-registry is not installed'))('pulls', () => {});
 */
export function lacks(piece: Piece, missing: string | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (missing === undefined) return false;
  if (required(piece, env)) {
    throw new Error(`${piece} is required here (FASTPULL_REQUIRE=${env.FASTPULL_REQUIRE ?? ''}) and missing: ${missing}`);
  }
  sayOnce(`skipped (needs ${piece}): ${missing}`);
  return true;
}

/**
 * True when a test of a situation this machine is not in must skip (a test of running without root,
 * or without an optional decoder, on a machine that has them): `because` says why (undefined when
 * the test runs). Never fails: the machine is not missing anything.
 *
 * @example
 * it.skipIf(notHere(process.getuid?.() === 0 ? 'running as root: a test of a user without it' : undefined))('refuses', () => {});
 */
export function notHere(because: string | undefined): boolean {
  if (because === undefined) return false;
  sayOnce(`skipped (not this machine's situation): ${because}`);
  return true;
}

/** Why the process is not root, or undefined when it is. */
function notRoot(): string | undefined {
  return process.getuid?.() === 0 ? undefined : 'not running as root';
}

/**
 * {@link lacks} for root.
 *
 * @example
 * it.skipIf(lacksRoot())('mounts', () => {});
 */
export function lacksRoot(env: NodeJS.ProcessEnv = process.env): boolean {
  return lacks('root', notRoot(), env);
}
