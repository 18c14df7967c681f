// fastpulld as a real process on a temporary unix socket, driven by its TypeScript client, a raw gRPC
// reflection client and the CLI: pulls from real registries on loopback, shared pulls, errors,
// health, reflection, the socket's mode, metrics, SIGHUP, SIGTERM mid-pull and resume, stale sockets.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ErrorCodes, type FastpullError, type PullEvent } from '@fastpull/core';
import {
  type BuiltImage,
  findDistributionBinary,
  lacksRegistry,
  lacksRoot,
  type LoopbackRegistry,
  notHere,
  pushImage,
  sampleImage,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { EXIT_CONFIG, FastpullClient, HEALTH_PROTO, PROTO_DIR } from '@fastpull/daemon';
import { SUGGESTED_METRICS_PORT } from '@fastpull/daemon/paths';
import { failure, repoRoot, runCliAsync, serveDaemon, startDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping the fastpulld tests that use docker-registry: it is not installed');

const serve = serveDaemon;
const stop = stopDaemon;

/** The gRPC status code a rebuilt error came from. */
function grpcCode(e: FastpullError): number | undefined {
  return (e.cause as { code?: number } | undefined)?.code;
}

/** The value of one series (`name{labels}` exactly as exposed) in a Prometheus text scrape; NaN when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
}

/**
 * Pulls `ref` through two clients that share one pull in fastpulld: the image's layer blobs are held
 * at the registry until the first caller's pull is fetching and the second has joined it (its first
 * event has come), so the second cannot arrive after the pull has ended. Events land in `seen`.
 */
async function sharedPull(
  loop: LoopbackRegistry,
  image: BuiltImage,
  ref: string,
  clients: [FastpullClient, FastpullClient],
  seen: PullEvent[][],
): Promise<[Awaited<ReturnType<FastpullClient['pull']>>, Awaited<ReturnType<FastpullClient['pull']>>]> {
  let open!: () => void;
  loop.faults.hold = { path: new RegExp(image.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (open = r)) };
  try {
    let fetching!: () => void;
    const firstFetching = new Promise<void>((r) => (fetching = r));
    let joined!: () => void;
    const secondJoined = new Promise<void>((r) => (joined = r));
    const a = clients[0].pull(ref, {
      onProgress: (e) => {
        seen[0]!.push(e);
        if (e.type === 'layer' && e.state === 'fetching') fetching();
      },
    });
    // Either may fail first; settle both so no rejection goes unheard.
    const aSettled = a.then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([firstFetching, aSettled]);
    const b = clients[1].pull(ref, {
      onProgress: (e) => {
        seen[1]!.push(e);
        joined();
      },
    });
    await Promise.race([
      secondJoined,
      b.then(
        () => undefined,
        () => undefined,
      ),
    ]);
    open();
    return await Promise.all([a, b]);
  } finally {
    open();
    delete loop.faults.hold;
  }
}

describe('fastpulld', () => {
  const work = tempDir('daemon');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  let daemon: RunningDaemon | undefined;
  let client: FastpullClient;
  let loop: LoopbackRegistry;
  let image: BuiltImage;
  let loopRef = '';

  beforeAll(async () => {
    loop = await startLoopbackRegistry();
    image = await sampleImage(61, { layers: 3 });
    loop.addImage('daemon/app', 'v1', image);
    loopRef = `${loop.host}/daemon/app:v1`;
    daemon = await serve(['--socket', socket, '--root', root, '--metrics-address', '127.0.0.1:0']);
    client = new FastpullClient(socket);
  });
  afterAll(async () => {
    await client?.close();
    await stop(daemon);
    await loop?.close();
    work.cleanup();
  });

  it('creates its socket with mode 0660 and reports SERVING over grpc.health.v1', async () => {
    expect(statSync(socket).isSocket()).toBe(true);
    expect(statSync(socket).mode & 0o777).toBe(0o660);
    expect(await client.health()).toBe('SERVING');
    expect(await client.health('fastpull.v1.Images')).toBe('SERVING');
    const e = await failure(client.health('no.such.Service'));
    expect(grpcCode(e)).toBe(grpc.status.NOT_FOUND);
  });

  it('lists its services through server reflection', async () => {
    const reflectionDir = join(dirname(createRequire(join(repoRoot, 'packages', 'daemon', 'package.json')).resolve('@grpc/reflection')), '..', 'proto');
    const def = protoLoader.loadSync('grpc/reflection/v1/reflection.proto', { includeDirs: [reflectionDir], keepCase: false, defaults: true, oneofs: true });
    const Ctor = grpc.makeClientConstructor(def['grpc.reflection.v1.ServerReflection'] as grpc.ServiceDefinition, 'ServerReflection');
    const raw = new Ctor(`unix:${socket}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      ServerReflectionInfo: () => grpc.ClientDuplexStream<
        unknown,
        { listServicesResponse?: { service: { name: string }[] }; fileDescriptorResponse?: { fileDescriptorProto: Buffer[] } }
      >;
    };
    try {
      const ask = (req: unknown) =>
        new Promise<{ listServicesResponse?: { service: { name: string }[] }; fileDescriptorResponse?: { fileDescriptorProto: Buffer[] } }>(
          (resolve, reject) => {
            const call = raw.ServerReflectionInfo();
            call.on('data', (r) => {
              resolve(r);
              call.end();
            });
            call.on('error', reject);
            call.write(req);
          },
        );
      const list = await ask({ listServices: '' });
      const names = list.listServicesResponse!.service.map((s) => s.name);
      for (const s of ['fastpull.v1.Images', 'fastpull.v1.Snapshots', 'fastpull.v1.Content', 'grpc.health.v1.Health']) expect(names).toContain(s);
      const file = await ask({ fileContainingSymbol: 'fastpull.v1.Images' });
      expect(file.fileDescriptorResponse!.fileDescriptorProto.length).toBeGreaterThan(0);
      expect(Buffer.concat(file.fileDescriptorResponse!.fileDescriptorProto).toString('latin1')).toContain('PullRequest');
    } finally {
      raw.close();
    }
  });

  it('answers bad requests with INVALID_ARGUMENT or NOT_FOUND, and keeps serving', async () => {
    const badRef = await failure(client.pull('Not A Reference!!'));
    expect(badRef.code).toBe('INVALID_REFERENCE');
    expect(grpcCode(badRef)).toBe(grpc.status.INVALID_ARGUMENT);
    const unknown = await failure(client.getImage(`${loop.host}/no/such:image`));
    expect(unknown.code).toBe('NOT_FOUND');
    expect(unknown.message).toContain('no/such:image');
    expect(grpcCode(unknown)).toBe(grpc.status.NOT_FOUND);
    // Requests name snapshots by chainID and blobs by digest: a path is not one.
    const path = await failure(client.mounts({ chainID: '../../../etc' }));
    expect(path.code).toBe('INVALID_DIGEST');
    expect(grpcCode(path)).toBe(grpc.status.INVALID_ARGUMENT);
    const blobPath = await failure(client.contentInfo('sha256/../../../../etc/passwd'));
    expect(grpcCode(blobPath)).toBe(grpc.status.INVALID_ARGUMENT);
    const noBlob = await failure(client.contentInfo(`sha256:${'0'.repeat(64)}`));
    expect(noBlob.code).toBe('NOT_FOUND');
    const noSnap = await failure(client.snapshotUsage(`sha256:${'1'.repeat(64)}`));
    expect(noSnap.code).toBe('NOT_FOUND');
    const notInRegistry = await failure(client.pull(`${loop.host}/daemon/missing:v1`));
    expect(notInRegistry.code).toBe('NOT_FOUND');
    expect(grpcCode(notInRegistry)).toBe(grpc.status.NOT_FOUND);
    expect(await client.health()).toBe('SERVING');
    expect(daemon!.proc.exitCode).toBeNull();
  });

  it('two clients pulling one image at once share one pull: each blob is served once', async () => {
    loop.stats.reset();
    const other = new FastpullClient(`unix:${socket}`);
    try {
      const seen: PullEvent[][] = [[], []];
      const [a, b] = await sharedPull(loop, image, loopRef, [client, other], seen);
      expect(a.image).toEqual(b.image);
      expect(a.image.manifest.digest).toBe(image.manifestDigest);
      for (const l of image.layers) expect(loop.stats.blobBytesServed(l.digest)).toBe(l.size);
      for (const events of seen) {
        expect(events[0]!.type).toBe('resolved');
        expect(events.at(-1)!.type).toBe('done');
        for (let i = 0; i < image.layers.length; i++) {
          const layer = events.filter((e) => e.type === 'layer' && e.index === i);
          expect(layer.at(-1)).toMatchObject({ state: 'committed' });
          // The unpack pass's progress crosses the wire: only on extracting, ending at the blob's size.
          const extracting = layer.filter((e) => e.type === 'layer' && e.state === 'extracting');
          expect(extracting.at(-1)).toMatchObject({ unpacked: image.layers[i]!.size });
          expect(layer.filter((e) => e.type === 'layer' && e.state !== 'extracting' && 'unpacked' in e)).toEqual([]);
          // Through the stream too, states only move forward (the second caller joined midway, so
          // its first state for a layer may be any of them).
          const order = ['waiting', 'fetching', 'extracting', 'verifying', 'committed'];
          const ranks = layer.map((e) => (e.type === 'layer' ? order.indexOf(e.state) : -1));
          expect(ranks).not.toContain(-1);
          expect(ranks).toEqual([...ranks].sort((x, y) => x - y));
        }
      }
      const line = await daemon!.waitLog((l) => l.event === 'pull' && l.image === loopRef && l.result === 'ok');
      expect(line.callers).toBe(2);
      expect(line.phases).toMatchObject({
        resolveMs: expect.any(Number),
        fetchMs: expect.any(Number),
        extractMs: expect.any(Number),
        commitMs: expect.any(Number),
      });
      expect(JSON.stringify(daemon!.logs)).not.toMatch(/password|authorization/i);
      expect(a.root).toBe(root);
      expect(a.snapshots).toHaveLength(image.layers.length);
      expect(a.mounts[0]!.type).toBe('overlay');
    } finally {
      await other.close();
    }
  });

  it('a caller that leaves stops receiving; the pull goes on for the caller that stays', async () => {
    const img = await sampleImage(62, { layers: 2 });
    loop.addImage('daemon/leave', 'v1', img);
    const ref = `${loop.host}/daemon/leave:v1`;
    loop.stats.reset();
    // The blobs wait at the registry until the leaver has gone: the pull cannot end before it joins.
    let open!: () => void;
    loop.faults.hold = { path: new RegExp(img.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (open = r)) };
    const leaver = new FastpullClient(socket);
    try {
      const controller = new AbortController();
      let leaverEvents = 0;
      let started!: () => void;
      const stayerFetching = new Promise<void>((r) => (started = r));
      const stayer = client.pull(ref, { onProgress: (e) => e.type === 'layer' && e.state === 'fetching' && started() });
      await stayerFetching;
      const left = failure(
        leaver.pull(ref, {
          signal: controller.signal,
          onProgress: () => {
            leaverEvents++;
            controller.abort();
          },
        }),
      );
      expect((await left).code).toBe('ABORTED');
      const countAtLeave = leaverEvents;
      expect(countAtLeave).toBeGreaterThan(0);
      open();
      const r = await stayer;
      expect(r.image.manifest.digest).toBe(img.manifestDigest);
      expect(leaverEvents).toBe(countAtLeave);
      for (const l of img.layers) expect(loop.stats.blobBytesServed(l.digest)).toBe(l.size);
      const line = await daemon!.waitLog((l) => l.event === 'pull' && l.image === ref);
      expect(line).toMatchObject({ result: 'ok', callers: 2 });
    } finally {
      open();
      delete loop.faults.hold;
      await leaver.close();
    }
  });

  it('a pull whose only caller leaves is stopped', async () => {
    const img = await sampleImage(63, { layers: 2 });
    loop.addImage('daemon/alone', 'v1', img);
    const ref = `${loop.host}/daemon/alone:v1`;
    // The blobs never come: the pull can only end by being stopped.
    loop.faults.hold = { path: new RegExp(img.layers.map((l) => l.digest).join('|')), until: new Promise<void>(() => undefined) };
    try {
      const controller = new AbortController();
      const e = await failure(
        client.pull(ref, { signal: controller.signal, onProgress: (ev) => ev.type === 'layer' && ev.state === 'fetching' && controller.abort() }),
      );
      expect(e.code).toBe('ABORTED');
      const line = await daemon!.waitLog((l) => l.event === 'pull' && l.image === ref);
      expect(line).toMatchObject({ result: 'aborted', code: 'ABORTED' });
    } finally {
      delete loop.faults.hold;
    }
  });

  it('lists, gets, mounts, measures and removes through the client', async () => {
    const images = await client.listImages();
    const rec = images.find((i) => i.name === loopRef)!;
    expect(rec.manifest.digest).toBe(image.manifestDigest);
    expect(rec.unpackedSize).toBeGreaterThan(0);
    const got = await client.getImage(loopRef);
    expect(got.image.layers.map((l) => l.chainID)).toEqual(rec.layers.map((l) => l.chainID));
    const byImage = await client.mounts({ image: loopRef });
    const byChain = await client.mounts({ chainID: rec.chainID });
    expect(byChain).toEqual(byImage);
    expect(byImage[0]!.options.at(-1)!.split(':')).toEqual(
      got.snapshots
        .slice()
        .reverse()
        .map((s, i) => (i === 0 ? `lowerdir=${s}` : s)),
    );
    const snaps = await client.listSnapshots();
    for (const l of rec.layers) expect(snaps.map((s) => s.chainID)).toContain(l.chainID);
    const usage = await client.snapshotUsage(rec.layers[0]!.chainID);
    expect(usage.inodes).toBeGreaterThan(1);
    expect(usage.size).toBeGreaterThan(0);
    const blob = await client.contentInfo(rec.config.digest);
    expect(blob).toEqual({ digest: rec.config.digest, size: rec.config.size });
    expect((await client.listContent()).map((b) => b.digest)).toContain(rec.manifest.digest);
    const inUse = await failure(client.deleteContent(rec.config.digest));
    expect(inUse.code).toBe('INVALID_ARGUMENT');
    const removed = await client.removeImage(loopRef, { gc: true });
    expect(removed.name).toBe(loopRef);
    expect(removed.gc!.snapshots.map((s) => s.chainID)).toEqual(expect.arrayContaining(rec.layers.map((l) => l.chainID)));
    expect((await failure(client.getImage(loopRef))).code).toBe('NOT_FOUND');
    expect((await client.listImages()).map((i) => i.name)).not.toContain(loopRef);
  });

  it('serves Prometheus metrics on the loopback port it was given', async () => {
    const serving = daemon!.logs.find((l) => l.msg === 'fastpulld serving')!;
    const url = serving.metrics as string;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const scrape = async (): Promise<string> => (await fetch(url)).text();
    // What this case adds to each series, whatever the cases before it left there.
    const before = await scrape();
    const grown = (text: string, series: string): number => sample(text, series) - (sample(before, series) || 0);

    // A pull whose first request for its layer fails with 503: the retry is counted.
    const retried = await sampleImage(23, { layers: 1 });
    loop.addImage('daemon/retry', 'v1', retried);
    loop.faults = { status: { path: new RegExp(`/blobs/${retried.layers[0]!.digest}$`), status: 503, times: 1 } };
    await client.pull(`${loop.host}/daemon/retry:v1`);
    expect(loop.faults.status?.times).toBe(0);
    loop.faults = {};
    // One the registry does not have, one whose only caller leaves, and one two callers share.
    expect((await failure(client.pull(`${loop.host}/daemon/metrics-missing:v1`))).code).toBe('NOT_FOUND');
    const left = await sampleImage(24, { layers: 1 });
    loop.addImage('daemon/metrics-left', 'v1', left);
    const leftRef = `${loop.host}/daemon/metrics-left:v1`;
    const controller = new AbortController();
    loop.faults.hold = { path: new RegExp(left.layers[0]!.digest), until: new Promise<void>(() => undefined) };
    expect(
      (
        await failure(
          client.pull(leftRef, { signal: controller.signal, onProgress: (ev) => ev.type === 'layer' && ev.state === 'fetching' && controller.abort() }),
        )
      ).code,
    ).toBe('ABORTED');
    await daemon!.waitLog((l) => l.event === 'pull' && l.image === leftRef && l.result === 'aborted');
    loop.faults = {};
    const shared = await sampleImage(25, { layers: 1 });
    loop.addImage('daemon/metrics-shared', 'v1', shared);
    const other = new FastpullClient(`unix:${socket}`);
    try {
      await sharedPull(loop, shared, `${loop.host}/daemon/metrics-shared:v1`, [client, other], [[], []]);
    } finally {
      await other.close();
    }

    const text = await scrape();
    expect(grown(text, 'fastpull_pulls_total{result="ok",code="ok"}')).toBe(2);
    expect(grown(text, 'fastpull_pulls_total{result="aborted",code="ABORTED"}')).toBe(1);
    expect(grown(text, 'fastpull_pulls_total{result="error",code="NOT_FOUND"}')).toBe(1);
    // Every stable code is there from the start, at 0 until it happens.
    for (const code of ErrorCodes.filter((c) => c !== 'ABORTED'))
      expect(text).toMatch(new RegExp(`^fastpull_pulls_total\\{result="error",code="${code}"\\} \\d+$`, 'm'));
    expect(text).toMatch(/^fastpull_pulls_total\{result="error",code="DIGEST_MISMATCH"\} 0$/m);
    expect(grown(text, 'fastpull_pull_fetched_bytes_total{result="ok"}')).toBeGreaterThanOrEqual(retried.layers[0]!.size + shared.layers[0]!.size);
    expect(text).toMatch(/^fastpull_pull_fetched_bytes_total\{result="aborted"\} \d+$/m);
    expect(grown(text, 'fastpull_fetched_bytes_total')).toBeGreaterThan(0);
    expect(grown(text, 'fastpull_pull_phase_seconds_count{phase="fetch"}')).toBeGreaterThanOrEqual(2);
    // Resolving is observed once per pull, apart from the per-layer sums.
    expect(grown(text, 'fastpull_pull_phase_seconds_count{phase="resolve"}')).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^fastpull_pulls_in_flight 0$/m);
    expect(grown(text, 'fastpull_pull_requests_total{joined="true"}')).toBe(1);
    expect(grown(text, 'fastpull_fetch_retries_total')).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^fastpull_fetch_stragglers_reissued_total \d+$/m);
  });

  it('answers the probes on its metrics port: /livez (and /healthz) while it runs, /readyz only while both sockets take connections and its store root is there', async () => {
    const dir = join(work.dir, 'probes');
    const paths = { socket: join(dir, 'fastpulld.sock'), snapshotter: join(dir, 'snapshotter.sock'), root: join(dir, 'root') };
    const d = await serve(['--socket', paths.socket, '--snapshotter-socket', paths.snapshotter, '--root', paths.root, '--metrics-address', '127.0.0.1:0']);
    try {
      const base = String(d.logs.find((l) => l.msg === 'fastpulld serving')!.metrics).replace(/\/metrics$/, '');
      const get = async (path: string): Promise<{ status: number; body: string }> => {
        const r = await fetch(`${base}${path}`);
        return { status: r.status, body: await r.text() };
      };
      expect(await get('/livez')).toEqual({ status: 200, body: 'ok\n' });
      expect(await get('/healthz')).toEqual({ status: 200, body: 'ok\n' });
      expect(await get('/readyz')).toEqual({ status: 200, body: 'ok\n' });
      expect((await get('/healthz?verbose')).status).toBe(200);
      expect(await get('/nothing')).toEqual({ status: 404, body: 'not found: fastpulld answers GET /metrics, /livez, /healthz, /readyz\n' });
      // docs/daemon.md's command, at this daemon's port.
      const docLine = readFileSync(join(repoRoot, 'docs', 'daemon.md'), 'utf8')
        .split('\n')
        .find((l) => l.startsWith('curl -fsS '))!;
      const curl = (): ReturnType<typeof spawnSync> =>
        spawnSync('sh', ['-c', docLine.replaceAll(`127.0.0.1:${SUGGESTED_METRICS_PORT}`, new URL(base).host)], { encoding: 'utf8' });
      expect(curl()).toMatchObject({ status: 0, stdout: 'ok\n' });

      // Each thing /readyz looks at, taken away and given back; /livez stays 200 throughout.
      const away = (p: string): string => `${p}.away`;
      for (const [what, path] of [
        ['API socket', paths.socket],
        ['snapshotter socket', paths.snapshotter],
        ['store root', paths.root],
      ] as const) {
        renameSync(path, away(path));
        try {
          const r = await get('/readyz');
          expect(r.status, what).toBe(503);
          expect(r.body).toMatch(/^not ready: .*\n$/);
          expect(r.body).toContain(
            what === 'store root'
              ? `store root ${path} is not writable: ENOENT: no such file or directory, open '${path}/.fastpulld-health'`
              : `${what} ${path} takes no connection: connect ENOENT ${path}`,
          );
          expect(await get('/livez')).toEqual({ status: 200, body: 'ok\n' });
          expect(curl().status).toBe(22); // curl -f: an HTTP error status
        } finally {
          renameSync(away(path), path);
        }
        expect(await get('/readyz')).toEqual({ status: 200, body: 'ok\n' });
      }
    } finally {
      await stop(d);
    }
  });

  it('refuses a second daemon on a live socket, and replaces a stale one', async () => {
    const second = startDaemon(['--socket', socket, '--root', join(work.dir, 'other')]);
    const { code } = await second.exited;
    expect(code).toBe(EXIT_CONFIG);
    expect(second.stderr()).toContain('another process is serving');
    expect(await client.health()).toBe('SERVING');

    const staleSocket = join(work.dir, 'stale.sock');
    const crashed = await serve(['--socket', staleSocket, '--root', join(work.dir, 'stale-root')]);
    crashed.proc.kill('SIGKILL');
    await crashed.exited;
    expect(existsSync(staleSocket)).toBe(true);
    const again = await serve(['--socket', staleSocket, '--root', join(work.dir, 'stale-root')]);
    const c = new FastpullClient(staleSocket);
    try {
      expect(await c.health()).toBe('SERVING');
    } finally {
      await c.close();
      await stop(again);
    }
    writeFileSync(join(work.dir, 'not-a-socket'), 'x');
    const refused = startDaemon(['--socket', join(work.dir, 'not-a-socket'), '--root', join(work.dir, 'stale-root')]);
    expect((await refused.exited).code).toBe(EXIT_CONFIG);
    expect(refused.stderr()).toContain('is not a socket');
  });

  it('makes the missing directories above its sockets with mode 0755 whatever its umask, so that the group can reach them', async () => {
    const api = join(work.dir, 'made', 'api', 'fastpulld.sock');
    const snap = join(work.dir, 'made', 'snap', 'snapshotter.sock');
    // fastpulld inherits this umask; the store root keeps to it, the socket directories do not.
    const umask = process.umask(0o077);
    let d: RunningDaemon | undefined;
    try {
      d = startDaemon(['--socket', api, '--snapshotter-socket', snap, '--root', join(work.dir, 'made-root')]);
    } finally {
      process.umask(umask);
    }
    try {
      await d.waitLog((l) => l.msg === 'fastpulld serving');
      for (const dir of [join(work.dir, 'made'), dirname(api), dirname(snap)]) expect(statSync(dir).mode & 0o777, dir).toBe(0o755);
      expect(statSync(join(work.dir, 'made-root')).mode & 0o777).toBe(0o700);
      for (const socket of [api, snap]) expect(statSync(socket).mode & 0o777, socket).toBe(0o660);
    } finally {
      await stop(d);
    }
  });

  it("takes the CLI's --inflater: a choice is what its pulls run with; anything else stops the start, naming the key", async () => {
    const zSocket = join(work.dir, 'zlib.sock');
    const z = await serve(['--socket', zSocket, '--root', join(work.dir, 'zlib-root'), '--inflater', 'zlib']);
    const c = new FastpullClient(zSocket);
    try {
      expect(z.logs.find((l) => l.msg === 'fastpulld serving')).toMatchObject({
        inflater: 'zlib',
        concurrency: 16,
        chunkSize: 16 * 1024 * 1024,
        keepBlobs: false,
        sync: true,
      });
      const pulled = await c.pull(loopRef);
      expect(pulled.image.manifest.digest).toBe(image.manifestDigest);
    } finally {
      await c.close();
      await stop(z);
    }
    const refused = startDaemon(['--socket', join(work.dir, 'bogus.sock'), '--root', join(work.dir, 'zlib-root'), '--inflater', 'bogus']);
    expect((await refused.exited).code).toBe(EXIT_CONFIG);
    expect(refused.stderr()).toContain('inflater: "bogus" is not one of auto, igzip, pigz, zlib, parallel, isal (INVALID_ARGUMENT)');
  });

  it('reloads hosts_dir from its config file on SIGHUP', async () => {
    const config = join(work.dir, 'fastpulld.toml');
    const hup = join(work.dir, 'hup.sock');
    writeFileSync(config, `root = "${join(work.dir, 'hup-root')}"\nhosts_dir = "${join(work.dir, 'hosts-a')}"\n`);
    const d = await serve(['--config', config, '--socket', hup]);
    try {
      expect(d.logs.find((l) => l.msg === 'fastpulld serving')).toMatchObject({ hostsDir: join(work.dir, 'hosts-a'), root: join(work.dir, 'hup-root') });
      writeFileSync(config, `root = "${join(work.dir, 'hup-root')}"\nhosts_dir = "${join(work.dir, 'hosts-b')}"\n`);
      d.proc.kill('SIGHUP');
      const line = await d.waitLog((l) => l.msg === 'configuration reloaded');
      expect(line).toMatchObject({ hostsDir: join(work.dir, 'hosts-b'), previousHostsDir: join(work.dir, 'hosts-a') });
    } finally {
      await stop(d);
    }
  });

  it('a health Watch sees NOT_SERVING on SIGTERM and its stream ends, so the daemon drains without being forced', async () => {
    const wSocket = join(work.dir, 'watch.sock');
    const d = await serve(['--socket', wSocket, '--root', join(work.dir, 'watch-root'), '--shutdown-timeout', '30s']);
    const def = protoLoader.loadSync(HEALTH_PROTO, { includeDirs: [PROTO_DIR], keepCase: false, defaults: true, enums: String });
    const Ctor = grpc.makeClientConstructor(def['grpc.health.v1.Health'] as grpc.ServiceDefinition, 'Health');
    const raw = new Ctor(`unix:${wSocket}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      Watch: (req: { service: string }) => grpc.ClientReadableStream<{ status: string }>;
    };
    try {
      const seen: string[] = [];
      const stream = raw.Watch({ service: 'fastpull.v1.Images' });
      const ended = new Promise<void>((resolve) => {
        stream.on('end', () => resolve());
        stream.on('error', () => resolve());
      });
      let serving!: () => void;
      const first = new Promise<void>((resolve) => (serving = resolve));
      stream.on('data', (m: { status: string }) => {
        seen.push(m.status);
        if (m.status === 'SERVING') serving();
      });
      await first;
      d.proc.kill('SIGTERM');
      await ended;
      expect(seen).toEqual(['SERVING', 'NOT_SERVING']);
      expect((await d.exited).code).toBe(0);
      expect(d.logs.find((l) => l.msg === 'stopped')).toMatchObject({ forced: false });
    } finally {
      raw.close();
      await stop(d);
    }
  });

  it('SIGTERM during a pull exits in bounded time; after a restart the pull resumes and completes', async () => {
    const big = await sampleImage(64, { layers: 2 });
    loop.addImage('daemon/big', 'v1', big);
    const ref = `${loop.host}/daemon/big:v1`;
    const total = big.layers.reduce((n, l) => n + l.size, 0);
    const termSocket = join(work.dir, 'term.sock');
    const termRoot = join(work.dir, 'term-root');
    loop.stats.reset();
    loop.faults.bytesPerSecond = 512 * 1024;
    const d = await serve(['--socket', termSocket, '--root', termRoot, '--chunk-size', '64KiB']);
    // The last layer's blob is held back until this daemon has exited: however slowly the signal is
    // acted on, the first pull cannot have had every byte.
    const last = big.layers[big.layers.length - 1]!;
    loop.faults.hold = { path: new RegExp(last.digest), until: d.exited };
    const c = new FastpullClient(termSocket);
    try {
      let signalled = 0;
      const served = () => big.layers.reduce((n, l) => n + loop.stats.blobBytesServed(l.digest), 0);
      // SIGTERM once a quarter of the first layer went out (progress events come per 4 MiB: too coarse here).
      const watcher = setInterval(() => {
        if (signalled === 0 && loop.stats.blobBytesServed(big.layers[0]!.digest) >= big.layers[0]!.size / 4) {
          signalled = performance.now();
          d.proc.kill('SIGTERM');
        }
      }, 10);
      const pulling = failure(c.pull(ref)).finally(() => clearInterval(watcher));
      const e = await pulling;
      expect(e.code).toBe('ABORTED');
      const { code } = await d.exited;
      expect(code).toBe(0);
      expect(existsSync(termSocket)).toBe(false);
      expect(signalled).toBeGreaterThan(0);
      const firstServed = served();
      expect(firstServed).toBeGreaterThan(0);
      expect(firstServed).toBeLessThan(total);
      loop.stats.reset();
      loop.faults.bytesPerSecond = undefined;
      delete loop.faults.hold;
      const again = await serve(['--socket', termSocket, '--root', termRoot]);
      const c2 = new FastpullClient(termSocket);
      try {
        const r = await c2.pull(ref);
        expect(r.image.manifest.digest).toBe(big.manifestDigest);
        const secondServed = served();
        // Resumed: what was downloaded before the signal was not fetched again.
        expect(secondServed).toBeLessThan(total);
        expect(secondServed + firstServed).toBeLessThan(total + 4 * 64 * 1024 * big.layers.length);
      } finally {
        await c2.close();
        await stop(again);
      }
    } finally {
      loop.faults.bytesPerSecond = undefined;
      delete loop.faults.hold;
      await c.close();
      await stop(d);
    }
  });

  describe.skipIf(lacksRegistry())('against docker-registry', () => {
    let registry: Awaited<ReturnType<typeof startDistribution>>;
    let img: BuiltImage;
    let ref = '';

    beforeAll(async () => {
      registry = await startDistribution({ dir: join(work.dir, 'registry') });
      img = await sampleImage(65, { layers: 3 });
      await pushImage(registry.url, 'daemon/real', 'v1', img);
      ref = `${registry.host}/daemon/real:v1`;
    });
    afterAll(async () => {
      await registry?.stop();
    });

    it('the TS client pulls, lists, gets and removes', async () => {
      const events: PullEvent[] = [];
      const r = await client.pull(ref, { onProgress: (e) => events.push(e) });
      expect(r.image.name).toBe(ref);
      expect(r.image.manifest.digest).toBe(img.manifestDigest);
      expect(events.filter((e) => e.type === 'layer' && e.state === 'committed')).toHaveLength(img.layers.length);
      expect((await client.listImages()).map((i) => i.name)).toContain(ref);
      expect((await client.getImage(ref)).image).toEqual(r.image);
      expect((await client.removeImage(ref)).name).toBe(ref);
      expect((await failure(client.getImage(ref))).code).toBe('NOT_FOUND');
    });

    it('the CLI with --address prints what it prints in-process', async () => {
      // A daemon of its own, so its store holds what the in-process store holds.
      const local = join(work.dir, 'cli-local');
      const root = join(work.dir, 'cli-daemon');
      const socket = join(work.dir, 'cli.sock');
      const d = await serve(['--socket', socket, '--root', root]);
      const viaDaemon = ['--address', socket];
      try {
        const norm = (s: string) =>
          s
            .replace(/in \d+\.\d\ds/g, 'in Xs')
            .replaceAll(root, 'ROOT')
            .replaceAll(local, 'ROOT');
        const p1 = await runCliAsync(['pull', '--root', local, ref]);
        const p2 = await runCliAsync(['pull', ...viaDaemon, ref]);
        expect(p1.status, p1.stderr).toBe(0);
        expect(p2.status, p2.stderr).toBe(0);
        expect(norm(p2.stdout)).toBe(norm(p1.stdout));
        expect(p2.stdout).toContain(`top snapshot ${root}`);
        // Progress lines: the same lines, whatever order layers finished in. "download complete" shows
        // only when a download ends before its unpacker starts: a race in-process as well.
        const lines = (s: string) =>
          s
            .split('\n')
            .filter((l) => !l.endsWith(': download complete'))
            .sort();
        expect(lines(p2.stderr)).toEqual(lines(p1.stderr));
        expect(lines(p2.stderr).filter((l) => l.includes(': pull complete ('))).toHaveLength(img.layers.length);

        const q1 = await runCliAsync(['pull', '--quiet', '--root', local, ref]);
        const q2 = await runCliAsync(['pull', '--quiet', ...viaDaemon, ref]);
        expect(q2.stdout).toBe(q1.stdout);

        const j1 = await runCliAsync(['images', '--json', '--root', local]);
        const j2 = await runCliAsync(['images', '--json'], { FASTPULL_ADDRESS: socket });
        expect(j2.status, j2.stderr).toBe(0);
        const strip = (s: string) => (JSON.parse(s) as Array<Record<string, unknown>>).map(({ created: _c, ...rest }) => rest);
        expect(strip(j2.stdout)).toEqual(strip(j1.stdout));
        const t1 = await runCliAsync(['images', '--root', local]);
        const t2 = await runCliAsync(['images', ...viaDaemon]);
        // The images were pulled moments apart: their age column may differ.
        const table = (s: string) => s.split('\n').map((l) => l.replace(/(just now|\d+ \w+ ago) *$/, 'AGE'));
        expect(table(t2.stdout)).toEqual(table(t1.stdout));
        expect(t2.stdout.split('\n')[1]).toContain(ref);

        const m1 = await runCliAsync(['mounts', '--json', '--root', local, ref]);
        const m2 = await runCliAsync(['mounts', '--json', ...viaDaemon, ref]);
        expect(m2.status, m2.stderr).toBe(0);
        expect(m2.stdout.replaceAll(root, 'ROOT')).toBe(m1.stdout.replaceAll(local, 'ROOT'));

        const r1 = await runCliAsync(['rm', '--root', local, ref]);
        const r2 = await runCliAsync(['rm', ...viaDaemon, ref]);
        expect(r2.status, r2.stderr).toBe(0);
        expect(r2.stdout).toBe(r1.stdout);
        const g1 = await runCliAsync(['gc', '--json', '--root', local]);
        const g2 = await runCliAsync(['gc', '--json', ...viaDaemon]);
        expect(g2.status, g2.stderr).toBe(0);
        const gc1 = JSON.parse(g1.stdout) as { snapshots: unknown[]; blobs: unknown[] };
        const gc2 = JSON.parse(g2.stdout) as { snapshots: unknown[]; blobs: unknown[] };
        expect(gc2.snapshots.length).toBe(gc1.snapshots.length);
        expect(gc2.snapshots.length).toBe(img.layers.length);
        expect(Object.keys(gc2)).toEqual(Object.keys(gc1));

        const e1 = await runCliAsync(['rm', '--root', local, ref]);
        const e2 = await runCliAsync(['rm', ...viaDaemon, ref]);
        expect(e2.status).toBe(1);
        expect(e2.stderr.replaceAll(root, 'ROOT')).toBe(e1.stderr.replaceAll(local, 'ROOT'));
      } finally {
        await stop(d);
      }
    });

    // As root the default socket is /run/fastpull/fastpulld.sock: used only when no daemon of the
    // machine's own is there.
    const defaultSocket = '/run/fastpull/fastpulld.sock';
    it.skipIf(lacksRoot() || notHere(existsSync(defaultSocket) ? `a fastpulld socket is already at ${defaultSocket}` : undefined))(
      'the CLI finds fastpulld at its default socket, unless told of a store of its own',
      async () => {
        const root = join(work.dir, 'default-socket-root');
        const d = await serve(['--socket', defaultSocket, '--root', root]);
        try {
          const env = { FASTPULL_ROOT: '', FASTPULL_ADDRESS: '' };
          const pulled = await runCliAsync(['pull', '--quiet', ref], env);
          expect(pulled.status, pulled.stderr).toBe(0);
          // It went to the daemon's store.
          const listed = JSON.parse((await runCliAsync(['images', '--json'], env)).stdout) as Array<{ name: string }>;
          expect(listed.map((i) => i.name)).toEqual([ref]);
          await d.waitLog((l) => l.event === 'pull' && l.image === ref);
          // --root means this store, in-process.
          const own = join(work.dir, 'default-socket-own');
          // An empty store of its own (a missing one would be NOT_FOUND: reading never creates a store).
          mkdirSync(own);
          const mine = await runCliAsync(['images', '--json', '--root', own], env);
          expect(JSON.parse(mine.stdout)).toEqual([]);
        } finally {
          await stop(d);
        }
        expect(existsSync(defaultSocket)).toBe(false);
      },
    );
  });
});
