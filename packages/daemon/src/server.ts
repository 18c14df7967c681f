// fastpulld's gRPC server: fastpull.v1 (Images, Snapshots, Content), grpc.health.v1 and server
// reflection on a unix socket, over one store root; shared pulls, logs, metrics, reload and shutdown.
import { promises as fsp, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import type { Server as HttpServer } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { pino, type Logger } from 'pino';
import {
  collectGarbage,
  dockerConfigCredentials,
  liveLeaseRefs,
  UnpackPool,
  FastpullError,
  formatPlatform,
  formatReference,
  isFastpullError,
  mountsFor,
  openStore,
  parseDigest,
  parsePlatform,
  parseReference,
  pull,
  resolveImage,
  type CredentialsProvider,
  type Digest,
  type ImageRecord,
  type PullResult,
  type Store,
} from '@fastpull/core';
import { withCollectionLock } from '@fastpull/core/content';
import { FetchScheduler, sharedFetchScheduler } from '@fastpull/core/registry';
import { readConfigFile, resolveConfig, type DaemonConfig, type RawConfig } from './config.js';
import { eventToWire, gcToWire, imageToWire, mountToWire, phasesToWire, snapshotToWire } from './convert.js';
import { toStatus } from './errors.js';
import { DaemonMetrics, serveMetrics } from './metrics.js';
import { packageDefinition, serviceDefinition, SERVICE_NAMES, type WireMountsRequest, type WirePullRequest } from './proto.js';
import { releaseIdleMemory } from './idle.js';
import { PullManager, type PullOutcome } from './pulls.js';

export interface DaemonOptions {
  readonly config: DaemonConfig;
  /** The config file the configuration came from (re-read by reload()). */
  readonly configPath?: string;
  /** Whether that file must exist on reload. */
  readonly configRequired?: boolean;
  /** The flags given on the command line (they keep overriding the file on reload). */
  readonly flags?: RawConfig;
  readonly logger?: Logger;
  readonly env?: NodeJS.ProcessEnv;
}

type ServingStatus = 'SERVING' | 'NOT_SERVING';

/** A running fastpulld. */
export class Daemon {
  readonly store: Store;
  readonly metrics: DaemonMetrics;
  readonly pulls: PullManager;
  readonly log: Logger;
  /** `unix:<socket>`, what clients dial. */
  readonly address: string;
  private hostsDir: string | undefined;
  private readonly scheduler: FetchScheduler;
  /** One pool for every pull when unpack_concurrency is set; else the library's process-wide one. */
  private readonly pool: UnpackPool | undefined;
  private readonly credentials: CredentialsProvider;
  private readonly server = new grpc.Server();
  private readonly health = new Map<string, ServingStatus>();
  private readonly watchers = new Set<{ service: string; call: grpc.ServerWritableStream<unknown, unknown> }>();
  private metricsServer: HttpServer | undefined;
  /** http://HOST:PORT/metrics when metrics are served. */
  metricsUrl: string | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(
    readonly config: DaemonConfig,
    private readonly options: DaemonOptions,
  ) {
    this.log = options.logger ?? pino({ level: config.logLevel, base: { service: 'fastpulld' } });
    this.store = openStore(config.root);
    this.address = `unix:${config.socket}`;
    this.hostsDir = config.hostsDir;
    this.scheduler = config.concurrency !== undefined ? new FetchScheduler({ maxRequests: config.concurrency, maxPerHost: config.concurrency }) : sharedFetchScheduler();
    this.pool = config.unpackConcurrency !== undefined ? new UnpackPool({ size: config.unpackConcurrency }) : undefined;
    const docker = dockerConfigCredentials({ env: options.env ?? process.env });
    const warned = new Set<string>();
    this.credentials = async (registry) => {
      try {
        return await docker(registry);
      } catch (e) {
        // As the CLI and Docker do: a failing credential helper means an anonymous pull, once warned.
        if (!warned.has(registry)) {
          warned.add(registry);
          this.log.warn({ registry, err: e instanceof Error ? e.message : String(e) }, 'no credentials from Docker config');
        }
        return undefined;
      }
    };
    this.pulls = new PullManager({
      started: (key, name) => this.log.debug({ image: name }, 'pull started'),
      fetched: (n) => this.metrics.bytesFetched.inc(n),
      settled: (o) => this.pullSettled(o),
      idle: releaseIdleMemory,
    });
    this.metrics = new DaemonMetrics({
      pullsInFlight: () => this.pulls.size,
      pullCallers: () => this.pulls.callers,
      requestsInFlight: () => this.scheduler.inFlight.requests,
    });
  }

  /** Starts serving: socket (stale one replaced), services, health, reflection, metrics. */
  static async start(options: DaemonOptions): Promise<Daemon> {
    const d = new Daemon(options.config, options);
    await d.listen();
    return d;
  }

  private async listen(): Promise<void> {
    const { config } = this;
    await fsp.mkdir(config.root, { recursive: true });
    await prepareSocket(config.socket);
    this.addServices();
    // The socket file takes its mode from the umask at bind(): 0660 from its first moment, so nobody
    // outside the group can connect in the window before the chmod.
    const umask = process.umask(0o117);
    try {
      await new Promise<void>((resolve, reject) =>
        this.server.bindAsync(this.address, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
      );
    } catch (e) {
      throw new FastpullError('INTERNAL', `listening on ${config.socket}: ${(e as Error).message}`, { cause: e });
    } finally {
      process.umask(umask);
    }
    await fsp.chmod(config.socket, 0o660);
    if (config.group !== undefined) {
      const gid = groupId(config.group);
      try {
        await fsp.chown(config.socket, process.getuid?.() ?? -1, gid);
      } catch (e) {
        throw new FastpullError('PERMISSION_DENIED', `giving ${config.socket} to group ${config.group}: ${(e as Error).message}`, { cause: e });
      }
    }
    for (const name of ['', ...SERVICE_NAMES]) this.health.set(name, 'SERVING');
    if (config.metricsAddress) {
      const m = await serveMetrics(config.metricsAddress, this.metrics.registry);
      this.metricsServer = m.server;
      this.metricsUrl = m.url;
    }
    this.log.info(
      { socket: config.socket, root: this.store.root, group: config.group, hostsDir: this.hostsDir, concurrency: config.concurrency, chunkSize: config.chunkSize, unpackConcurrency: config.unpackConcurrency, keepBlobs: config.keepBlobs, metrics: this.metricsUrl, pid: process.pid },
      'fastpulld serving',
    );
  }

  private addServices(): void {
    const unary =
      <Req, Res>(method: string, fn: (req: Req) => Promise<Res>) =>
      (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>): void => {
        fn(call.request).then(
          (res) => callback(null, res),
          (e: unknown) => {
            this.logFailure(method, e);
            callback(toStatus(e));
          },
        );
      };
    this.server.addService(serviceDefinition('fastpull.v1.Images'), {
      Pull: (call: grpc.ServerWritableStream<WirePullRequest, unknown>) => this.pullCall(call),
      List: unary('Images.List', () => this.listImages()),
      Get: unary('Images.Get', (req: { name: string }) => this.getImage(req.name)),
      Remove: unary('Images.Remove', (req: { name: string; gc: boolean }) => this.removeImage(req.name, req.gc)),
    });
    this.server.addService(serviceDefinition('fastpull.v1.Snapshots'), {
      Mounts: unary('Snapshots.Mounts', (req: WireMountsRequest) => this.mounts(req)),
      List: unary('Snapshots.List', async () => ({ snapshots: (await this.store.snapshots.list()).sort((a, b) => a.chainID.localeCompare(b.chainID)).map(snapshotToWire) })),
      Usage: unary('Snapshots.Usage', (req: { chainId: string }) => this.usage(req.chainId)),
    });
    this.server.addService(serviceDefinition('fastpull.v1.Content'), {
      Info: unary('Content.Info', async (req: { digest: string }) => {
        const digest = checkDigest(req.digest);
        const info = await this.store.content.info(digest);
        if (!info) throw new FastpullError('NOT_FOUND', `blob ${digest} is not in the store`);
        return { info: { digest: info.digest, size: info.size } };
      }),
      List: unary('Content.List', async () => ({ blobs: (await this.store.content.list()).sort((a, b) => a.digest.localeCompare(b.digest)).map((b) => ({ digest: b.digest, size: b.size })) })),
      Delete: unary('Content.Delete', (req: { digest: string }) => this.deleteBlob(req.digest)),
      GarbageCollect: unary('Content.GarbageCollect', async (req: { dryRun: boolean }) => gcToWire(await collectGarbage(this.store, { dryRun: req.dryRun }), req.dryRun)),
    });
    this.server.addService(serviceDefinition('grpc.health.v1.Health'), {
      Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const status = this.health.get(call.request.service);
        if (!status) callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
        else callback(null, { status });
      },
      Watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
        const service = call.request.service;
        call.write({ status: this.health.get(service) ?? 'SERVICE_UNKNOWN' });
        const watcher = { service, call };
        this.watchers.add(watcher);
        call.on('cancelled', () => this.watchers.delete(watcher));
      },
    });
    new ReflectionService(packageDefinition()).addToServer(this.server);
  }

  // ---- Images ----

  private pullCall(call: grpc.ServerWritableStream<WirePullRequest, unknown>): void {
    const req = call.request;
    let name: string;
    let key: string;
    let platform: string | undefined;
    try {
      if (!req.reference) throw new FastpullError('INVALID_REFERENCE', 'pull: the request names no image reference');
      const ref = parseReference(req.reference);
      name = formatReference(ref);
      platform = req.platform ? formatPlatform(parsePlatform(req.platform)) : undefined;
      key = JSON.stringify([name, platform ?? '', req.plainHttp, req.keepBlobs || this.config.keepBlobs]);
    } catch (e) {
      this.logFailure('Images.Pull', e);
      call.emit('error', toStatus(e));
      return;
    }
    const registry = parseReference(name).registry;
    const given = req.credentials && req.credentials.username ? { username: req.credentials.username, password: req.credentials.password } : undefined;
    const credentials: CredentialsProvider = given ? (r) => (r === registry ? given : this.credentials(r)) : this.credentials;
    let open = true;
    const { leave, joined } = this.pulls.join(
      key,
      name,
      (signal, onProgress) =>
        pull(name, {
          root: this.store.root,
          ...(platform ? { platform } : {}),
          ...(req.plainHttp ? { plainHttp: true } : {}),
          credentials,
          ...(this.hostsDir ? { hostsDir: this.hostsDir } : {}),
          ...(this.config.chunkSize !== undefined ? { chunkSize: this.config.chunkSize } : {}),
          ...(this.pool ? { pool: this.pool } : {}),
          ...(req.keepBlobs || this.config.keepBlobs ? { keepBlobs: true } : {}),
          scheduler: this.scheduler,
          onRetry: () => this.metrics.retries.inc(),
          onStraggler: () => this.metrics.stragglers.inc(),
          signal,
          onProgress,
        }),
      {
        progress: (e) => {
          if (open) call.write(eventToWire(e));
        },
        finish: (r) => {
          if (!open) return;
          void this.placement(r).then(
            (placement) => {
              if (!open) return;
              open = false;
              call.write(eventToWire({ type: 'done', image: r.image, timings: r.timings }, placement));
              call.end();
            },
            (e: unknown) => {
              open = false;
              call.emit('error', toStatus(e));
            },
          );
        },
        fail: (e) => {
          if (!open) return;
          open = false;
          call.emit('error', toStatus(e));
        },
      },
    );
    this.metrics.requests.inc({ joined: String(joined) });
    if (joined) this.log.debug({ image: name }, 'joined a running pull');
    call.on('cancelled', () => {
      open = false;
      leave();
    });
  }

  /** Where a pulled image lies: the store root, its snapshot directories, its mounts. */
  private async placement(r: PullResult): Promise<{ root: string; snapshots: string[]; mounts: Awaited<ReturnType<Store['snapshots']['mounts']>> }> {
    const chain = r.image.layers.map((l) => l.chainID);
    return { root: this.store.root, snapshots: chain.map((id) => this.store.snapshots.fsPath(id)), mounts: await this.store.snapshots.mounts(chain) };
  }

  private async unpackedSize(image: ImageRecord): Promise<number | null> {
    let total = 0;
    for (const l of image.layers) {
      const info = await this.store.snapshots.info(l.chainID);
      if (!info) return null;
      total += info.size;
    }
    return total;
  }

  private async listImages(): Promise<unknown> {
    const images = await this.store.images.list();
    return { images: await Promise.all(images.map(async (i) => imageToWire(i, await this.unpackedSize(i)))) };
  }

  private async getImage(name: string): Promise<unknown> {
    const image = await resolveImage(this.store, checkReference(name));
    return { image: imageToWire(image), root: this.store.root, snapshots: image.layers.map((l) => this.store.snapshots.fsPath(l.chainID)) };
  }

  private async removeImage(name: string, gc: boolean): Promise<unknown> {
    const image = await resolveImage(this.store, checkReference(name));
    await this.store.images.delete(image.name);
    this.log.info({ image: image.name }, 'image removed');
    return { name: image.name, ...(gc ? { gc: gcToWire(await collectGarbage(this.store), false) } : {}) };
  }

  // ---- Snapshots ----

  private async mounts(req: WireMountsRequest): Promise<unknown> {
    if (req.target === 'image' && req.image) return { mounts: (await mountsFor(this.store, checkReference(req.image))).map(mountToWire) };
    if (req.target === 'chainId' && req.chainId) {
      const top = checkDigest(req.chainId);
      // The stack below a snapshot, from its parents, bottom first.
      const chain: Digest[] = [];
      const seen = new Set<Digest>();
      for (let id: Digest | undefined = top; id !== undefined; ) {
        if (seen.has(id)) throw new FastpullError('INTERNAL', `snapshot ${top}: its parents form a loop at ${id}`);
        seen.add(id);
        const info = await this.store.snapshots.info(id);
        if (!info) throw new FastpullError('NOT_FOUND', id === top ? `snapshot ${id} is not committed` : `snapshot ${top}: its parent ${id} is not committed`);
        chain.unshift(id);
        id = info.parent;
      }
      return { mounts: (await this.store.snapshots.mounts(chain)).map(mountToWire) };
    }
    throw new FastpullError('INVALID_ARGUMENT', 'mounts: name an image or a chain_id');
  }

  private async usage(chainId: string): Promise<unknown> {
    const id = checkDigest(chainId);
    if (!(await this.store.snapshots.isCommitted(id))) throw new FastpullError('NOT_FOUND', `snapshot ${id} is not committed`);
    let size = 0;
    let inodes = 0;
    const seen = new Set<string>();
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
        const path = `${dir}/${entry.name}`;
        const st = await fsp.lstat(path, { bigint: true });
        const ino = `${st.dev}:${st.ino}`;
        if (seen.has(ino)) continue;
        seen.add(ino);
        inodes++;
        size += Number(st.blocks) * 512;
        if (entry.isDirectory()) await walk(path);
      }
    };
    const root = this.store.snapshots.fsPath(id);
    try {
      const st = await fsp.lstat(root);
      inodes++;
      size += st.blocks * 512;
      await walk(root);
    } catch (e) {
      throw new FastpullError('INTERNAL', `measuring snapshot ${id}: ${(e as Error).message}`, { cause: e });
    }
    return { size, inodes };
  }

  // ---- Content ----

  private async deleteBlob(digestText: string): Promise<unknown> {
    const digest = checkDigest(digestText);
    // Under the collection lock, so no pull takes a lease on it meanwhile and no gc races.
    await withCollectionLock(this.store.root, 'exclusive', async () => {
      if ((await liveLeaseRefs(this.store.root)).blobs.has(digest)) {
        throw new FastpullError('INVALID_ARGUMENT', `blob ${digest} is in use by a running pull; try again when it is done`);
      }
      const users = (await this.store.images.list()).filter(
        (i) => i.target.digest === digest || i.manifest.digest === digest || i.config.digest === digest || i.layers.some((l) => l.digest === digest),
      );
      if (users.length > 0) throw new FastpullError('INVALID_ARGUMENT', `blob ${digest} is in use by image ${users[0]!.name}; remove the image first`);
      if (!(await this.store.content.delete(digest))) throw new FastpullError('NOT_FOUND', `blob ${digest} is not in the store`);
    });
    this.log.info({ digest }, 'blob deleted');
    return {};
  }

  // ---- Logs, reload, shutdown ----

  private pullSettled(o: PullOutcome): void {
    this.metrics.settled(o.durationMs, o.result?.timings, o.error);
    const base = { event: 'pull', image: o.name, callers: o.callers, bytesFetched: o.bytesFetched, durationMs: Math.round(o.durationMs) };
    if (o.result) {
      const t = o.result.timings;
      const round = (n: number): number => Math.round(n * 10) / 10;
      this.log.info(
        {
          ...base,
          result: 'ok',
          manifest: o.result.image.manifest.digest,
          layers: t.layers.length,
          layersFetched: t.layers.filter((l) => l.state === 'committed').length,
          totalMs: round(t.totalMs),
          phases: Object.fromEntries(Object.entries(phasesToWire(t)).map(([k, v]) => [k, round(v)])),
        },
        'pull finished',
      );
    } else {
      const code = isFastpullError(o.error) ? o.error.code : 'INTERNAL';
      const message = o.error instanceof Error ? o.error.message : String(o.error);
      this.log[code === 'ABORTED' ? 'info' : 'warn']({ ...base, result: code === 'ABORTED' ? 'aborted' : 'error', code, err: message }, 'pull failed');
    }
  }

  private logFailure(method: string, e: unknown): void {
    const code = isFastpullError(e) ? e.code : 'INTERNAL';
    this.log[code === 'INTERNAL' ? 'error' : 'info']({ method, code, err: e instanceof Error ? e.message : String(e) }, 'request failed');
  }

  /** The hosts directory new pulls use (SIGHUP changes it). */
  get currentHostsDir(): string | undefined {
    return this.hostsDir;
  }

  /**
   * Re-reads the config file (the flags still override it) and applies what can change while
   * running: hosts_dir, for pulls that start from now on. Other changed keys need a restart; they
   * are logged.
   */
  reload(): void {
    if (!this.options.configPath) {
      this.log.info({ hostsDir: this.hostsDir }, 'reload: no config file; nothing to reload');
      return;
    }
    try {
      const next = resolveConfig(readConfigFile(this.options.configPath, this.options.configRequired === true), this.options.flags ?? {}, this.options.env ?? process.env);
      const before = this.hostsDir;
      this.hostsDir = next.hostsDir;
      const ignored = (Object.keys(next) as Array<keyof DaemonConfig>).filter((k) => k !== 'hostsDir' && JSON.stringify(next[k]) !== JSON.stringify(this.config[k]));
      this.log.info({ config: this.options.configPath, hostsDir: this.hostsDir, previousHostsDir: before, ...(ignored.length > 0 ? { needRestart: ignored } : {}) }, 'configuration reloaded');
    } catch (e) {
      this.log.error({ config: this.options.configPath, err: e instanceof Error ? e.message : String(e) }, 'reload failed; keeping the running configuration');
    }
  }

  /**
   * Stops: health NOT_SERVING, no new calls, every running pull aborted (each keeps its downloads for
   * the next pull to resume), then the socket removed. Resolves when done or after `timeoutMs` (the
   * remaining calls are then cut).
   */
  shutdown(reason = 'shutting down', timeoutMs = this.config.shutdownTimeoutMs): Promise<void> {
    this.stopping ??= this.stop(reason, timeoutMs);
    return this.stopping;
  }

  private async stop(reason: string, timeoutMs: number): Promise<void> {
    const t0 = performance.now();
    this.log.info({ reason, pulls: this.pulls.size }, 'stopping');
    for (const name of this.health.keys()) this.setHealth(name, 'NOT_SERVING');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const drained = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.pulls.abortAll(new FastpullError('ABORTED', `fastpulld is ${reason}; the pull resumes when asked again`));
    const settled = await Promise.race([this.pulls.settled().then(() => 'settled' as const), deadline]);
    for (const w of this.watchers) w.call.end();
    this.watchers.clear();
    const drainedInTime = await Promise.race([drained.then(() => 'drained' as const), deadline]);
    if (drainedInTime === 'timeout') this.server.forceShutdown();
    clearTimeout(timer);
    await new Promise<void>((resolve) => (this.metricsServer ? this.metricsServer.close(() => resolve()) : resolve()));
    this.metricsServer?.closeAllConnections();
    await fsp.rm(this.config.socket, { force: true });
    await this.pool?.close();
    this.log.info({ ms: Math.round(performance.now() - t0), pullsStopped: settled === 'settled', forced: drainedInTime === 'timeout' }, 'stopped');
  }

  private setHealth(service: string, status: ServingStatus): void {
    this.health.set(service, status);
    for (const w of this.watchers) if (w.service === service) w.call.write({ status });
  }
}

/** A reference that parses, returned as given (resolveImage canonicalises it). */
function checkReference(ref: string): string {
  if (!ref) throw new FastpullError('INVALID_REFERENCE', 'the request names no image reference');
  parseReference(ref);
  return ref;
}

function checkDigest(d: string): Digest {
  if (!d) throw new FastpullError('INVALID_DIGEST', 'the request names no digest');
  return parseDigest(d).digest;
}

/**
 * Makes `path` free to listen on: a socket file nobody answers on (a daemon that crashed) is removed;
 * a live one means another daemon serves there, which is an error, as is any file that is not a socket.
 */
export async function prepareSocket(path: string): Promise<void> {
  await fsp.mkdir(dirname(path), { recursive: true, mode: 0o755 });
  let st;
  try {
    st = await fsp.lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new FastpullError('INVALID_ARGUMENT', `${path} exists and is not a socket; not replacing it`);
  const answered = await new Promise<boolean>((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  if (answered) throw new FastpullError('INVALID_ARGUMENT', `another process is serving on ${path}; stop it first or choose another --socket`);
  await fsp.rm(path, { force: true });
}

/** A group name or numeric id as a gid. */
function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group);
  let text = '';
  try {
    text = readFileSync('/etc/group', 'utf8');
  } catch {
    // No group database: only numeric ids work.
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  throw new FastpullError('INVALID_ARGUMENT', `group ${JSON.stringify(group)} does not exist`);
}
