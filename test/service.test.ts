// One fastpull service, local or remote: LocalService over a store and fastpulld's client over the same
// store answer every question alike (records, documents, mounts, writable-mount records, snapshots,
// content, errors); digest references find images pulled by tag; shared pulls in the daemon are shared
// only between callers with the same credentials; the CLI's front-end behaviour that rests on the
// service (inspect through --address, an unreachable daemon, rm of several names with --gc; mount and
// unmount through --address are in cli-mount.test.ts); and the CLI and the daemon agree on every default.
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import {
  DEFAULT_CHUNK_SIZE,
  DEFAULT_METADATA_TIMEOUT_MS,
  DEFAULT_CONCURRENCY,
  DEFAULT_INFLATER,
  defaultHostsDir,
  defaultRoot,
  defaultUnpackConcurrency,
  LocalService,
  openStore,
  parseChunkSize,
  parseDuration,
  parseSize,
  type FastpullService,
} from '@fastpull/core';
import {
  buildImage,
  buildIndex,
  type BuiltImage,
  findDistributionBinary,
  lacksRegistry,
  type LoopbackRegistry,
  pushImage,
  pushIndex,
  sampleImage,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { openService, pullSettings, type PullFlags } from '@fastpull/cli';
import { Daemon, FastpullClient, resolveConfig, type RawConfig } from '@fastpull/daemon';
import { failure, runCliAsync, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping the service tests that use docker-registry: it is not installed');

const serve = serveDaemon;
const stop = stopDaemon;

describe.skipIf(lacksRegistry())('one service, local or remote, over one store', () => {
  const work = tempDir('service');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let daemon: RunningDaemon | undefined;
  let remote: FastpullClient;
  let local: LocalService;
  let image: BuiltImage;
  let ref = '';
  let repo = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await sampleImage(71, { layers: 3 });
    await pushImage(registry.url, 'svc/app', 'v1', image);
    repo = `${registry.host}/svc/app`;
    ref = `${repo}:v1`;
    daemon = await serve(['--socket', socket, '--root', root]);
    remote = new FastpullClient(socket);
    local = new LocalService({ root });
  });
  afterAll(async () => {
    await remote?.close();
    await local?.close();
    await stop(daemon);
    await registry?.stop();
    work.cleanup();
  });

  it('a pull through either says where the image lies, and both then answer every question alike', async () => {
    const pulled = await remote.pull(ref);
    expect(pulled.root).toBe(root);
    expect(pulled.image.manifest.digest).toBe(image.manifestDigest);
    const again = await local.pull(ref);
    expect(again.image.layers).toEqual(pulled.image.layers);
    expect({ root: again.root, snapshots: again.snapshots, mounts: again.mounts }).toEqual({
      root: pulled.root,
      snapshots: pulled.snapshots,
      mounts: pulled.mounts,
    });

    const services: FastpullService[] = [local, remote];
    const answers = await Promise.all(
      services.map(async (s) => ({
        images: (await s.listImages()).map((i) => ({ ...i, created: i.created.slice(0, 19) })),
        inspect: await s.inspectImage(ref),
        mounts: await s.mounts({ image: ref }),
        stack: await s.mounts({ chainID: pulled.image.chainID }),
        snapshots: await s.listSnapshots(),
        usage: await s.snapshotUsage(pulled.image.layers[0]!.chainID),
        config: await s.contentInfo(pulled.image.config.digest),
        content: await s.listContent(),
      })),
    );
    expect(answers[1]).toEqual(answers[0]);
    const a = answers[0]!;
    expect(a.images.map((i) => i.name)).toEqual([ref]);
    expect(a.images[0]!.unpackedSize).toBe(image.layers.reduce((n, l) => n + l.tar.length, 0));
    expect(a.inspect.manifest).toEqual(JSON.parse(image.manifest.toString('utf8')));
    expect(a.inspect.snapshots).toEqual(pulled.snapshots);
    expect(a.stack).toEqual(a.mounts);
    expect(a.snapshots.map((s) => s.chainID).sort()).toEqual(pulled.image.layers.map((l) => l.chainID).sort());
    // Every inode of the bottom layer's tree (hard links once), and the tree's own directory.
    const bottom = pulled.snapshots[0]!;
    const inodes = new Set((readdirSync(bottom, { recursive: true }) as string[]).map((p) => lstatSync(join(bottom, p)).ino));
    expect(a.usage.inodes).toBe(1 + inodes.size);
    expect(a.usage.size).toBeGreaterThan(0);
    expect(a.content.map((b) => b.digest)).toContain(pulled.image.config.digest);
  });

  it('fails alike: NOT_FOUND for an absent image or blob, INVALID_ARGUMENT for a blob an image uses', async () => {
    for (const s of [local, remote] as FastpullService[]) {
      expect((await failure(s.inspectImage(`${repo}:absent`))).code).toBe('NOT_FOUND');
      expect((await failure(s.contentInfo(`sha256:${'0'.repeat(64)}`))).code).toBe('NOT_FOUND');
      expect((await failure(s.deleteContent(image.configDigest))).code).toBe('INVALID_ARGUMENT');
      expect((await failure(s.snapshotUsage(`sha256:${'1'.repeat(64)}`))).code).toBe('NOT_FOUND');
    }
  });

  it('a digest reference finds the image pulled by tag: repo@digest and repo:tag@digest; another digest does not', async () => {
    for (const s of [local, remote] as FastpullService[]) {
      expect((await s.inspectImage(`${repo}@${image.manifestDigest}`)).image.name).toBe(ref);
      expect((await s.inspectImage(`${repo}:v1@${image.manifestDigest}`)).image.name).toBe(ref);
      expect((await s.mounts({ image: `${repo}@${image.manifestDigest}` })).length).toBe(1);
      expect((await failure(s.inspectImage(`${repo}@sha256:${'2'.repeat(64)}`))).code).toBe('NOT_FOUND');
      // The same manifest under another repository is another image.
      expect((await failure(s.inspectImage(`${registry.host}/svc/other@${image.manifestDigest}`))).code).toBe('NOT_FOUND');
    }
    const r = await runCliAsync(['rm', '--root', root, `${repo}@${image.manifestDigest}`]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(`removed ${ref}\n`);
    expect(await local.listImages()).toEqual([]);
  });

  it('the CLI with --address inspects, and says plainly when no fastpulld listens', async () => {
    await remote.pull(ref);
    const viaDaemon = await runCliAsync(['inspect', '--address', socket, ref]);
    const inProcess = await runCliAsync(['inspect', '--root', root, ref]);
    expect(viaDaemon.status, viaDaemon.stderr).toBe(0);
    expect(JSON.parse(viaDaemon.stdout)).toEqual(JSON.parse(inProcess.stdout));
    const nobody = join(work.dir, 'nobody.sock');
    const r = await runCliAsync(['images', '--address', nobody]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`no fastpulld listens at ${nobody}`);
    expect(r.stderr).not.toMatch(/Resolution note|UNAVAILABLE:/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('writable mounts: recorded through either, listed alike, refused alike, removed through either', async () => {
    const pulled = await remote.pull(ref);
    const target = join(work.dir, 'mnt-a');
    const made = await remote.createWritableMount({ image: ref }, target);
    const { record } = made;
    expect(record).toMatchObject({ image: ref, manifest: image.manifestDigest, snapshots: pulled.image.layers.map((l) => l.chainID), target });
    expect(record.upper).toBe(join(root, 'mounts', record.id, 'upper'));
    expect(record.work).toBe(join(root, 'mounts', record.id, 'work'));
    expect(existsSync(record.upper) && existsSync(record.work)).toBe(true);
    // The overlay to mount: the read-only stack as lowerdir, the record's dirs as upper and work.
    const [ro] = await local.mounts({ image: ref });
    expect(made.mount).toEqual({ type: 'overlay', source: 'overlay', options: [...ro!.options, `upperdir=${record.upper}`, `workdir=${record.work}`] });
    expect(await local.listWritableMounts()).toEqual([record]);
    expect(await remote.listWritableMounts()).toEqual([record]);
    for (const s of [local, remote] as FastpullService[]) {
      const taken = await failure(s.createWritableMount({ image: ref }, target));
      expect([taken.code, taken.message]).toEqual(['INVALID_ARGUMENT', `${target} already holds a fastpull mount; unmount it first`]);
      expect((await failure(s.createWritableMount({ image: ref }, 'relative/dir'))).code).toBe('INVALID_ARGUMENT');
      expect((await failure(s.createWritableMount({ image: `${repo}:absent` }, join(work.dir, 'mnt-b')))).code).toBe('NOT_FOUND');
      expect((await failure(s.removeWritableMount('0123456789abcdef'))).code).toBe('NOT_FOUND');
      expect((await failure(s.removeWritableMount('../images'))).code).toBe('NOT_FOUND');
    }
    // While recorded, the mount keeps the image's snapshots from a collection, whoever removed the image.
    await local.removeImage(ref);
    const gc = await remote.collectGarbage();
    expect(gc.snapshots).toEqual([]);
    expect(await local.removeWritableMount(record.id)).toEqual(record);
    expect(existsSync(join(root, 'mounts', record.id))).toBe(false);
    expect(await remote.listWritableMounts()).toEqual([]);
    expect((await failure(remote.removeWritableMount(record.id))).code).toBe('NOT_FOUND');
    await remote.pull(ref);
  });

  it('writable mount targets: system trees, odd forms and the store refused alike; of calls for one target at once, one succeeds', async () => {
    await remote.pull(ref);
    const refused = [
      '/',
      '/etc',
      '/etc/app',
      '/proc/self/root',
      '/sys/fs',
      '/dev/shm',
      '/usr',
      `${work.dir}/a/../mnt-c`,
      `${work.dir}//mnt-c`,
      `${work.dir}/mnt-c/`,
      `${work.dir}/mnt-c/.`,
      `${work.dir}/mnt\0c`,
      `/${'a'.repeat(100 * 1024)}`,
      root,
      join(root, 'mnt'),
      work.dir,
    ];
    for (const s of [local, remote] as FastpullService[]) {
      for (const target of refused) {
        const e = await failure(s.createWritableMount({ image: ref }, target));
        expect([target.slice(0, 64), e.code, e.message]).toEqual([target.slice(0, 64), 'INVALID_ARGUMENT', expect.stringMatching(/^mount point ".*": /)]);
      }
    }
    expect(await remote.listWritableMounts()).toEqual([]);
    for (let round = 0; round < 5; round++) {
      const target = join(work.dir, `race-${round}`);
      const calls = [local, remote, local, remote].map((s) => s.createWritableMount({ image: ref }, target));
      const settled = await Promise.allSettled(calls);
      const made = settled.filter((r) => r.status === 'fulfilled');
      expect(made).toHaveLength(1);
      for (const r of settled) if (r.status === 'rejected') expect((r.reason as { code?: string }).code).toBe('INVALID_ARGUMENT');
      expect((await local.listWritableMounts()).filter((m) => m.target === target)).toHaveLength(1);
    }
    for (const m of await local.listWritableMounts()) await local.removeWritableMount(m.id);
  });

  it('rm of several names removes every one it finds and runs --gc, then fails for the missing one', async () => {
    const r = await runCliAsync(['rm', '--root', root, '--gc', '--json', ref, `${repo}:absent`]);
    expect(r.status).toBe(1);
    const out = JSON.parse(r.stdout) as { removed: string[]; gc: { snapshots: unknown[] } };
    expect(out.removed).toEqual([ref]);
    expect(out.gc.snapshots).toHaveLength(image.layers.length);
    expect(r.stderr).toMatch(/NOT_FOUND/);
    expect(existsSync(join(root, 'images'))).toBe(true);
    expect(await local.listSnapshots()).toEqual([]);
  });
});

describe('shared pulls and credentials in fastpulld', () => {
  const work = tempDir('service-creds');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  let daemon: RunningDaemon | undefined;
  let loop: LoopbackRegistry;
  let ref = '';

  beforeAll(async () => {
    loop = await startLoopbackRegistry();
    loop.addImage('creds/app', 'v1', await sampleImage(72, { layers: 2 }));
    loop.addImage('creds/app', 'v2', await sampleImage(73, { layers: 2 }));
    ref = `${loop.host}/creds/app`;
    daemon = await serve(['--socket', socket, '--root', root]);
  });
  afterAll(async () => {
    await stop(daemon);
    await loop?.close();
    work.cleanup();
  });

  /** Two callers pull `tag` at once with the credentials given; returns the callers of each shared pull. */
  async function pullTogether(
    tag: string,
    a: { username: string; password: string } | undefined,
    b: { username: string; password: string } | undefined,
  ): Promise<number[]> {
    const clients = [new FastpullClient(socket, { ownConnection: true }), new FastpullClient(socket, { ownConnection: true })];
    // Slow enough that the second request arrives while the first is downloading.
    loop.faults.bytesPerSecond = 1024 * 1024;
    try {
      // The second caller asks once the first one's pull is downloading.
      let downloading!: () => void;
      const started = new Promise<void>((resolve) => (downloading = resolve));
      const first = clients[0]!.pull(`${ref}:${tag}`, {
        ...(a ? { credentials: a } : {}),
        onProgress: (e) => e.type === 'layer' && e.state === 'fetching' && downloading(),
      });
      await started;
      await Promise.all([first, clients[1]!.pull(`${ref}:${tag}`, b ? { credentials: b } : {})]);
    } finally {
      loop.faults.bytesPerSecond = undefined;
      for (const c of clients) await c.close();
    }
    // Both callers are accounted for once the log lines of the pulls they were in say so.
    const lines = (): Array<Record<string, unknown>> => daemon!.logs.filter((l) => l.event === 'pull' && l.image === `${ref}:${tag}` && l.result === 'ok');
    await daemon!.waitLog(() => lines().reduce((n, l) => n + (l.callers as number), 0) >= 2);
    return lines().map((l) => l.callers as number);
  }

  it('joins a running pull with the same credentials, starts its own with other ones', async () => {
    const alice = { username: 'alice', password: 'one' };
    expect(await pullTogether('v1', alice, { ...alice })).toEqual([2]);
    const callers = await pullTogether('v2', alice, { username: 'bob', password: 'two' });
    expect(callers).toEqual([1, 1]);
    expect(JSON.stringify(daemon!.logs)).not.toMatch(/"one"|"two"/);
  });
});

describe('the CLI and fastpulld agree on every default', () => {
  const env = { FASTPULL_ROOT: '/srv/fastpull-store', FASTPULL_HOSTS_DIR: '/srv/certs.d' };

  it('store root and registry host configuration, from the same environment', () => {
    const config = resolveConfig({}, {}, env, '/');
    const service = new LocalService({ root: defaultRoot(env), ...(defaultHostsDir(env) ? { hostsDir: defaultHostsDir(env)! } : {}) });
    expect(config.root).toBe(service.location);
    expect(config.hostsDir).toBe(service.hostsDir);
    expect(resolveConfig({}, {}, {}, '/').hostsDir).toBe(defaultHostsDir({}));
    // An empty hosts_dir turns the default off.
    expect(resolveConfig({ hosts_dir: '' }, {}, env, '/').hostsDir).toBeUndefined();
  });

  it('concurrency, chunk size, unpack concurrency, inflater, keep-blobs and sync: what the pulls of each run with', async () => {
    const cases: Array<{ env: NodeJS.ProcessEnv; cli: Partial<PullFlags>; daemon: RawConfig }> = [
      // Nothing given: each side's own defaults.
      { env: {}, cli: {}, daemon: {} },
      // The environment both read.
      { env: { FASTPULL_INFLATER: 'zlib' }, cli: {}, daemon: {} },
      { env: { FASTPULL_KEEP_BLOBS: '1', FASTPULL_NO_SYNC: '1' }, cli: {}, daemon: {} },
      // The same values as flags of the CLI and keys of fastpulld's file.
      {
        env: {},
        cli: { concurrency: '3', chunkSize: '1MiB', unpackConcurrency: '2', inflater: 'parallel', metadataTimeout: '30s' },
        daemon: { concurrency: 3, chunk_size: '1MiB', unpack_concurrency: '2', inflater: 'parallel', metadata_timeout: '30s' },
      },
    ];
    for (const c of cases) {
      const work = tempDir('defaults');
      const env = { FASTPULL_ROOT: join(work.dir, 'root'), FASTPULL_HOSTS_DIR: join(work.dir, 'certs.d'), ...c.env };
      const io = { stdout: new PassThrough(), stderr: new PassThrough(), env };
      // The CLI's pull: its flags checked, then the service it opens.
      const { tuning, options } = pullSettings(io, { root: defaultRoot(env), ...c.cli });
      const cli = await openService(io, { root: defaultRoot(env) }, undefined, tuning);
      const daemon = await Daemon.start({
        config: resolveConfig({ ...c.daemon, socket: join(work.dir, 'fastpulld.sock'), log_level: 'silent' }, {}, env, work.dir),
        env,
      });
      try {
        expect(cli).toBeInstanceOf(LocalService);
        const local = (cli as LocalService).settings;
        expect(daemon.service.settings).toEqual({ ...local, keepBlobs: local.keepBlobs || options.keepBlobs === true });
        if (Object.keys(c.cli).length === 0) {
          expect(local).toEqual({
            root: join(work.dir, 'root'),
            hostsDir: join(work.dir, 'certs.d'),
            concurrency: DEFAULT_CONCURRENCY,
            chunkSize: DEFAULT_CHUNK_SIZE,
            unpackConcurrency: defaultUnpackConcurrency(),
            inflater: c.env.FASTPULL_INFLATER ?? DEFAULT_INFLATER,
            keepBlobs: false,
            sync: c.env.FASTPULL_NO_SYNC !== '1',
            metadataTimeoutMs: DEFAULT_METADATA_TIMEOUT_MS,
            rateLimit: 0,
          });
          // Keeping blobs is a pull's option in the CLI and the service's in fastpulld: either way, asked by the same variable.
          expect(local.keepBlobs || options.keepBlobs === true).toBe(c.env.FASTPULL_KEEP_BLOBS === '1');
        } else {
          expect(local).toMatchObject({ concurrency: 3, chunkSize: 1024 * 1024, unpackConcurrency: 2, inflater: 'parallel', metadataTimeoutMs: 30_000 });
        }
      } finally {
        await daemon.shutdown('done', 5000);
        await cli.close();
        work.cleanup();
      }
    }
    // The numbers the docs give.
    expect({ DEFAULT_CONCURRENCY, DEFAULT_CHUNK_SIZE, DEFAULT_INFLATER, DEFAULT_METADATA_TIMEOUT_MS }).toEqual({
      DEFAULT_CONCURRENCY: 16,
      DEFAULT_CHUNK_SIZE: 16 * 1024 * 1024,
      DEFAULT_INFLATER: 'auto',
      DEFAULT_METADATA_TIMEOUT_MS: 120_000,
    });
  });

  it('sizes and durations read the same in a flag and in the config file', () => {
    for (const text of ['128kb', '128KiB', '16MiB', '16M', '1.5M', '1048576']) {
      expect(resolveConfig({ chunk_size: text }, {}, {}, '/').chunkSize).toBe(parseChunkSize(text, '--chunk-size'));
    }
    expect(parseSize('8kb', 'x')).toBe(8000);
    expect(parseSize('8KiB', 'x')).toBe(8192);
    expect(parseSize('8k', 'x')).toBe(8192);
    for (const text of ['10s', '500ms', '1m30s', '2', '1.5h']) {
      expect(resolveConfig({ shutdown_timeout: text }, {}, {}, '/').shutdownTimeoutMs).toBe(parseDuration(text, 'shutdown_timeout'));
    }
    expect(parseDuration('1m30s', 'x')).toBe(90_000);
    expect(parseDuration(10, 'x')).toBe(10_000);
    expect(() => parseDuration('25h', 'x')).toThrow(/at most a day/);
    expect(() => parseChunkSize('1KiB', 'x')).toThrow(/at least 64KiB/);
  });

  it('sync: on by default for the library, a pull in this process and fastpulld; false only when asked (unsafe)', async () => {
    expect(openStore('/srv/fastpull-store').snapshots.sync).toBe(true);
    const service = new LocalService({ root: '/srv/fastpull-store' });
    const unsynced = new LocalService({ root: '/srv/fastpull-store', sync: false });
    try {
      expect(service.store.snapshots.sync).toBe(true);
      expect(unsynced.store.snapshots.sync).toBe(false);
    } finally {
      await service.close();
      await unsynced.close();
    }
    expect(resolveConfig({}, {}, env, '/').sync).toBe(true);
    expect(resolveConfig({ sync: false }, {}, env, '/').sync).toBe(false);
    expect(resolveConfig({ sync: 'false' }, {}, env, '/').sync).toBe(false);
    // fastpulld's --no-sync is sync: false among the flags, which override the file.
    expect(resolveConfig({ sync: true }, { sync: false }, env, '/').sync).toBe(false);
    expect(() => resolveConfig({ sync: 'sometimes' }, {}, env, '/')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('sync') }),
    );
  });
});

describe.skipIf(lacksRegistry())('a name pulled for several platforms', () => {
  const work = tempDir('service-platforms');
  const root = join(work.dir, 'root');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let arm: BuiltImage;
  let s390: BuiltImage;
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    // Neither is this host's platform, so nothing picks one silently.
    arm = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: 'arm64\n' }]], platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } });
    s390 = await buildImage({ layers: [[{ type: 'file', path: 'arch', content: 's390x\n' }]], platform: { os: 'linux', architecture: 's390x' } });
    await pushIndex(registry.url, 'multi/app', '1', buildIndex([arm, s390]));
    ref = `${registry.host}/multi/app:1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it('keeps one record per platform: the second pull adds, gc keeps both, each is found by --platform', async () => {
    for (const p of ['linux/arm64', 'linux/s390x']) {
      const r = await runCliAsync(['pull', '--root', root, '--quiet', '--platform', p, ref]);
      expect(r.status, r.stderr).toBe(0);
    }
    const listed = JSON.parse((await runCliAsync(['images', '--root', root, '--json'])).stdout) as Array<{ name: string; platformName: string }>;
    expect(listed.map((i) => [i.name, i.platformName])).toEqual([
      [ref, 'linux/arm64/v8'],
      [ref, 'linux/s390x'],
    ]);
    const gc = JSON.parse((await runCliAsync(['gc', '--root', root, '--json'])).stdout) as { snapshots: unknown[] };
    expect(gc.snapshots).toEqual([]);
    for (const [p, image] of [
      ['linux/arm64', arm],
      ['linux/s390x', s390],
    ] as const) {
      const r = await runCliAsync(['inspect', '--root', root, '--platform', p, ref]);
      expect(r.status, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { image: { manifest: { digest: string } } }).image.manifest.digest).toBe(image.manifestDigest);
      const m = await runCliAsync(['mounts', '--root', root, '--json', '--platform', p, ref]);
      expect(readFileSync(join((JSON.parse(m.stdout) as Array<{ source: string }>)[0]!.source, 'arch'), 'utf8')).toBe(`${p.split('/')[1]}\n`);
    }
  });

  it('without --platform, a name held for several others than this host is INVALID_ARGUMENT naming them; rm --platform takes one', async () => {
    const r = await runCliAsync(['inspect', '--root', root, ref]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('linux/arm64/v8, linux/s390x');
    expect(r.stderr).toMatch(/--platform \(INVALID_ARGUMENT\)\n$/);
    const rm = await runCliAsync(['rm', '--root', root, '--platform', 'linux/s390x', ref]);
    expect(rm.status, rm.stderr).toBe(0);
    // One left: found without --platform; asking for the removed one is NOT_FOUND saying what is there.
    expect((await runCliAsync(['inspect', '--root', root, ref])).status).toBe(0);
    const gone = await runCliAsync(['inspect', '--root', root, '--platform', 'linux/s390x', ref]);
    expect(gone.stderr).toContain('it is there for linux/arm64/v8');
    expect(gone.stderr).toMatch(/\(NOT_FOUND\)\n$/);
    const all = await runCliAsync(['rm', '--root', root, ref]);
    expect(all.status, all.stderr).toBe(0);
    expect(JSON.parse((await runCliAsync(['images', '--root', root, '--json'])).stdout)).toEqual([]);
  });
});
