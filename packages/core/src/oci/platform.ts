// Platform matching for image indexes, normalised the way containerd does
// (arm64 -> variant v8, arm -> v7 when unset, amd64 aliases).
import { FastpullError } from '../errors.js';

/** A platform as the OCI image index describes one (Go's GOOS/GOARCH names). */
export interface Platform {
  /** Operating system, e.g. `linux`. */
  readonly os: string;
  /** CPU architecture, e.g. `amd64`, `arm64`. */
  readonly architecture: string;
  /** Architecture variant, e.g. `v8` for arm64, `v7` for arm. */
  readonly variant?: string;
  /** Operating system version (Windows images). */
  readonly 'os.version'?: string;
  /** Required operating system features (Windows images). */
  readonly 'os.features'?: readonly string[];
}

const ARCH_ALIASES: Readonly<Record<string, string>> = {
  x86_64: 'amd64',
  'x86-64': 'amd64',
  aarch64: 'arm64',
  armhf: 'arm',
  armel: 'arm',
  i386: '386',
  i686: '386',
  x64: 'amd64',
  ia32: '386',
  ppc64: 'ppc64',
};

/**
 * Normalises a platform the way containerd does: lowercase, architecture aliases (`x86_64` is
 * `amd64`, `aarch64` is `arm64`) and default variants (`v8` for arm64, `v7` for arm). Drops
 * `os.version` and `os.features`.
 * @example
 * normalizePlatform({ os: 'Linux', architecture: 'aarch64' }) // { os: 'linux', architecture: 'arm64', variant: 'v8' }
 */
export function normalizePlatform(p: Platform): Platform {
  const os = p.os.toLowerCase();
  let architecture = p.architecture.toLowerCase();
  architecture = ARCH_ALIASES[architecture] ?? architecture;
  let variant = p.variant?.toLowerCase() || undefined;
  if (architecture === 'arm64') {
    if (variant === '8' || variant === undefined) variant = 'v8';
  } else if (architecture === 'arm') {
    if (variant === undefined || variant === '7') variant = 'v7';
    else if (variant === '5' || variant === '6' || variant === '8') variant = `v${variant}`;
  } else if (architecture === 'amd64' && variant === 'v1') {
    variant = undefined;
  }
  return { os, architecture, ...(variant !== undefined ? { variant } : {}) };
}

/**
 * Parses `os/arch[/variant]`, e.g. `linux/arm64/v8`, and normalises it. Throws INVALID_ARGUMENT
 * for anything else.
 * @example
 * await pull('ubuntu:24.04', { root, platform: parsePlatform('linux/arm64') });
 */
export function parsePlatform(spec: string): Platform {
  const parts = spec.split('/');
  if (parts.length < 2 || parts.length > 3 || parts.some((s) => !/^[A-Za-z0-9._-]+$/.test(s))) {
    throw new FastpullError('INVALID_ARGUMENT', `invalid platform ${JSON.stringify(spec)}: want os/architecture[/variant], e.g. linux/amd64`);
  }
  return normalizePlatform({ os: parts[0]!, architecture: parts[1]!, ...(parts[2] ? { variant: parts[2] } : {}) });
}

/**
 * The normalised `os/arch[/variant]` string of a platform.
 * @example
 * formatPlatform(hostPlatform()) // e.g. 'linux/amd64'
 */
export function formatPlatform(p: Platform): string {
  const n = normalizePlatform(p);
  return `${n.os}/${n.architecture}${n.variant ? `/${n.variant}` : ''}`;
}

/**
 * The platform of this process, Node's names mapped to OCI's (`x64` is `amd64`): what pull uses
 * when no platform is given.
 * @example
 * const here = hostPlatform(); // { os: 'linux', architecture: 'amd64' } on a PC
 */
export function hostPlatform(): Platform {
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  return normalizePlatform({ os, architecture: process.arch });
}

/**
 * True when an image built for `candidate` runs as `want` asks. Variants match exactly after
 * normalisation, except that a candidate without a variant matches any want.
 * @example
 * platformMatches(parsePlatform('linux/arm64'), { os: 'linux', architecture: 'arm64' }) // true
 */
export function platformMatches(want: Platform, candidate: Platform): boolean {
  const w = normalizePlatform(want);
  const c = normalizePlatform(candidate);
  if (w.os !== c.os || w.architecture !== c.architecture) return false;
  if (w.variant === undefined || c.variant === undefined) return true;
  return w.variant === c.variant;
}

/**
 * Picks the best entry for `want` from index entries: exact variant beats a missing variant;
 * earlier entries win ties (index order is the publisher's preference). Undefined when none matches.
 * @example
 * const entry = selectPlatform(hostPlatform(), index.manifests);
 */
export function selectPlatform<T extends { platform?: Platform }>(want: Platform, entries: readonly T[]): T | undefined {
  const w = normalizePlatform(want);
  let best: T | undefined;
  let bestScore = -1;
  for (const e of entries) {
    if (!e.platform || !platformMatches(w, e.platform)) continue;
    const score = normalizePlatform(e.platform).variant === w.variant ? 2 : 1;
    if (score > bestScore) {
      best = e;
      bestScore = score;
    }
  }
  return best;
}
