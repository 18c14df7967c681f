// `fastpull mount` / `unmount` as root: a writable overlay of a pulled image whose changes land in a
// fresh upper dir, never in the snapshots, and are gone after unmount.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BuiltImage,
  diffTrees,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  lacksRoot,
  pushImage,
  readTree,
  sampleImage,
  startDistribution,
  type TreeEntry,
} from '@fastpull/core/testing';
import { cliPath, overlayUnavailable, runCli, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const binary = findDistributionBinary();
const noOverlay = overlayUnavailable();
if (!binary) console.warn('skipping the mount tests: docker-registry is not installed');
if (noOverlay) console.warn(`skipping fastpull mount/unmount: ${noOverlay}`);

/** Runs the command line between backticks in `fastpull mount`'s output with sh, `fastpull` being the built CLI. */
function runHint(stdout: string): { status: number | null; stdout: string; stderr: string } {
  const hint = /`(fastpull unmount [^`]*)`/.exec(stdout)?.[1];
  if (hint === undefined) throw new Error(`no unmount hint in: ${stdout}`);
  return spawnSync('/bin/sh', ['-c', `fastpull() { "${process.execPath}" "${cliPath}" "$@"; }; ${hint}`], { encoding: 'utf8' });
}

/** Whether `dir` is a mount point now. */
function mounted(dir: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((l) => l.split(' ')[4] === dir);
}

describe.skipIf(lacksRegistry())('fastpull mount and unmount', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  let single: BuiltImage;
  const work = tempDir('cli-mount');
  const root = join(work.dir, 'root');
  let ref = '';
  let singleRef = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(21, { layers: 4 });
    single = await sampleImage(22, { layers: 1 });
    await pushImage(registry.url, 'mnt/app', '1', image);
    await pushImage(registry.url, 'mnt/one', '1', single);
    ref = `${registry.host}/mnt/app:1`;
    singleRef = `${registry.host}/mnt/one:1`;
    const pulled = runCli(['pull', '--root', root, '--quiet', ref, singleRef]);
    if (pulled.status !== 0) throw new Error(`pull failed: ${pulled.stderr}`);
  });
  afterAll(async () => {
    // A failed test may leave a mount behind; the temp dir cannot go while it is there.
    for (const d of ['m1', 'm2']) if (mounted(join(work.dir, d))) spawnSync('umount', [join(work.dir, d)]);
    await registry?.stop();
    work.cleanup();
  });

  async function snapshotTrees(r: string): Promise<Map<string, TreeEntry>[]> {
    const inspected = JSON.parse(runCli(['inspect', '--root', root, r]).stdout) as { snapshots: string[] };
    return Promise.all(inspected.snapshots.map((s) => readTree(s)));
  }

  it.skipIf(lacks('overlay', noOverlay))('mounts the image writable; changes stay in the mount and go with unmount', async () => {
    const before = await snapshotTrees(ref);
    const target = join(work.dir, 'm1');
    mkdirSync(target);
    const m = runCli(['mount', '--root', root, ref, target]);
    expect(m.status, m.stderr).toBe(0);
    const id = readdirSync(join(root, 'mounts'))[0]!;
    // The hint names the store the mount was made in: without --root it would look in the default one.
    expect(m.stdout).toBe(
      `mounted ${ref} at ${target} (changes go to ${root}/mounts/${id}/upper; \`fastpull unmount --root ${root} ${target}\` discards them)\n`,
    );
    expect(mounted(target)).toBe(true);
    expect(diffTrees(image.expectedTree(), await readTree(target))).toEqual([]);

    // Write, change and delete through the mount.
    writeFileSync(join(target, 'written-by-test'), 'new\n');
    const someFile = [...image.expectedTree()].find(([, e]) => e.type === 'file')![0];
    writeFileSync(join(target, someFile), 'changed\n');
    rmSync(join(target, [...image.expectedTree()].filter(([, e]) => e.type === 'file').at(-1)![0]));
    expect(readFileSync(join(target, 'written-by-test'), 'utf8')).toBe('new\n');

    const again = runCli(['mount', '--root', root, ref, target]);
    expect(again.status).toBe(1);
    expect(again.stderr).toBe(`fastpull: mounting ${ref} at ${target}: ${target} already holds a fastpull mount; unmount it first (INVALID_ARGUMENT)\n`);

    const u = runHint(m.stdout);
    expect(u.status, u.stderr).toBe(0);
    expect(u.stdout).toBe(`unmounted ${ref} from ${target}\n`);
    expect(mounted(target)).toBe(false);
    expect(existsSync(join(target, 'written-by-test'))).toBe(false);
    expect(readdirSync(join(root, 'mounts'))).toEqual([]);
    // The snapshots are exactly as pulled.
    const after = await snapshotTrees(ref);
    expect(after.map((t, i) => diffTrees(before[i]!, t))).toEqual(before.map(() => []));

    const twice = runCli(['unmount', '--root', root, target]);
    expect(twice.status).toBe(1);
    expect(twice.stderr).toMatch(/\(NOT_FOUND\)\n$/);
  });

  it.skipIf(lacks('overlay', noOverlay))('mounts a one-layer image writable too (an overlay, not the read-only bind)', async () => {
    const before = await snapshotTrees(singleRef);
    const target = join(work.dir, 'm2');
    mkdirSync(target);
    const m = runCli(['mount', '--root', root, '--json', singleRef, target]);
    expect(m.status, m.stderr).toBe(0);
    const record = JSON.parse(m.stdout) as { target: string; upper: string; image: string };
    expect(record.target).toBe(target);
    expect(record.image).toBe(singleRef);
    writeFileSync(join(target, 'x'), 'y');
    expect(readFileSync(join(record.upper, 'x'), 'utf8')).toBe('y');
    expect(runCli(['unmount', '--root', root, target]).status).toBe(0);
    expect(existsSync(record.upper)).toBe(false);
    expect((await snapshotTrees(singleRef)).map((t, i) => diffTrees(before[i]!, t))).toEqual([[]]);
  });

  it.skipIf(lacks('overlay', noOverlay))(
    "mounts and unmounts through fastpulld (--address): the record is the daemon's, the mount this process's",
    async () => {
      // A socket path with a space: the hint must quote it for a shell.
      const socket = join(work.dir, 'fast pulld.sock');
      const other = join(work.dir, 'other-root');
      mkdirSync(other);
      let daemon: RunningDaemon | undefined;
      try {
        daemon = await serveDaemon(['--socket', socket, '--root', root]);
        const target = join(work.dir, 'm4');
        mkdirSync(target);
        const m = runCli(['mount', '--address', socket, '--root', other, ref, target]);
        expect(m.status, m.stderr).toBe(0);
        const [id] = readdirSync(join(root, 'mounts'));
        // Recorded in the daemon's store, not in the --root given beside --address.
        expect(existsSync(join(other, 'mounts'))).toBe(false);
        expect(m.stdout).toBe(
          `mounted ${ref} at ${target} (changes go to ${root}/mounts/${id}/upper; \`fastpull unmount --address '${socket}' ${target}\` discards them)\n`,
        );
        expect(mounted(target)).toBe(true);
        expect(diffTrees(image.expectedTree(), await readTree(target))).toEqual([]);
        writeFileSync(join(target, 'through-daemon'), 'x');
        expect(readFileSync(join(root, 'mounts', id!, 'upper', 'through-daemon'), 'utf8')).toBe('x');

        // Another store has no record of it, and says which store has.
        const elsewhere = runCli(['unmount', '--root', other, target]);
        expect(elsewhere.status).toBe(1);
        expect(elsewhere.stderr).toBe(
          `fastpull: unmounting ${target}: no fastpull mount at ${target} in the store at ${other}; the overlay there keeps its changes in the store at ${root}: name that store (NOT_FOUND)\n`,
        );
        expect(mounted(target)).toBe(true);

        const u = runHint(m.stdout);
        expect(u.status, u.stderr).toBe(0);
        expect(u.stdout).toBe(`unmounted ${ref} from ${target}\n`);
        expect(mounted(target)).toBe(false);
        expect(readdirSync(join(root, 'mounts'))).toEqual([]);
      } finally {
        if (mounted(join(work.dir, 'm4'))) spawnSync('umount', [join(work.dir, 'm4')]);
        await stopDaemon(daemon);
      }
    },
  );

  it.skipIf(lacksRoot())('refuses without root, with one line and a code', () => {
    const target = join(work.dir, 'm3');
    mkdirSync(target);
    // The same CLI as an unprivileged user.
    const r = spawnSync(process.execPath, [cliPath, 'mount', '--root', root, ref, target], {
      encoding: 'utf8',
      uid: 65534,
      gid: 65534,
      env: { PATH: process.env.PATH },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `fastpull: mounting ${ref} at ${target}: mounting needs root (an overlayfs mount); run it as root, or print the read-only mount with \`fastpull mounts\` (PERMISSION_DENIED)\n`,
    );
    expect(mounted(target)).toBe(false);
  });
});
