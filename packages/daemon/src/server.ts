// fastpulld's gRPC server: fastpull.v1 (Images, Snapshots, Content), grpc.health.v1 and server
// reflection on a unix socket, over one store root; shared pulls, logs, metrics, reload and shutdown.
import { existsSync, promises as fsp } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { pino, type Logger } from 'pino';
import { checkDirectory, FastpullError, LocalService, type PulledImage, type Store } from '@fastpull/core';
import type { Tuning } from '@fastpull/core/tuning';
import { readConfigFile, resolveConfig, serviceOptions, signatureSettingsOf, type DaemonConfig, type RawConfig } from './config.js';
import { contentHandlers, imagesHandlers, snapshotsHandlers, type HandlerContext } from './handlers.js';
import { DaemonMetrics, serveMetrics } from './metrics.js';
import { packageDefinition, serviceDefinition } from './proto.js';
import { HEALTH_REASON_KEY, HealthMonitor, type HealthReport, type ServingStatus } from './health.js';
import { daemonChecks } from './health-checks.js';
export { prepareSocket } from './socket.js';
import { groupId, listenUnix, missingDirectories } from './socket.js';
import { grpcServerOptions, type ConnectionLimits, type UnixListener } from './connections.js';
import { footprint, IdleMemory } from './idle.js';
import { signatureLog } from './verdicts.js';
import { logPullOutcome } from './pull-log.js';
import { PullManager } from './pulls.js';
import { servicePolicy, sharedSnapshotPuller } from './snapshotter/pull.js';
import { SnapshotterServer } from './snapshotter/server.js';
import { announceAndLog, type AnnounceOutcome } from './snapshotter/announce.js';

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
  /** Measuring knobs for every pull (read from the environment by bin.ts); default none. */
  readonly tuning?: Tuning;
}

/** How long /readyz waits for the checks it asks for: under the 3 s timeout of deploy/'s readiness probe. */
const READY_WAIT_MS = 2500;

/** A running fastpulld. */
export class Daemon {
  readonly store: Store;
  /** The service every API of the daemon is a front end of. */
  readonly service: LocalService;
  readonly metrics: DaemonMetrics;
  readonly pulls: PullManager<PulledImage>;
  readonly log: Logger;
  /** `unix:<socket>`, what clients dial. */
  readonly address: string;
  private readonly server: grpc.Server;
  /** The API socket's listener (connections.ts). */
  private listener: UnixListener | undefined;
  /** grpc.health.v1, from grpc-health-check; `healthNames` are the services it answers for. */
  private readonly health = new HealthImplementation();
  private readonly healthNames = new Map<string, ServingStatus>();
  /** The checks behind the health statuses (started once both sockets listen). */
  monitor: HealthMonitor | undefined;
  /** Open Watch streams, ended at shutdown so the server can drain. */
  private readonly watchers = new Set<grpc.ServerWritableStream<unknown, unknown>>();
  private metricsServer: HttpServer | undefined;
  /** containerd's snapshotter API, on its own socket, when configured. */
  snapshotter: SnapshotterServer | undefined;
  /** http://HOST:PORT/metrics when metrics are served. */
  metricsUrl: string | undefined;
  private stopping: Promise<void> | undefined;
  /** Aborted when stopping: work of the daemon's own (announcing images) stops with it. */
  private readonly lifetime = new AbortController();
  /** The reload running now, if any: reloads run one after another. */
  private reloading: Promise<void> = Promise.resolve();
  /** Gives back what pulls grew once the daemon is idle (idle.ts). */
  private readonly idleMemory = new IdleMemory({
    retireWorkers: () => this.service.releaseIdleWorkers(),
    settled: (o) => this.log.debug({ ...o, ...footprint() }, 'idle memory released'),
  });
  /** The latest announcement of containerd's images, while it runs or once done. */
  announcing: Promise<AnnounceOutcome | undefined> | undefined;

  private constructor(
    readonly config: DaemonConfig,
    private readonly options: DaemonOptions,
  ) {
    this.log = options.logger ?? pino({ level: config.logLevel, base: { service: 'fastpulld' } });
    this.address = `unix:${config.socket}`;
    this.server = new grpc.Server(grpcServerOptions({ idleTimeoutMs: config.connectionIdleTimeoutMs }));
    this.service = new LocalService({
      ...serviceOptions(config),
      env: options.env ?? process.env,
      ...(options.tuning ? { tuning: options.tuning } : {}),
      onWarning: (message) => this.log.warn(message),
      onRetry: () => this.metrics.retries.inc(),
      onStraggler: () => this.metrics.stragglers.inc(),
    });
    this.store = this.service.store;
    this.pulls = new PullManager<PulledImage>({
      started: (key, name) => {
        this.idleMemory.busy();
        this.log.debug({ image: name }, 'pull started');
      },
      fetched: (n) => this.metrics.bytesFetched.inc(n),
      settled: (o) => logPullOutcome(this.log, this.metrics, o),
      idle: () => this.idleMemory.idle(),
    });
    this.metrics = new DaemonMetrics({
      pullsInFlight: () => this.pulls.size,
      pullCallers: () => this.pulls.callers,
      requestsInFlight: () => this.service.requestsInFlight,
      health: () => this.monitor?.report,
    });
  }

  /** Starts serving: socket (stale one replaced), services, health, reflection, metrics. */
  static async start(options: DaemonOptions): Promise<Daemon> {
    const d = new Daemon(options.config, options);
    await d.listen();
    return d;
  }

  /**
   * Listens on both sockets, or, when any part of the start fails, takes away what it made (sockets,
   * their directories, the metrics listener) before the error goes out: a socket left behind would
   * look like a daemon that crashed. The store root, once made, stays.
   */
  private async listen(): Promise<void> {
    const { config } = this;
    // A group that does not exist is a configuration to fix before anything is made.
    if (config.group !== undefined) groupId(config.group);
    const sockets = [config.socket, ...(config.snapshotterSocket ? [config.snapshotterSocket] : [])];
    const made = [...new Set(sockets.flatMap((s) => missingDirectories(s)))];
    const bound: string[] = [];
    try {
      await this.serve(bound);
    } catch (e) {
      this.monitor?.stop();
      this.listener?.close();
      this.server.forceShutdown();
      await this.snapshotter?.stop(0);
      await new Promise<void>((resolve) => (this.metricsServer ? this.metricsServer.close(() => resolve()) : resolve()));
      for (const socket of bound) await fsp.rm(socket, { force: true });
      // Innermost first; one something else has put a file in stays.
      for (const dir of made.sort((a, b) => b.length - a.length)) await fsp.rmdir(dir).catch(() => undefined);
      await this.service.close();
      throw e;
    }
  }

  private async serve(bound: string[]): Promise<void> {
    const { config } = this;
    // Every path is checked before anything listens: a mistake fails the start at once, naming it.
    await checkDirectory(config.root, 'store root', 'create');
    // A hosts_dir that does not exist yet means no mirrors until it does (SIGHUP re-reads it), as
    // containerd's config_path; anything else wrong with it stops the start.
    if (config.hostsDir !== undefined) {
      if (existsSync(config.hostsDir)) await checkDirectory(config.hostsDir, 'registry hosts directory (hosts_dir)', 'read');
      else this.log.warn({ hostsDir: config.hostsDir }, 'hosts_dir does not exist: no registry mirrors until it does');
    }
    // The signature policies are read and checked now: one that cannot be applied stops the start,
    // rather than refusing (or, worse, letting through) every pull.
    await this.service.setSignatureSettings(signatureSettingsOf(config));
    // Services before the socket exists: a client that connects at once finds them.
    this.addServices();
    const limits = (maxConnections: number): ConnectionLimits => ({ maxConnections, handshakeTimeoutMs: config.handshakeTimeoutMs });
    this.listener = await listenUnix(this.server, {
      path: config.socket,
      group: config.group,
      limits: limits(config.maxConnections),
      log: this.log,
      flag: '--socket',
    });
    bound.push(config.socket);
    if (config.snapshotterSocket) {
      this.snapshotter = await SnapshotterServer.start({
        socket: config.snapshotterSocket,
        ...(config.group !== undefined ? { group: config.group } : {}),
        limits: limits(config.snapshotterMaxConnections),
        idleTimeoutMs: config.connectionIdleTimeoutMs,
        store: this.store,
        log: this.log,
        pullForSnapshot: sharedSnapshotPuller(this.pulls, this.service, config.keepBlobs),
        signaturePolicy: servicePolicy(this.service),
      });
    }
    await this.startHealth();
    if (config.metricsAddress) {
      const m = await serveMetrics(config.metricsAddress, this.metrics.registry, {
        notReady: (service) => this.notReady(service),
        services: () => this.monitor?.serviceNames ?? [''],
      });
      this.metricsServer = m.server;
      this.metricsUrl = m.url;
    }
    this.log.info(
      {
        socket: config.socket,
        group: config.group,
        maxConnections: config.maxConnections,
        ...this.service.settings,
        ...signatureLog(config),
        metrics: this.metricsUrl,
        pid: process.pid,
      },
      'fastpulld serving',
    );
    this.idleMemory.schedule();
    this.announcing = this.announceImages();
  }

  /**
   * Has containerd announce the images of CRI's namespace again, so that its CRI plugin lists those
   * it left out when it started while fastpulld was not serving (snapshotter/announce.ts). Only
   * with `containerd_socket`, while the snapshotter API is served, and when containerd has
   * snapshots here at all: else the CRI plugin never asked fastpulld anything. Never rejects.
   */
  announceImages(): Promise<AnnounceOutcome | undefined> {
    const socket = this.config.containerdSocket;
    if (socket === undefined || !this.snapshotter || this.lifetime.signal.aborted) return Promise.resolve(undefined);
    if (this.snapshotter.records.list(['kind==committed']).length === 0) {
      this.log.debug({ containerd: socket }, 'containerd has no snapshots here: no images to announce');
      return Promise.resolve(undefined);
    }
    return announceAndLog({ socket, log: this.log, signal: this.lifetime.signal });
  }

  /**
   * The health checks of each service (health.ts), run once before the daemon says it serves, then
   * every `health_interval` and on demand. A socket file removed from under the daemon is caught by
   * its socket's check: nobody could reach it.
   */
  private async startHealth(): Promise<void> {
    this.monitor = new HealthMonitor({
      ...daemonChecks(this.config, this.snapshotter, (space) => this.metrics.diskSpace(space)),
      intervalMs: this.config.healthIntervalMs,
      changed: (report, previous) => this.healthChanged(report, previous),
    });
    await this.monitor.check();
    this.monitor.start();
  }

  /** A report that changed a status or a check: the gRPC statuses follow, each change is logged once. */
  private healthChanged(report: HealthReport, previous: HealthReport | undefined): void {
    if (this.stopping) return;
    for (const [check, why] of report.checks) {
      const was = previous?.checks.get(check);
      if (why !== undefined && (previous === undefined || was === undefined)) this.log.warn({ check, reason: why }, 'health check failing');
      if (why === undefined && previous !== undefined && was !== undefined) this.log.info({ check }, 'health check passing again');
    }
    for (const [service, h] of report.services) {
      if (this.healthNames.get(service) === h.status) continue;
      if (this.healthNames.has(service) || h.status !== 'SERVING')
        this.log[h.status === 'SERVING' ? 'info' : 'warn']({ service, status: h.status, reasons: h.reasons }, 'health status changed');
      this.setHealth(service, h.status);
    }
  }

  /**
   * Why the daemon (or its health service `service`) cannot serve now, or undefined when it can
   * (/readyz): a fresh run of the health checks (or the one in flight); one that does not answer in
   * time is a reason.
   */
  async notReady(service = ''): Promise<string | undefined> {
    if (this.stopping || !this.monitor) return 'stopping';
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), READY_WAIT_MS)));
    const report = await Promise.race([this.monitor.check(), late]).finally(() => clearTimeout(timer));
    if (this.stopping) return 'stopping';
    if (!report) return `health checks did not answer within ${READY_WAIT_MS} ms`;
    const reasons = report.services.get(service)?.reasons ?? [];
    return reasons.length === 0 ? undefined : reasons.join('; ');
  }

  /** Why `service` is NOT_SERVING, as a health Check's trailing metadata says; undefined when it serves. */
  private healthReason(service: string): string | undefined {
    if (this.stopping) return 'stopping';
    const h = this.monitor?.report?.services.get(service);
    return h && h.status === 'NOT_SERVING' ? h.reasons.join('; ') : undefined;
  }

  private addServices(): void {
    const ctx: HandlerContext = {
      service: this.service,
      pulls: this.pulls,
      keepBlobs: this.config.keepBlobs,
      log: this.log,
      pullRequested: (joined) => this.metrics.requests.inc({ joined: String(joined) }),
    };
    this.server.addService(serviceDefinition('fastpull.v1.Images'), imagesHandlers(ctx));
    this.server.addService(serviceDefinition('fastpull.v1.Snapshots'), snapshotsHandlers(ctx));
    this.server.addService(serviceDefinition('fastpull.v1.Content'), contentHandlers(ctx));
    // The health service is grpc-health-check's; its Watch streams are tracked here so that a
    // shutdown can end them (the library never does, and the server would wait for them to drain).
    this.health.addToServer({
      addService: (definition, implementation) => {
        const watch = implementation.watch as (call: grpc.ServerWritableStream<unknown, unknown>) => void;
        const check = implementation.check as grpc.handleUnaryCall<{ service: string }, unknown>;
        this.server.addService(definition, {
          ...implementation,
          // The reason goes with a NOT_SERVING answer, where a prober (grpcurl -v) shows it.
          check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) =>
            check(call, (e, value) => {
              const why = e ? undefined : this.healthReason(call.request.service);
              if (why === undefined) return callback(e, value);
              const trailer = new grpc.Metadata();
              // Metadata values are printable ASCII: a path with other bytes is shown with `?`.
              trailer.set(HEALTH_REASON_KEY, why.replace(/[^\x20-\x7e]/g, '?'));
              callback(e, value, trailer);
            }),
          watch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
            this.watchers.add(call);
            call.on('cancelled', () => this.watchers.delete(call));
            watch(call);
          },
        });
      },
    });
    new ReflectionService(packageDefinition()).addToServer(this.server);
  }

  // ---- Reload, shutdown ----

  /** The hosts directory new pulls use (SIGHUP changes it). */
  get currentHostsDir(): string | undefined {
    return this.service.hostsDir;
  }

  /**
   * Re-reads the config file (the flags still override it) and applies what can change while
   * running: hosts_dir and the signature policies (signature_policy, notation_config: their files
   * are read again) for pulls that start from now on, cpu_budget, for every thread at once, and
   * rate_limit, for running pulls too.
   * Other changed keys need a restart; they are logged. A configuration that cannot be applied (a
   * bad value, a policy file that cannot be used) changes nothing: the running one stays, and the
   * log says why. Reloads run one at a time; never rejects.
   */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(() => this.reloadNow());
    return this.reloading;
  }

  private async reloadNow(): Promise<void> {
    // A reload is also how to ask for the announcement again by hand (systemctl reload fastpulld),
    // and to run the health checks now (their changes are logged).
    this.announcing = this.announceImages();
    void this.monitor?.check();
    if (!this.options.configPath) {
      this.log.info({ hostsDir: this.service.hostsDir }, 'reload: no config file; nothing to reload');
      return;
    }
    try {
      const next = resolveConfig(
        readConfigFile(this.options.configPath, this.options.configRequired === true),
        this.options.flags ?? {},
        this.options.env ?? process.env,
      );
      const before = this.service.hostsDir;
      // First: the one part that reads files, and the likeliest to fail; nothing is applied before it.
      await this.service.setSignatureSettings(signatureSettingsOf(next));
      const cpus = this.service.setCpuBudget(next.cpuBudget);
      this.service.setRateLimit(next.rateLimit);
      this.service.hostsDir = next.hostsDir;
      const reloaded: ReadonlyArray<keyof DaemonConfig> = ['hostsDir', 'cpuBudget', 'rateLimit', 'signaturePolicy', 'notationConfig'];
      const ignored = (Object.keys(next) as Array<keyof DaemonConfig>).filter(
        (k) => !reloaded.includes(k) && JSON.stringify(next[k]) !== JSON.stringify(this.config[k]),
      );
      this.log.info(
        {
          config: this.options.configPath,
          hostsDir: this.service.hostsDir,
          previousHostsDir: before,
          cpuBudget: next.cpuBudget ?? null,
          cpus: cpus.cpus.join(','),
          rateLimit: next.rateLimit,
          ...signatureLog(next),
          ...(ignored.length > 0 ? { needRestart: ignored } : {}),
        },
        'configuration reloaded',
      );
    } catch (e) {
      this.log.error(
        { config: this.options.configPath, err: e instanceof Error ? e.message : String(e), ...signatureLog(this.service.signatures) },
        'reload failed; keeping the running configuration',
      );
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
    this.idleMemory.stop();
    this.lifetime.abort();
    this.monitor?.stop();
    for (const name of this.healthNames.keys()) this.setHealth(name, 'NOT_SERVING');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    this.listener?.close();
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
    await this.announcing;
    await this.service.close();
    this.log.info({ ms: Math.round(performance.now() - t0), pullsStopped: settled === 'settled', forced: drainedInTime === 'timeout' }, 'stopped');
  }

  private setHealth(service: string, status: ServingStatus): void {
    this.healthNames.set(service, status);
    this.health.setStatus(service, status);
  }
}
