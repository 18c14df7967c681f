// fastpulld's gRPC server: fastpull.v1 (Images, Snapshots, Content), grpc.health.v1 and server
// reflection on a unix socket, over one store root; shared pulls, logs, metrics, reload and shutdown.
import { existsSync, promises as fsp } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { pino, type Logger } from 'pino';
import {
  asFastpullError,
  credentialsIdentity,
  FastpullError,
  formatPlatform,
  formatReference,
  checkDirectory,
  isFastpullError,
  LocalService,
  parseDigest,
  parsePlatform,
  parseReference,
  type Digest,
  type MountTarget,
  type PulledImage,
  type Store,
} from '@fastpull/core';
import { readConfigFile, resolveConfig, type DaemonConfig, type RawConfig } from './config.js';
import { eventToWire, traceToWire, gcToWire, imageToWire, mountToWire, phasesToWire, snapshotToWire } from './convert.js';
import { toStatus } from './errors.js';
import { DaemonMetrics, serveMetrics } from './metrics.js';
import { packageDefinition, serviceDefinition, SERVICE_NAMES, type WireMountsRequest, type WirePullRequest } from './proto.js';
export { prepareSocket } from './socket.js';
import { listenUnix } from './socket.js';
import { releaseIdleMemory } from './idle.js';
import { PullManager, type PullOutcome } from './pulls.js';
import { sharedSnapshotPuller } from './snapshotter/pull.js';
import { SnapshotterServer } from './snapshotter/server.js';
import { writableMountHandlers } from './writable.js';

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
  /** The service every API of the daemon is a front end of. */
  readonly service: LocalService;
  readonly metrics: DaemonMetrics;
  readonly pulls: PullManager;
  readonly log: Logger;
  /** `unix:<socket>`, what clients dial. */
  readonly address: string;
  private readonly server = new grpc.Server();
  /** grpc.health.v1, from grpc-health-check; `healthNames` are the services it answers for. */
  private readonly health = new HealthImplementation();
  private readonly healthNames = new Set<string>();
  /** Open Watch streams, ended at shutdown so the server can drain. */
  private readonly watchers = new Set<grpc.ServerWritableStream<unknown, unknown>>();
  private metricsServer: HttpServer | undefined;
  /** containerd's snapshotter API, on its own socket, when configured. */
  snapshotter: SnapshotterServer | undefined;
  /** http://HOST:PORT/metrics when metrics are served. */
  metricsUrl: string | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(
    readonly config: DaemonConfig,
    private readonly options: DaemonOptions,
  ) {
    this.log = options.logger ?? pino({ level: config.logLevel, base: { service: 'fastpulld' } });
    this.address = `unix:${config.socket}`;
    this.service = new LocalService({
      root: config.root,
      ...(config.hostsDir !== undefined ? { hostsDir: config.hostsDir } : {}),
      env: options.env ?? process.env,
      onWarning: (message) => this.log.warn(message),
      ...(config.concurrency !== undefined ? { concurrency: config.concurrency } : {}),
      ...(config.chunkSize !== undefined ? { chunkSize: config.chunkSize } : {}),
      ...(config.unpackConcurrency !== undefined ? { unpackConcurrency: config.unpackConcurrency } : {}),
      ...(config.keepBlobs ? { keepBlobs: true } : {}),
      ...(config.sync ? {} : { sync: false }),
      onRetry: () => this.metrics.retries.inc(),
      onStraggler: () => this.metrics.stragglers.inc(),
    });
    this.store = this.service.store;
    this.pulls = new PullManager({
      started: (key, name) => this.log.debug({ image: name }, 'pull started'),
      fetched: (n) => this.metrics.bytesFetched.inc(n),
      settled: (o) => this.pullSettled(o),
      idle: releaseIdleMemory,
    });
    this.metrics = new DaemonMetrics({
      pullsInFlight: () => this.pulls.size,
      pullCallers: () => this.pulls.callers,
      requestsInFlight: () => this.service.requestsInFlight,
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
    // Every path is checked before anything listens: a mistake fails the start at once, naming it.
    await checkDirectory(config.root, 'store root', 'create');
    // A hosts_dir that does not exist yet means no mirrors until it does (SIGHUP re-reads it), as
    // containerd's config_path; anything else wrong with it stops the start.
    if (config.hostsDir !== undefined) {
      if (existsSync(config.hostsDir)) await checkDirectory(config.hostsDir, 'registry hosts directory (hosts_dir)', 'read');
      else this.log.warn({ hostsDir: config.hostsDir }, 'hosts_dir does not exist: no registry mirrors until it does');
    }
    // Services before the socket exists: a client that connects at once finds them.
    this.addServices();
    await listenUnix(this.server, config.socket, config.group);
    if (config.snapshotterSocket) this.snapshotter = await SnapshotterServer.start({ socket: config.snapshotterSocket, ...(config.group !== undefined ? { group: config.group } : {}), store: this.store, log: this.log, pullForSnapshot: sharedSnapshotPuller(this.pulls, this.service, config.keepBlobs) });
    for (const name of ['', ...SERVICE_NAMES]) this.setHealth(name, 'SERVING');
    if (config.metricsAddress) {
      const m = await serveMetrics(config.metricsAddress, this.metrics.registry);
      this.metricsServer = m.server;
      this.metricsUrl = m.url;
    }
    this.log.info(
      { socket: config.socket, root: this.store.root, group: config.group, hostsDir: this.service.hostsDir, concurrency: config.concurrency, chunkSize: config.chunkSize, unpackConcurrency: config.unpackConcurrency, keepBlobs: config.keepBlobs, metrics: this.metricsUrl, pid: process.pid },
      'fastpulld serving',
    );
  }

  private addServices(): void {
    const unary =
      <Req, Res>(method: string, fn: (req: Req) => Promise<Res>) =>
      (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>): void => {
        // Through a promise, so a request checked (and refused) synchronously still gets its status.
        Promise.resolve(call.request).then(fn).then(
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
      Get: unary('Images.Get', (req: { name: string; platform: string }) => this.getImage(req.name, req.platform)),
      Remove: unary('Images.Remove', (req: { name: string; gc: boolean; platform: string }) => this.removeImage(req.name, req.gc, req.platform)),
    });
    const service = this.service;
    this.server.addService(serviceDefinition('fastpull.v1.Snapshots'), {
      Mounts: unary('Snapshots.Mounts', async (req: WireMountsRequest) => ({ mounts: (await service.mounts(mountTarget(req))).map(mountToWire) })),
      List: unary('Snapshots.List', async () => ({ snapshots: (await service.listSnapshots()).map(snapshotToWire) })),
      Usage: unary('Snapshots.Usage', (req: { chainId: string }) => service.snapshotUsage(checkDigest(req.chainId))),
      ...writableMountHandlers(service, unary, (message, fields) => this.log.info(fields, message)),
    });
    this.server.addService(serviceDefinition('fastpull.v1.Content'), {
      Info: unary('Content.Info', async (req: { digest: string }) => ({ info: await service.contentInfo(checkDigest(req.digest)) })),
      List: unary('Content.List', async () => ({ blobs: await service.listContent() })),
      Delete: unary('Content.Delete', async (req: { digest: string }) => {
        const digest = checkDigest(req.digest);
        await service.deleteContent(digest);
        this.log.info({ digest }, 'blob deleted');
        return {};
      }),
      GarbageCollect: unary('Content.GarbageCollect', async (req: { dryRun: boolean }) => gcToWire(await service.collectGarbage({ dryRun: req.dryRun }), req.dryRun)),
    });
    // The health service is grpc-health-check's; its Watch streams are tracked here so that a
    // shutdown can end them (the library never does, and the server would wait for them to drain).
    this.health.addToServer({
      addService: (definition, implementation) => {
        const watch = implementation.watch as (call: grpc.ServerWritableStream<unknown, unknown>) => void;
        this.server.addService(definition as grpc.ServiceDefinition, {
          ...implementation,
          watch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
            this.watchers.add(call);
            call.on('cancelled', () => this.watchers.delete(call));
            watch(call);
          },
        } as grpc.UntypedServiceImplementation);
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
    const given = req.credentials && req.credentials.username ? { username: req.credentials.username, password: req.credentials.password } : undefined;
    try {
      if (!req.reference) throw new FastpullError('INVALID_REFERENCE', 'pull: the request names no image reference');
      const ref = parseReference(req.reference);
      name = formatReference(ref);
      platform = req.platform ? formatPlatform(parsePlatform(req.platform)) : undefined;
      // Callers share a pull only with the same credentials: nobody rides on a secret that is not theirs.
      // A traced pull records its trace from its start: callers share it only when all want one.
      key = JSON.stringify([name, platform ?? '', req.plainHttp, req.keepBlobs || this.config.keepBlobs, credentialsIdentity(given), req.trace]);
    } catch (e) {
      this.logFailure('Images.Pull', e);
      call.emit('error', toStatus(e));
      return;
    }
    let open = true;
    const { leave, joined } = this.pulls.join(
      key,
      name,
      (signal, onProgress, onTrace) =>
        this.service.pull(name, {
          ...(platform ? { platform } : {}),
          ...(req.plainHttp ? { plainHttp: true } : {}),
          ...(req.keepBlobs ? { keepBlobs: true } : {}),
          ...(given ? { credentials: given } : {}),
          ...(req.trace ? { onTrace } : {}),
          signal,
          onProgress,
        }),
      {
        progress: (e) => {
          if (open) call.write(eventToWire(e));
        },
        trace: (t) => {
          if (open) call.write(traceToWire(t));
        },
        finish: (r) => {
          if (!open) return;
          open = false;
          const { root, snapshots, mounts } = r as PulledImage;
          call.write(eventToWire({ type: 'done', image: r.image, timings: r.timings }, { root, snapshots, mounts }));
          call.end();
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

  private async listImages(): Promise<unknown> {
    return { images: (await this.service.listImages()).map((i) => imageToWire(i, i.unpackedSize ?? null)) };
  }

  private async getImage(name: string, platform: string): Promise<unknown> {
    const d = await this.service.inspectImage(checkReference(name), platform ? { platform } : {});
    return {
      image: imageToWire(d.image, d.unpackedSize),
      root: d.root,
      snapshots: d.snapshots,
      manifestJson: JSON.stringify(d.manifest),
      configJson: JSON.stringify(d.config),
      indexJson: d.index !== undefined ? JSON.stringify(d.index) : '',
    };
  }

  private async removeImage(name: string, gc: boolean, platform: string): Promise<unknown> {
    const removed = await this.service.removeImage(checkReference(name), platform ? { platform } : {});
    this.log.info({ image: removed.name }, 'image removed');
    return { name: removed.name, ...(gc ? { gc: gcToWire(await this.service.collectGarbage(), false) } : {}) };
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
    const { code, message } = asFastpullError(e);
    this.log[code === 'INTERNAL' ? 'error' : 'info']({ method, code, err: message }, 'request failed');
  }

  /** The hosts directory new pulls use (SIGHUP changes it). */
  get currentHostsDir(): string | undefined {
    return this.service.hostsDir;
  }

  /**
   * Re-reads the config file (the flags still override it) and applies what can change while
   * running: hosts_dir, for pulls that start from now on. Other changed keys need a restart; they
   * are logged.
   */
  reload(): void {
    if (!this.options.configPath) {
      this.log.info({ hostsDir: this.service.hostsDir }, 'reload: no config file; nothing to reload');
      return;
    }
    try {
      const next = resolveConfig(readConfigFile(this.options.configPath, this.options.configRequired === true), this.options.flags ?? {}, this.options.env ?? process.env);
      const before = this.service.hostsDir;
      this.service.hostsDir = next.hostsDir;
      const ignored = (Object.keys(next) as Array<keyof DaemonConfig>).filter((k) => k !== 'hostsDir' && JSON.stringify(next[k]) !== JSON.stringify(this.config[k]));
      this.log.info({ config: this.options.configPath, hostsDir: this.service.hostsDir, previousHostsDir: before, ...(ignored.length > 0 ? { needRestart: ignored } : {}) }, 'configuration reloaded');
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
    for (const name of this.healthNames) this.setHealth(name, 'NOT_SERVING');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const drained = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    const snapshotterStopped = this.snapshotter?.stop(timeoutMs);
    this.pulls.abortAll(new FastpullError('ABORTED', `fastpulld is ${reason}; the pull resumes when asked again`));
    const settled = await Promise.race([this.pulls.settled().then(() => 'settled' as const), deadline]);
    for (const call of this.watchers) call.end();
    this.watchers.clear();
    const drainedInTime = await Promise.race([drained.then(() => 'drained' as const), deadline]);
    if (drainedInTime === 'timeout') this.server.forceShutdown();
    clearTimeout(timer);
    await new Promise<void>((resolve) => (this.metricsServer ? this.metricsServer.close(() => resolve()) : resolve()));
    this.metricsServer?.closeAllConnections();
    await fsp.rm(this.config.socket, { force: true });
    await snapshotterStopped;
    await this.service.close();
    this.log.info({ ms: Math.round(performance.now() - t0), pullsStopped: settled === 'settled', forced: drainedInTime === 'timeout' }, 'stopped');
  }

  private setHealth(service: string, status: ServingStatus): void {
    this.healthNames.add(service);
    this.health.setStatus(service, status);
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

/** What a Mounts request names: an image by reference or a snapshot stack by its top chainID. */
function mountTarget(req: WireMountsRequest): MountTarget {
  if (req.target === 'image' && req.image) return { image: checkReference(req.image), ...(req.platform ? { platform: req.platform } : {}) };
  if (req.target === 'chainId' && req.chainId) return { chainID: checkDigest(req.chainId) };
  throw new FastpullError('INVALID_ARGUMENT', 'mounts: name an image or a chain_id');
}
