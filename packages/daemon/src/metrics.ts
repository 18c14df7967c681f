// Prometheus metrics of fastpulld, served on an opt-in loopback HTTP port at /metrics, with the
// probes kubelet (or anything on the node) can ask over plain HTTP: /livez (or /healthz) and /readyz. An HTTP
// GET costs the prober next to nothing; an exec'd health-check program costs a Node.js process.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ErrorCodes, isFastpullError, PULL_PRIORITIES, sharedPriorityGate, type PhaseTotals, type PullPriority, type PullTimings } from '@fastpull/core';
import { splitAddress } from './config.js';
import { CHECK_NAMES, type DiskSpace, type HealthReport } from './health.js';

/** Seconds: a small image on a fast node takes well under a second, a 30 GB one minutes. */
const DURATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/** PhaseTotals keys by the phase label they are exported under (besides `resolve`, once per pull). */
const PHASES: ReadonlyArray<readonly [string, keyof PhaseTotals]> = [
  ['fetch', 'fetchMs'],
  ['verify', 'verifyMs'],
  ['decompress', 'decompressMs'],
  ['extract', 'extractMs'],
  ['commit', 'commitMs'],
];

export interface MetricsSources {
  /** Shared pulls running now. */
  readonly pullsInFlight: () => number;
  /** Callers waiting on running pulls now. */
  readonly pullCallers: () => number;
  /** Range requests in flight in the fetch scheduler the daemon's pulls use. */
  readonly requestsInFlight: () => number;
  /** The latest health report; undefined before the first. */
  readonly health: () => HealthReport | undefined;
}

export class DaemonMetrics {
  readonly registry = new Registry();
  /** Shared pulls that settled, by result (ok, error, aborted) and outcome code ("ok", else the library's error code). */
  readonly pulls = new Counter({
    name: 'fastpull_pulls_total',
    help: 'Pulls finished, by result and outcome code (ok, or the stable error code)',
    labelNames: ['result', 'code'] as const,
    registers: [this.registry],
  });
  /** Compressed bytes each settled pull fetched, by its result: what failed and aborted pulls cost the link. */
  readonly pullBytes = new Counter({
    name: 'fastpull_pull_fetched_bytes_total',
    help: 'Compressed layer bytes fetched by pulls that finished, by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  /** Pull requests (callers), by whether they joined a running pull. */
  readonly requests = new Counter({
    name: 'fastpull_pull_requests_total',
    help: 'Pull requests received, by whether they joined a pull already running',
    labelNames: ['joined'] as const,
    registers: [this.registry],
  });
  /** Range requests retried after an error, across all pulls. */
  readonly retries = new Counter({ name: 'fastpull_fetch_retries_total', help: 'Range requests retried after an error', registers: [this.registry] });
  /** Straggling ranges cancelled and re-issued on a fresh connection. */
  readonly stragglers = new Counter({
    name: 'fastpull_fetch_stragglers_reissued_total',
    help: 'Straggling range requests cancelled and re-issued',
    registers: [this.registry],
  });
  readonly bytesFetched = new Counter({
    name: 'fastpull_fetched_bytes_total',
    help: 'Compressed layer bytes fetched, as pull progress reports them',
    registers: [this.registry],
  });
  readonly pullSeconds = new Histogram({
    name: 'fastpull_pull_duration_seconds',
    help: 'Wall time of finished pulls',
    labelNames: ['result'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  // By priority: siblings of the series above (their label sets stay as they were), and the queue wait.
  /** Compressed bytes each settled pull fetched, by the priority it ended at. */
  readonly priorityBytes = new Counter({
    name: 'fastpull_pull_fetched_bytes_by_priority_total',
    help: 'Compressed layer bytes fetched by pulls that finished, by priority',
    labelNames: ['priority'] as const,
    registers: [this.registry],
  });
  readonly prioritySeconds = new Histogram({
    name: 'fastpull_pull_duration_by_priority_seconds',
    help: 'Wall time of finished pulls, by priority',
    labelNames: ['priority'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  /** Per pull: how long its layers waited to start, summed over them (see PullOutcome.queueWaitMs). */
  readonly queueWaitSeconds = new Histogram({
    name: 'fastpull_pull_queue_wait_seconds',
    help: "Time finished pulls' layers waited before they started (behind pulls of higher priority, or for another pull of the same layer), summed over each pull's layers, by priority",
    labelNames: ['priority'] as const,
    buckets: [0, ...DURATION_BUCKETS],
    registers: [this.registry],
  });
  /**
   * Pulls of images a signature policy covered, by the image's verdict: verified, logged or skipped
   * (the pull went on), missing or invalid (refused: SIGNATURE_MISSING, SIGNATURE_INVALID).
   */
  readonly signatureVerdicts = new Counter({
    name: 'fastpull_signature_verdicts_total',
    help: 'Pulls of images a signature policy covered, by verdict',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  /** Per-phase sums over a pull's layers (layers run at once, so phases of one pull can exceed its wall time). */
  readonly phaseSeconds = new Histogram({
    name: 'fastpull_pull_phase_seconds',
    help: 'Time per phase of successful pulls, summed over their layers',
    labelNames: ['phase'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });

  /** Free bytes of the store's disk at the latest health check. */
  private readonly freeBytes = new Gauge({
    name: 'fastpull_store_free_bytes',
    help: "Free bytes of the store root's filesystem, at the latest health check",
    registers: [this.registry],
  });

  constructor(sources: MetricsSources) {
    // Every service and check is exported from the first report on, 0 as much as 1: absent is not unknown.
    new Gauge({
      name: 'fastpull_health_serving',
      help: 'Health status per gRPC health service name ("" is the whole daemon): 1 SERVING, 0 NOT_SERVING',
      labelNames: ['service'] as const,
      registers: [this.registry],
      collect() {
        for (const [service, h] of sources.health()?.services ?? []) this.set({ service }, h.status === 'SERVING' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'fastpull_health_check_failing',
      help: 'Health checks by name: 1 failing in the latest run (the log and /readyz say why), 0 passing',
      labelNames: ['check'] as const,
      registers: [this.registry],
      collect() {
        const checks = sources.health()?.checks;
        for (const check of CHECK_NAMES) if (checks?.has(check)) this.set({ check }, checks.get(check) === undefined ? 0 : 1);
      },
    });
    new Gauge({
      name: 'fastpull_pulls_in_flight',
      help: 'Pulls running now (one per image, however many callers share it)',
      registers: [this.registry],
      collect() {
        this.set(sources.pullsInFlight());
      },
    });
    new Gauge({
      name: 'fastpull_pull_callers',
      help: 'Callers receiving the progress of running pulls',
      registers: [this.registry],
      collect() {
        this.set(sources.pullCallers());
      },
    });
    new Gauge({
      name: 'fastpull_pulls_running',
      help: 'Pulls running now, by priority (high: the containerd fast path; low: background pulls, which start no layer while a pull above them runs)',
      labelNames: ['priority'] as const,
      registers: [this.registry],
      collect() {
        const counts = sharedPriorityGate().counts;
        for (const priority of PULL_PRIORITIES) this.set({ priority }, counts[priority]);
      },
    });
    new Gauge({
      name: 'fastpull_fetch_requests_in_flight',
      help: 'Range requests (chunks) in flight in the shared fetch scheduler',
      registers: [this.registry],
      collect() {
        this.set(sources.requestsInFlight());
      },
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'fastpulld_' });
    // Every outcome is exported from the start, at 0 until it happens: a rate of errors reads 0, not "no data".
    for (const code of ['ok', ...ErrorCodes]) this.pulls.inc(outcomeLabels(code), 0);
    for (const result of ['ok', 'error', 'aborted']) this.pullBytes.inc({ result }, 0);
    for (const priority of PULL_PRIORITIES) {
      this.priorityBytes.inc({ priority }, 0);
      this.prioritySeconds.zero({ priority });
      this.queueWaitSeconds.zero({ priority });
    }
  }

  /** A reading of the store's disk. */
  diskSpace(space: DiskSpace): void {
    this.freeBytes.set(space.freeBytes);
  }

  /** Records a settled pull (`timings` when it succeeded). */
  settled(durationMs: number, timings: PullTimings | undefined, error: unknown, bytesFetched = 0, priority: PullPriority = 'normal', queueWaitMs = 0): void {
    const labels = outcomeLabels(error === undefined ? 'ok' : isFastpullError(error) ? error.code : 'INTERNAL');
    const { result } = labels;
    this.pulls.inc(labels);
    this.pullBytes.inc({ result }, bytesFetched);
    this.pullSeconds.observe({ result }, durationMs / 1000);
    this.priorityBytes.inc({ priority }, bytesFetched);
    this.prioritySeconds.observe({ priority }, durationMs / 1000);
    this.queueWaitSeconds.observe({ priority }, queueWaitMs / 1000);
    if (!timings) return;
    this.phaseSeconds.observe({ phase: 'resolve' }, timings.resolveMs / 1000);
    for (const [phase, key] of PHASES) this.phaseSeconds.observe({ phase }, timings.phases[key] / 1000);
  }
}

/** The labels of a pull's outcome: its code ("ok" or an error code) and the result it falls under. */
function outcomeLabels(code: string): { result: 'ok' | 'error' | 'aborted'; code: string } {
  return { result: code === 'ok' ? 'ok' : code === 'ABORTED' ? 'aborted' : 'error', code };
}

/** The answers of the probe endpoints. */
export interface Probes {
  /**
   * Why fastpulld, or one of its gRPC health services ("" the whole daemon), is not ready to serve,
   * or undefined when it is (/readyz, /readyz?service=NAME). Called per request: it must be cheap.
   */
  readonly notReady: (service: string) => Promise<string | undefined>;
  /** The service names /readyz?service= knows. */
  readonly services: () => readonly string[];
}

/** The paths the HTTP server answers, as its 404 lists them. */
export const HTTP_PATHS = ['/metrics', '/livez', '/healthz', '/readyz'] as const;

/**
 * Serves `registry` at http://ADDRESS/metrics, and the probes: /livez answers 200 whenever the
 * process answers at all (liveness: an event loop that no longer turns answers nothing; /healthz,
 * its earlier name, the same), /readyz
 * 200 when `probes.notReady` finds nothing wrong, else 503 with the reason (`?service=NAME`: for that
 * gRPC health service alone; 404 for a name it does not report). Resolves with the
 * server and the address it listens on.
 */
export async function serveMetrics(address: string, registry: Registry, probes: Probes): Promise<{ server: Server; url: string }> {
  const { host, port } = splitAddress(address);
  const text = (res: ServerResponse, status: number, body: string): void =>
    void res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(body);
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || !(HTTP_PATHS as readonly string[]).includes(path ?? '')) {
      text(res, 404, `not found: fastpulld answers GET ${HTTP_PATHS.join(', ')}\n`);
      return;
    }
    // Liveness asks nothing of the disk: a restart mends no full or read-only store, readiness says so.
    if (path === '/livez' || path === '/healthz') return text(res, 200, 'ok\n');
    if (path === '/readyz') {
      // One service, for a probe that cares about one socket (e.g. only containerd's snapshotter).
      const service = new URLSearchParams((req.url ?? '').split('?')[1] ?? '').get('service') ?? '';
      if (!probes.services().includes(service))
        return text(res, 404, `unknown service ${JSON.stringify(service)}: fastpulld reports ${probes.services().filter(Boolean).join(', ')}\n`);
      probes.notReady(service).then(
        (why) => (why === undefined ? text(res, 200, 'ok\n') : text(res, 503, `not ready: ${why}\n`)),
        (e: unknown) => text(res, 503, `not ready: ${e instanceof Error ? e.message : String(e)}\n`),
      );
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (e: unknown) => text(res, 500, `${e instanceof Error ? e.message : String(e)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  return { server, url: `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics` };
}
