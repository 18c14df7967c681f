// A realistic multi-layer sample image generated from a seed: every overlay case an unpacker meets.
import type { Platform } from '../oci/platform.js';
import { buildImage, type BuiltImage, type Compression, type ImageFormat, type LayerEntry } from './builder.js';
import { Prng } from './prng.js';

/** Options of {@link sampleImage}. */
export interface SampleImageOptions {
  /** Number of layers, at least 1; default 4 (base, changes, empty, opaque). */
  readonly layers?: number;
  /** Default `gzip`. */
  readonly compression?: Compression;
  /** Default `oci`. */
  readonly format?: ImageFormat;
  /** Default linux/amd64. */
  readonly platform?: Platform;
}

const KiB = 1024;
const MiB = 1024 * KiB;

/** Names the seed chooses, so different seeds give different trees (and the layers refer to the same ones). */
interface Names {
  readonly user: string;
  readonly tools: readonly string[];
  readonly setuid: string;
  readonly lib: string;
  readonly docs: readonly string[];
  readonly logs: readonly string[];
  readonly cache: string;
  readonly app: string;
}

function chooseNames(rng: Prng): Names {
  const words = rng.shuffle(['curl', 'grep', 'sed', 'tar', 'gzip', 'less', 'nano', 'ping', 'ssh', 'jq', 'make', 'file', 'diff', 'top']);
  const pkgs = rng.shuffle(['libc6', 'zlib1g', 'openssl', 'ca-certificates', 'tzdata', 'bash', 'coreutils', 'dpkg', 'perl-base', 'ncurses-base']);
  return {
    user: rng.pick(['alice', 'bob', 'carol', 'dave', 'erin']),
    tools: words.slice(0, rng.int(5, 8)),
    setuid: rng.pick(['su', 'passwd', 'mount', 'newgrp']),
    lib: rng.pick(['ssl', 'crypto', 'z', 'ffi', 'zstd', 'lzma']),
    docs: pkgs.slice(0, rng.int(4, 6)),
    logs: ['dpkg.log', 'apt/history.log', 'alternatives.log', 'bootstrap.log'],
    cache: rng.pick(['apt', 'debconf', 'ldconfig', 'man']),
    app: rng.pick(['myapp', 'webapp', 'worker', 'api']),
  };
}

function baseLayer(rng: Prng, n: Names): LayerEntry[] {
  const uid = 1000;
  const e: LayerEntry[] = [
    { type: 'symlink', path: 'bin', target: 'usr/bin' },
    { type: 'dir', path: 'etc' },
    { type: 'file', path: 'etc/hostname', content: `${rng.word()}-${rng.int(1, 999)}\n` },
    { type: 'file', path: 'etc/passwd', content: `root:x:0:0:root:/root:/bin/sh\n${n.user}:x:${uid}:${uid}::/home/${n.user}:/bin/sh\n` },
    { type: 'file', path: 'etc/shadow', content: `root:*:19000:0:99999:7:::\n${n.user}:!:19000::::::\n`, mode: 0o640, gid: 42 },
    { type: 'file', path: 'etc/os-release', content: `NAME="Fastpull Test"\nID=fastpull\nVERSION_ID="${rng.int(1, 30)}"\n` },
    { type: 'file', path: 'etc/motd', content: rng.text(rng.int(20, 400)) },
    { type: 'file', path: 'etc/app/config.json', content: JSON.stringify({ name: n.app, workers: rng.int(1, 64), motto: rng.text(40) }, null, 2) },
    { type: 'file', path: 'etc/empty.conf', content: '' },
    { type: 'symlink', path: 'etc/localtime', target: '/usr/share/zoneinfo/UTC' },
    { type: 'dir', path: 'root', mode: 0o700 },
    { type: 'file', path: 'root/.profile', content: rng.text(rng.int(50, 300)), mode: 0o600 },
    { type: 'dir', path: 'tmp', mode: 0o1777 },
    { type: 'dir', path: `home/${n.user}`, mode: 0o750, uid, gid: uid },
    { type: 'file', path: `home/${n.user}/.profile`, content: rng.text(rng.int(40, 600)), uid, gid: uid },
    { type: 'dir', path: 'usr/share/zoneinfo' },
    { type: 'file', path: 'usr/share/zoneinfo/UTC', content: rng.binary(rng.int(100, 200)) },
  ];
  for (const tool of n.tools) e.push({ type: 'file', path: `usr/bin/${tool}`, content: rng.binary(rng.int(2 * KiB, 200 * KiB)), mode: 0o755 });
  e.push({ type: 'file', path: `usr/bin/${n.setuid}`, content: rng.binary(rng.int(8 * KiB, 64 * KiB)), mode: 0o4755 });
  // A hardlinked pair, as busybox-style or versioned binaries ship.
  e.push({ type: 'hardlink', path: `usr/bin/${n.tools[0]}-alias`, target: `usr/bin/${n.tools[0]}` });
  e.push({ type: 'file', path: `usr/lib/lib${n.lib}.so.1.2.3`, content: rng.binary(rng.int(1 * MiB, 2 * MiB)), mode: 0o755 });
  e.push({ type: 'symlink', path: `usr/lib/lib${n.lib}.so.1`, target: `lib${n.lib}.so.1.2.3` });
  const libs = rng.int(3, 6);
  for (let i = 0; i < libs; i++)
    e.push({ type: 'file', path: `usr/lib/lib${rng.word()}${i}.so.${i}`, content: rng.binary(rng.int(1 * KiB, 120 * KiB)), mode: 0o755 });
  for (const pkg of n.docs) {
    e.push({ type: 'file', path: `usr/share/doc/${pkg}/copyright`, content: rng.text(rng.int(10, 4 * KiB)) });
    e.push({ type: 'file', path: `usr/share/doc/${pkg}/changelog`, content: rng.text(rng.int(100, 20 * KiB)) });
  }
  e.push({ type: 'dir', path: 'var/log', mode: 0o755 });
  for (const log of n.logs) e.push({ type: 'file', path: `var/log/${log}`, content: rng.text(rng.int(3, 8 * KiB)), mode: 0o640 });
  e.push({ type: 'file', path: `var/cache/${n.cache}/index.bin`, content: rng.bytes(rng.int(1 * KiB, 32 * KiB)) });
  e.push({ type: 'file', path: `var/cache/${n.cache}/stamp`, content: 'ok\n' });
  e.push({ type: 'file', path: `var/lib/${n.app}/state.db`, content: rng.binary(rng.int(4 * KiB, 64 * KiB)), mode: 0o600 });
  e.push({ type: 'file', path: `var/lib/${n.app}/sub/data`, content: rng.text(rng.int(5, 500)) });
  e.push({ type: 'file', path: 'x', content: rng.bytes(3) });
  return e;
}

function changesLayer(rng: Prng, n: Names): LayerEntry[] {
  return [
    // modified files, one also changing its mode
    { type: 'file', path: 'etc/app/config.json', content: JSON.stringify({ name: n.app, workers: rng.int(65, 128), updated: true }, null, 2) },
    { type: 'file', path: `usr/bin/${n.tools[1]}`, content: rng.binary(rng.int(2 * KiB, 100 * KiB)), mode: 0o755 },
    { type: 'file', path: 'etc/shadow', content: `root:*:19001:0:99999:7:::\n`, mode: 0o600, gid: 42 },
    // added files
    { type: 'file', path: `usr/local/bin/${n.app}`, content: rng.binary(rng.int(16 * KiB, 150 * KiB)), mode: 0o755 },
    { type: 'file', path: 'etc/app/conf.d/extra.conf', content: rng.text(rng.int(30, 900)) },
    // whiteouts: two files and a whole directory of layer 1
    { type: 'whiteout', path: `var/log/${n.logs[0]}` },
    { type: 'whiteout', path: `usr/share/doc/${n.docs[0]}/changelog` },
    { type: 'whiteout', path: `usr/share/doc/${n.docs[1]}` },
    // a file becomes a symlink, a directory becomes a file
    { type: 'symlink', path: 'etc/motd', target: '/run/motd.dynamic' },
    { type: 'file', path: `var/cache/${n.cache}`, content: rng.text(rng.int(10, 100)) },
  ];
}

function opaqueLayer(rng: Prng, n: Names): LayerEntry[] {
  return [
    { type: 'opaque', path: `var/lib/${n.app}` },
    { type: 'file', path: `var/lib/${n.app}/state-v2.db`, content: rng.binary(rng.int(4 * KiB, 64 * KiB)), mode: 0o600 },
    { type: 'file', path: `var/lib/${n.app}/sub/fresh`, content: rng.text(rng.int(5, 500)) },
    // Added under a directory with a non-default mode and owner, which the implicit parent keeps.
    { type: 'file', path: `home/${n.user}/.bashrc`, content: rng.text(rng.int(40, 400)), uid: 1000, gid: 1000 },
  ];
}

function churnLayer(rng: Prng, index: number): LayerEntry[] {
  const e: LayerEntry[] = [{ type: 'file', path: 'etc/app/config.json', content: JSON.stringify({ layer: index, value: rng.int(0, 1e6) }) }];
  const added = rng.int(1, 4);
  for (let i = 0; i < added; i++)
    e.push({
      type: 'file',
      path: `opt/layer${index}/${rng.word()}-${i}`,
      content: rng.chance(0.5) ? rng.text(rng.int(1, 8 * KiB)) : rng.binary(rng.int(1, 64 * KiB)),
    });
  return e;
}

/**
 * The layer entries of {@link sampleImage}, bottom first.
 * Layer 1 is a base tree; layer 2 modifies, adds, whiteouts two files and a directory, turns a file
 * into a symlink and a directory into a file; layer 3 is empty; layer 4 makes a directory opaque and
 * fills it again; further layers change a file and add a few. Fewer layers keep that prefix.
 * @example
 * const layer = await buildLayer(sampleLayerEntries(42, 2)[1]!); // the second layer alone
 */
export function sampleLayerEntries(seed: number, layers = 4): LayerEntry[][] {
  if (!Number.isSafeInteger(layers) || layers < 1) throw new RangeError(`sampleImage: layers must be an integer >= 1, got ${layers}`);
  const rng = new Prng(seed);
  const names = chooseNames(rng);
  const out: LayerEntry[][] = [];
  const fixed = [() => baseLayer(rng, names), () => changesLayer(rng, names), (): LayerEntry[] => [], () => opaqueLayer(rng, names)];
  for (let i = 0; i < layers; i++) out.push(fixed[i]?.() ?? churnLayer(rng, i + 1));
  return out;
}

/**
 * A realistic multi-layer image generated from `seed` (a few MiB, gzip by default). The same seed
 * and options give a byte-identical image; different seeds give different ones.
 *
 * @example
 * const image = await sampleImage(1);
 * registry.addImage('test/sample', 'latest', image);
 */
export async function sampleImage(seed: number, options: SampleImageOptions = {}): Promise<BuiltImage> {
  return buildImage({
    layers: sampleLayerEntries(seed, options.layers ?? 4),
    ...(options.compression !== undefined ? { compression: options.compression } : {}),
    ...(options.format !== undefined ? { format: options.format } : {}),
    ...(options.platform !== undefined ? { platform: options.platform } : {}),
  });
}
