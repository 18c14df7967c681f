// Rootless layout: opaque directories carry user.overlay.opaque, and an overlay mounted with
// userxattr inside a user namespace (as rootless runtimes do) applies whiteouts and opaque dirs.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountsFor, openStore, pull } from '@fastpull/core';
import { buildImage, lacks, startLoopbackRegistry } from '@fastpull/core/testing';
import { nativeFs } from '../packages/core/src/native/addon.js';
import { tempDir } from './helpers.js';

const work = tempDir('rootless');
afterAll(() => work.cleanup());

/** Why a user namespace overlay mount cannot be tried here, or undefined. */
function userNamespaceUnavailable(): string | undefined {
  const dir = join(work.dir, 'probe');
  for (const d of ['l', 'u', 'm']) mkdirSync(join(dir, d), { recursive: true });
  try {
    execFileSync('unshare', ['-Urm', 'mount', '-t', 'overlay', 'overlay', '-o', `userxattr,lowerdir=${join(dir, 'u')}:${join(dir, 'l')}`, join(dir, 'm')], {
      stdio: 'pipe',
    });
    return undefined;
  } catch (e) {
    return `no overlay with userxattr in a user namespace: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`;
  }
}
const unavailable = userNamespaceUnavailable();
if (unavailable) console.warn(`skipping the rootless mount: ${unavailable}`);

describe('rootless layout', () => {
  const root = join(work.dir, 'root');
  let rec: Awaited<ReturnType<typeof pull>>['image'];

  beforeAll(async () => {
    const image = await buildImage({
      layers: [
        [
          { type: 'file', path: 'a', content: 'lower a\n' },
          { type: 'file', path: 'd/x', content: 'lower x\n' },
          { type: 'file', path: 'keep', content: 'kept\n' },
        ],
        [
          { type: 'whiteout', path: 'a' },
          { type: 'opaque', path: 'd' },
          { type: 'file', path: 'd/y', content: 'upper y\n' },
        ],
      ],
    });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('r/app', '1', image);
      ({ image: rec } = await pull(`${reg.host}/r/app:1`, { root, rootless: true }));
      // The same layers for rootful mounts cannot come from this store: a clear error, nothing changed.
      await expect(pull(`${reg.host}/r/app:1`, { root, rootless: false })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/unpacked for rootless overlay mounts, and this pull is rootful; use a separate store root/),
      });
    } finally {
      await reg.close();
    }
  });

  it('marks opaque dirs with user.overlay.opaque and gives mounts userxattr', async () => {
    const store = openStore(root);
    expect((await store.snapshots.list()).every((s) => s.rootless === true)).toBe(true);
    const upper = store.snapshots.fsPath(rec.layers[1]!.chainID);
    expect(nativeFs().lgetxattr(join(upper, 'd'), 'user.overlay.opaque')?.toString()).toBe('y');
    expect(nativeFs().lgetxattr(join(upper, 'd'), 'trusted.overlay.opaque')).toBeNull();
    const [m] = await mountsFor(store, rec.name);
    expect(m!.options[0]).toBe('userxattr');
  });

  it.skipIf(lacks('userns', unavailable))('mounts with userxattr in a user namespace, applying whiteouts and opaque dirs there', async () => {
    const [m] = await mountsFor(openStore(root), rec.name);
    const merged = join(work.dir, 'merged');
    mkdirSync(merged);
    const listing = execFileSync(
      'unshare',
      ['-Urm', 'sh', '-c', 'mount -t "$1" "$2" -o "$3" "$4" && ls -A "$4" && echo -- && ls -A "$4/d"', 'sh', m!.type, m!.source, m!.options.join(','), merged],
      {
        encoding: 'utf8',
      },
    );
    const [top, d] = listing.split('--\n').map((part) => part.trim().split('\n').filter(Boolean));
    expect(top).toEqual(['d', 'keep']);
    expect(d).toEqual(['y']);
  });
});
