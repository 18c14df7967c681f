// What fastpulld knows of its own health, per service: checks of what each service needs (its socket
// takes connections, the store root takes a write, the disk has room, containerd's snapshot records
// read back), run periodically and on demand, one run at a time, never inside a call. Each service
// is SERVING only while every check it depends on passed in the latest run; otherwise NOT_SERVING
// with the failing checks' reasons. A run that does not end is itself a reason: absent is not unknown.
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';

/** Trailing metadata of a health Check answered NOT_SERVING: why. */
export const HEALTH_REASON_KEY = 'fastpull-health-reason';

/** The checks, by the stable names metrics and logs use. */
export const CHECK_NAMES = ['api_socket', 'snapshotter_socket', 'store_writable', 'disk_free', 'snapshot_records'] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

/** One check: undefined when it passes, else why not (a sentence a user can act on). */
export type Check = () => Promise<string | undefined>;

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

/** A service's health in one run. */
export interface ServiceHealth {
  readonly status: ServingStatus;
  /** Why it is not serving: the reasons of its failing checks, in CHECK_NAMES order. */
  readonly reasons: readonly string[];
}

/** The outcome of one run of the checks. */
export interface HealthReport {
  /** Each check run, with its reason when it failed (undefined: passed). */
  readonly checks: ReadonlyMap<CheckName, string | undefined>;
  /** Each service, by its gRPC health name ("" is the whole daemon: every check). */
  readonly services: ReadonlyMap<string, ServiceHealth>;
  /** When the run ended, on the monitor's clock (ms). */
  readonly at: number;
}

export interface HealthMonitorOptions {
  /** The checks to run; a check not given is not one this daemon has (no snapshotter: no records). */
  readonly checks: Partial<Record<CheckName, Check>>;
  /** Each service's gRPC health name and the checks it depends on ("" is added: all of them). */
  readonly services: Readonly<Record<string, readonly CheckName[]>>;
  /** A report whose statuses differ from the last one's (the first report always is). */
  readonly changed: (report: HealthReport, previous: HealthReport | undefined) => void;
  /** Milliseconds between periodic runs; 0: only on demand. */
  readonly intervalMs: number;
  /** The clock (ms); default performance.now. Tests move their own. */
  readonly now?: () => number;
  /** Starts the periodic timer; default setInterval, unref'd. Tests call `tick` themselves. */
  readonly every?: (ms: number, tick: () => void) => () => void;
}

/** Runs the checks and keeps the latest report. */
export class HealthMonitor {
  private latest: HealthReport | undefined;
  /** The run in flight, and when it started. */
  private running: { done: Promise<HealthReport>; since: number } | undefined;
  private stopTimer: (() => void) | undefined;
  private stopped = false;
  private readonly now: () => number;
  private readonly services: ReadonlyMap<string, readonly CheckName[]>;
  /** The checks of the run in flight that have not answered yet. */
  private pending = new Set<CheckName>();

  constructor(private readonly options: HealthMonitorOptions) {
    this.now = options.now ?? (() => performance.now());
    const all = CHECK_NAMES.filter((c) => options.checks[c] !== undefined);
    this.services = new Map([['', all], ...Object.entries(options.services).map(([s, cs]) => [s, cs.filter((c) => options.checks[c] !== undefined)] as const)]);
  }

  /** The latest report; undefined before the first run ends. */
  get report(): HealthReport | undefined {
    return this.latest;
  }

  /** The services the monitor reports on ("" first). */
  get serviceNames(): string[] {
    return [...this.services.keys()];
  }

  /** Starts the periodic runs (the first one at once). */
  start(): void {
    if (this.options.intervalMs > 0 && !this.stopTimer) {
      const every =
        this.options.every ??
        ((ms, tick) => {
          const t = setInterval(tick, ms).unref();
          return () => clearInterval(t);
        });
      this.stopTimer = every(this.options.intervalMs, () => void this.tick());
    }
  }

  /** No more runs; one in flight ends unreported. */
  stop(): void {
    this.stopped = true;
    this.stopTimer?.();
  }

  /**
   * A periodic run: a new one, unless one is in flight. One still in flight after a whole interval
   * is reported instead: every service NOT_SERVING, naming the checks that have not answered.
   */
  async tick(): Promise<void> {
    if (this.running && this.now() - this.running.since >= this.options.intervalMs) {
      this.stalled(this.now() - this.running.since);
      return;
    }
    await this.check();
  }

  /** Runs every check (or joins the run in flight) and resolves with its report. */
  check(): Promise<HealthReport> {
    if (this.running) return this.running.done;
    const since = this.now();
    const pending = new Set<CheckName>(this.services.get(''));
    const done = this.run(pending).finally(() => (this.running = undefined));
    this.running = { done, since };
    this.pending = pending;
    return done;
  }

  private async run(pending: Set<CheckName>): Promise<HealthReport> {
    const names = [...pending];
    const results = await Promise.all(
      names.map(async (name) => {
        let why: string | undefined;
        try {
          why = await this.options.checks[name]!();
        } catch (e) {
          why = `${name}: ${e instanceof Error ? e.message : String(e)}`;
        }
        pending.delete(name);
        return [name, why] as const;
      }),
    );
    const report = this.reportOf(new Map(results));
    this.publish(report);
    return report;
  }

  private stalled(ms: number): void {
    const why = `health checks ${[...this.pending].join(', ')} have not answered for ${Math.round(ms / 1000)} s`;
    this.publish(this.reportOf(new Map([...this.pending].map((c) => [c, why] as const)), true));
  }

  /** The services' statuses from the checks' outcomes; `all` makes every service fail with them. */
  private reportOf(checks: ReadonlyMap<CheckName, string | undefined>, all = false): HealthReport {
    const services = new Map<string, ServiceHealth>();
    for (const [service, depends] of this.services) {
      const reasons = [...checks].filter(([c, why]) => why !== undefined && (all || depends.includes(c))).map(([, why]) => why!);
      services.set(service, { status: reasons.length === 0 ? 'SERVING' : 'NOT_SERVING', reasons: [...new Set(reasons)] });
    }
    return { checks, services, at: this.now() };
  }

  private publish(report: HealthReport): void {
    if (this.stopped) return;
    const previous = this.latest;
    this.latest = report;
    const same =
      previous !== undefined &&
      [...report.services].every(([s, h]) => previous.services.get(s)?.status === h.status) &&
      [...report.checks].every(([c, why]) => (previous.checks.get(c) === undefined) === (why === undefined));
    if (!same) this.options.changed(report, previous);
  }
}

/** Where the store-writable check writes: one small file at the store root, removed at once. */
export const PROBE_FILE = '.fastpulld-health';

/**
 * The store root takes a write: a file created, written and removed (a read-only remount, a full
 * disk, a root gone or replaced by a file all fail it). No fsync: a busy disk would make the check
 * as slow as the pulls' flushes, and what a write-back error says the pulls report themselves.
 */
export function storeWritable(root: string): Check {
  return async () => {
    const path = join(root, PROBE_FILE);
    try {
      await fsp.writeFile(path, `${process.pid}\n`);
    } catch (e) {
      return `store root ${root} is not writable: ${(e as Error).message}`;
    } finally {
      await fsp.rm(path, { force: true }).catch(() => undefined);
    }
    return undefined;
  };
}

/** Free space of the filesystem under `root` (what an unprivileged writer may use), as statfs says. */
export interface DiskSpace {
  readonly freeBytes: number;
  /** Free inodes; undefined where the filesystem does not count them. */
  readonly freeInodes: number | undefined;
}

export async function diskSpace(root: string): Promise<DiskSpace> {
  const s = await fsp.statfs(root);
  return { freeBytes: s.bavail * s.bsize, freeInodes: s.files > 0 ? s.ffree : undefined };
}

/** A size as a reason shows it, in MiB (or KiB under one MiB). */
export function showBytes(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`;
}

/**
 * The disk under the store root has at least `minFree` bytes free and an inode left; `seen` gets
 * each reading (the metrics' gauge). A floor of 0 checks the inodes only.
 */
export function diskFree(root: string, minFree: number, seen: (space: DiskSpace) => void = () => undefined): Check {
  return async () => {
    let space: DiskSpace;
    try {
      space = await diskSpace(root);
    } catch (e) {
      return `store root ${root}: free space unknown: ${(e as Error).message}`;
    }
    seen(space);
    if (space.freeBytes < minFree) return `store root ${root} has ${showBytes(space.freeBytes)} free, under min_free_space (${showBytes(minFree)})`;
    if (space.freeInodes === 0) return `store root ${root} has no free inodes`;
    return undefined;
  };
}
