// Tests of the image builder: tar layout, determinism, digests, and the overlay semantics of expectedTree.
import { gunzipSync } from 'node:zlib';
import { Readable } from 'node:stream';
import { extract, type Header } from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { isFastpullError } from '../errors.js';
import { sha256Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { buildImage, buildIndex, buildLayer, DEFAULT_MTIME, type LayerEntry } from './builder.js';
import { sampleImage } from './sample.js';

async function tarHeaders(tar: Buffer): Promise<{ header: Header; body: Buffer }[]> {
  const out: { header: Header; body: Buffer }[] = [];
  const ex = extract();
  Readable.from([tar]).pipe(ex);
  for await (const entry of ex) {
    const chunks: Buffer[] = [];
    for await (const c of entry) chunks.push(c as Buffer);
    out.push({ header: entry.header, body: Buffer.concat(chunks) });
  }
  return out;
}

describe('buildLayer', () => {
  it('writes parents before children, links as link/symlink entries, and markers for whiteouts and opaque dirs', async () => {
    const layer = await buildLayer(
      [
        { type: 'file', path: 'usr/bin/tool', content: 'bin', mode: 0o4755, uid: 5, gid: 6 },
        { type: 'hardlink', path: 'usr/bin/tool2', target: 'usr/bin/tool' },
        { type: 'symlink', path: 'usr/bin/t', target: 'tool' },
        { type: 'whiteout', path: 'etc/gone' },
        { type: 'opaque', path: 'var/lib/app' },
        { type: 'dir', path: 'usr', mode: 0o711 },
      ],
      { compression: 'none' },
    );
    const entries = await tarHeaders(layer.tar);
    expect(entries.map((e) => `${e.header.type} ${e.header.name}`)).toEqual([
      'directory usr/',
      'directory usr/bin/',
      'file usr/bin/tool',
      'link usr/bin/tool2',
      'symlink usr/bin/t',
      'directory etc/',
      'file etc/.wh.gone',
      'directory var/',
      'directory var/lib/',
      'directory var/lib/app/',
      'file var/lib/app/.wh..wh..opq',
    ]);
    const byName = new Map(entries.map((e) => [e.header.name, e]));
    // The explicit dir entry given last was hoisted before its child, with its own mode, and written once.
    expect(byName.get('usr/')?.header.mode).toBe(0o711);
    expect(byName.get('usr/bin/')?.header.mode).toBe(0o755);
    const tool = byName.get('usr/bin/tool');
    expect(tool?.header).toMatchObject({ mode: 0o4755, uid: 5, gid: 6 });
    expect(tool?.header.mtime?.getTime()).toBe(DEFAULT_MTIME * 1000);
    expect(tool?.body.toString()).toBe('bin');
    expect(byName.get('usr/bin/tool2')?.header.linkname).toBe('usr/bin/tool');
    expect(byName.get('usr/bin/t')?.header.linkname).toBe('tool');
    expect(layer.mediaType).toBe(MediaTypes.OCI_LAYER);
    expect(layer.digest).toBe(layer.diffID);
  });

  it('writes device nodes with their numbers, and expects them in the tree with the rdev stat(2) gives', async () => {
    const image = await buildImage({
      layers: [
        [{ type: 'file', path: 'dev/null', content: 'replaced below' }],
        [
          { type: 'device', path: 'dev/null', device: 'char', major: 1, minor: 3, mode: 0o666 },
          { type: 'device', path: 'dev/big', device: 'block', major: 259, minor: 0x12345, gid: 6 },
        ],
      ],
      compression: 'none',
    });
    const headers = await tarHeaders(image.layers[1]!.tar);
    const byName = new Map(headers.map((h) => [h.header.name, h.header]));
    expect(byName.get('dev/null')).toMatchObject({ type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 });
    expect(byName.get('dev/big')).toMatchObject({ type: 'block-device', devmajor: 259, devminor: 0x12345, gid: 6 });
    const tree = image.expectedTree();
    expect(tree.get('dev/null')).toEqual({ type: 'special', kind: 'char-device', mode: 0o666, uid: 0, gid: 0, rdev: 0x103 });
    // glibc's makedev: minor's low byte, then 12 bits of major, then the rest of minor from bit 20.
    expect(tree.get('dev/big')).toEqual({ type: 'special', kind: 'block-device', mode: 0o644, uid: 0, gid: 6, rdev: 0x45 + (259 << 8) + (0x123 << 20) });
  });

  it('makes an empty layer a tar of just the two end blocks', async () => {
    const layer = await buildLayer([], { compression: 'gzip' });
    expect(layer.tar.equals(Buffer.alloc(1024))).toBe(true);
    expect(gunzipSync(layer.blob).equals(layer.tar)).toBe(true);
    expect(layer.diffID).toBe(sha256Digest(Buffer.alloc(1024)));
    expect(layer.mediaType).toBe(MediaTypes.OCI_LAYER_GZIP);
  });

  it('refuses bad paths, mode 0 and hardlinks to nothing with INVALID_ARGUMENT', async () => {
    const bad: LayerEntry[][] = [
      [{ type: 'file', path: '/etc/x', content: '' }],
      [{ type: 'file', path: 'etc/../x', content: '' }],
      [{ type: 'file', path: 'etc//x', content: '' }],
      [{ type: 'file', path: 'etc/.wh.x', content: '' }],
      [{ type: 'file', path: 'x', content: '', mode: 0 }],
      [{ type: 'hardlink', path: 'a', target: 'b' }],
      [{ type: 'device', path: 'mem', device: 'char', major: 4096, minor: 1 }],
      [{ type: 'device', path: 'blk', device: 'block', major: 7, minor: -1 }],
    ];
    for (const entries of bad) {
      const err = await buildLayer(entries, { compression: 'none' }).catch((e: unknown) => e);
      expect(isFastpullError(err) && err.code === 'INVALID_ARGUMENT', JSON.stringify(entries)).toBe(true);
    }
  });
});

describe('buildImage', () => {
  const threeLayers: LayerEntry[][] = [
    [
      { type: 'file', path: 'etc/keep', content: 'keep' },
      { type: 'file', path: 'etc/remove-me', content: 'x' },
      { type: 'file', path: 'docs/a/readme', content: 'a' },
      { type: 'file', path: 'docs/b', content: 'b' },
      { type: 'file', path: 'data/old', content: 'old' },
      { type: 'file', path: 'data/sub/deep', content: 'deep' },
      { type: 'file', path: 'motd', content: 'hello' },
      { type: 'dir', path: 'cache', mode: 0o700 },
      { type: 'file', path: 'cache/item', content: 'i' },
      { type: 'dir', path: 'home', mode: 0o751, uid: 7, gid: 8 },
    ],
    [
      { type: 'whiteout', path: 'etc/remove-me' },
      { type: 'whiteout', path: 'docs' },
      { type: 'file', path: 'docs/new', content: 'back' },
      { type: 'file', path: 'bin/real', content: 'ELF', mode: 0o755, uid: 1, gid: 2 },
      { type: 'hardlink', path: 'bin/alias', target: 'bin/real' },
      { type: 'symlink', path: 'motd', target: '/run/motd' },
      { type: 'file', path: 'cache', content: 'now a file' },
    ],
    [
      { type: 'file', path: 'data/same-layer', content: 'stays' },
      { type: 'opaque', path: 'data' },
      { type: 'file', path: 'data/fresh', content: 'fresh', mode: 0o600 },
      { type: 'file', path: 'home/user/.rc', content: 'rc' },
      { type: 'file', path: 'etc/keep', content: 'changed', mode: 0o640 },
    ],
  ];

  it('computes the overlay result: whiteouts, opaque dirs, hardlinks, replacements', async () => {
    const image = await buildImage({ layers: threeLayers, compression: 'none' });
    const tree = image.expectedTree();
    const summary = [...tree.keys()].sort();
    expect(summary).toEqual([
      'bin',
      'bin/alias',
      'bin/real',
      'cache',
      'data',
      'data/fresh',
      'data/same-layer',
      'docs',
      'docs/new',
      'etc',
      'etc/keep',
      'home',
      'home/user',
      'home/user/.rc',
      'motd',
    ]);
    const file = (p: string) => {
      const e = tree.get(p);
      if (e?.type !== 'file') throw new Error(`${p} is ${e?.type}`);
      return e;
    };
    expect(file('etc/keep')).toMatchObject({ mode: 0o640, content: Buffer.from('changed') });
    expect(file('bin/alias')).toMatchObject({ mode: 0o755, uid: 1, gid: 2, content: Buffer.from('ELF') });
    expect(file('cache').content.toString()).toBe('now a file');
    expect(file('data/fresh').mode).toBe(0o600);
    expect(tree.get('motd')).toEqual({ type: 'symlink', target: '/run/motd', uid: 0, gid: 0 });
    // An implicit parent in an upper layer keeps the lower directory's mode and owner; new ones get 0o755.
    expect(tree.get('home')).toEqual({ type: 'dir', mode: 0o751, uid: 7, gid: 8 });
    expect(tree.get('home/user')).toEqual({ type: 'dir', mode: 0o755, uid: 0, gid: 0 });
    // expectedTree hands out copies.
    tree.delete('motd');
    expect(image.expectedTree().has('motd')).toBe(true);
  });

  it('is deterministic and records diffIDs, digests and media types consistently (oci, gzip)', async () => {
    const a = await buildImage({ layers: threeLayers });
    const b = await buildImage({ layers: threeLayers });
    expect(b.manifestDigest).toBe(a.manifestDigest);
    expect(a.manifestDigest).toBe(sha256Digest(a.manifest));
    const config = JSON.parse(a.config.toString()) as { architecture: string; os: string; rootfs: { type: string; diff_ids: string[] }; history: unknown[] };
    expect(config).toMatchObject({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers' } });
    expect(config.history).toHaveLength(3);
    expect(config.rootfs.diff_ids).toEqual(a.layers.map((l) => l.diffID));
    for (const layer of a.layers) {
      expect(layer.diffID).toBe(sha256Digest(gunzipSync(layer.blob)));
      expect(layer.digest).toBe(sha256Digest(layer.blob));
      expect(layer.size).toBe(layer.blob.byteLength);
      expect(layer.mediaType).toBe(MediaTypes.OCI_LAYER_GZIP);
      expect(a.blobs.get(layer.digest)).toBe(layer.blob);
    }
    const manifest = JSON.parse(a.manifest.toString()) as Record<string, unknown>;
    expect(manifest).toEqual({
      schemaVersion: 2,
      mediaType: MediaTypes.OCI_MANIFEST,
      config: { mediaType: MediaTypes.OCI_CONFIG, digest: a.configDigest, size: a.config.byteLength },
      layers: a.layers.map((l) => ({ mediaType: MediaTypes.OCI_LAYER_GZIP, digest: l.digest, size: l.size })),
    });
    expect(a.blobs.get(a.configDigest)).toBe(a.config);
    expect(a.blobs.size).toBe(4);
  });

  it('uses Docker media types, the platform and annotations when asked', async () => {
    const image = await buildImage({
      layers: [[{ type: 'file', path: 'a', content: 'a' }]],
      format: 'docker',
      platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
      annotations: { 'org.example': 'yes' },
    });
    const manifest = JSON.parse(image.manifest.toString()) as {
      mediaType: string;
      config: { mediaType: string };
      layers: { mediaType: string }[];
      annotations: unknown;
    };
    expect(manifest.mediaType).toBe(MediaTypes.DOCKER_MANIFEST);
    expect(image.manifestMediaType).toBe(MediaTypes.DOCKER_MANIFEST);
    expect(manifest.config.mediaType).toBe(MediaTypes.DOCKER_CONFIG);
    expect(manifest.layers[0]?.mediaType).toBe(MediaTypes.DOCKER_LAYER_GZIP);
    expect(manifest.annotations).toEqual({ 'org.example': 'yes' });
    expect(JSON.parse(image.config.toString())).toMatchObject({ architecture: 'arm64', os: 'linux', variant: 'v8' });
  });

  it("writes the container defaults it is given into the config's `config`, and an empty one otherwise", async () => {
    const layers = [[{ type: 'file', path: 'a', content: 'a' }]] as const;
    const plain = await buildImage({ layers });
    expect((JSON.parse(plain.config.toString()) as { config: unknown }).config).toEqual({});
    const sleeper = await buildImage({ layers, containerConfig: { Cmd: ['/bin/sleep', 'infinity'], Env: ['A=b'] } });
    expect((JSON.parse(sleeper.config.toString()) as { config: unknown }).config).toEqual({ Cmd: ['/bin/sleep', 'infinity'], Env: ['A=b'] });
    expect(sleeper.configDigest).not.toBe(plain.configDigest);
    expect(sleeper.layers[0]!.digest).toBe(plain.layers[0]!.digest);
  });
});

describe('buildIndex', () => {
  it('lists each manifest with its platform', async () => {
    const amd = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: 'amd64' }]] });
    const arm = await buildImage({
      layers: [[{ type: 'file', path: 'arch', content: 'arm64' }]],
      platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
    });
    const index = buildIndex([amd, arm]);
    expect(index.mediaType).toBe(MediaTypes.OCI_INDEX);
    expect(index.digest).toBe(sha256Digest(index.index));
    const doc = JSON.parse(index.index.toString()) as { schemaVersion: number; mediaType: string; manifests: unknown[] };
    expect(doc.schemaVersion).toBe(2);
    expect(doc.mediaType).toBe(MediaTypes.OCI_INDEX);
    expect(doc.manifests).toEqual([
      { mediaType: MediaTypes.OCI_MANIFEST, digest: amd.manifestDigest, size: amd.manifest.byteLength, platform: { architecture: 'amd64', os: 'linux' } },
      {
        mediaType: MediaTypes.OCI_MANIFEST,
        digest: arm.manifestDigest,
        size: arm.manifest.byteLength,
        platform: { architecture: 'arm64', os: 'linux', variant: 'v8' },
      },
    ]);
    expect(index.blobs.size).toBe(4);
    expect(buildIndex([amd], { format: 'docker' }).mediaType).toBe(MediaTypes.DOCKER_MANIFEST_LIST);
  });
});

describe('sampleImage', () => {
  it('is byte-identical for the same seed and different for another', async () => {
    const [a, b, c] = await Promise.all([sampleImage(11), sampleImage(11), sampleImage(12)]);
    expect(b.manifestDigest).toBe(a.manifestDigest);
    expect(b.layers.map((l) => l.digest)).toEqual(a.layers.map((l) => l.digest));
    expect(c.manifestDigest).not.toBe(a.manifestDigest);
    expect(a.layers.map((l) => l.diffID)).toEqual(a.layers.map((l) => sha256Digest(gunzipSync(l.blob))));
  });

  it('covers the overlay cases: empty layer, setuid, links, whiteouts, opaque dir, replacements', async () => {
    const image = await sampleImage(5);
    expect(image.layers).toHaveLength(4);
    expect(image.layers[2]?.tar.equals(Buffer.alloc(1024))).toBe(true);
    const base = image.layers[0];
    const big = base?.tarEntries.filter((e) => e.type === 'file' && e.content.byteLength >= 1024 * 1024);
    expect(big).toHaveLength(1);
    const types = new Set(image.layers.flatMap((l) => l.tarEntries.map((e) => e.type)));
    expect([...types].sort()).toEqual(['dir', 'file', 'hardlink', 'opaque', 'symlink', 'whiteout']);

    const tree = image.expectedTree();
    const modes = [...tree.values()].flatMap((e) => (e.type === 'file' ? [e.mode] : []));
    expect(modes).toContain(0o4755);
    expect(modes).toContain(0o755);
    const targets = [...tree.values()].flatMap((e) => (e.type === 'symlink' ? [e.target] : []));
    expect(targets.some((t) => t.startsWith('/'))).toBe(true);
    expect(targets.some((t) => !t.startsWith('/'))).toBe(true);
    expect(tree.get('etc/motd')?.type).toBe('symlink');
    // Every whiteout of layer 2 removed its path and everything below it.
    for (const e of image.layers[1]?.tarEntries ?? []) {
      if (e.type === 'whiteout') expect([...tree.keys()].filter((k) => k === e.path || k.startsWith(`${e.path}/`))).toEqual([]);
    }
    // The opaque directory holds only what layer 4 put there.
    const opaque = image.layers[3]?.tarEntries.find((e) => e.type === 'opaque');
    const under = [...tree.keys()].filter((k) => opaque && k.startsWith(`${opaque.path}/`)).sort();
    expect(under.length).toBeGreaterThan(0);
    const layer4Paths = new Set(image.layers[3]?.tarEntries.map((e) => e.path));
    expect(under.every((k) => layer4Paths.has(k))).toBe(true);
    // A directory of layer 1 became a file.
    const cacheDir = base?.tarEntries.find((e) => e.type === 'dir' && e.path.startsWith('var/cache/'));
    expect(cacheDir && tree.get(cacheDir.path)?.type).toBe('file');
  });

  it('honours layers, compression and format', async () => {
    const image = await sampleImage(3, { layers: 6, compression: 'none', format: 'docker' });
    expect(image.layers).toHaveLength(6);
    expect(image.layers.every((l) => l.mediaType === MediaTypes.DOCKER_LAYER && l.blob === l.tar)).toBe(true);
    expect((await sampleImage(3, { layers: 1 })).layers).toHaveLength(1);
  });
});
