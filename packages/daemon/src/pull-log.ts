// What fastpulld's log and metrics say about its pulls: one line and the counts per settled pull
// (result, phases, signature verdict), and, at debug level, where each unpack pass runs.
import type { Logger } from 'pino';
import { asFastpullError, type PulledImage, type PullCpuBudget, type PullObserver } from '@fastpull/core';
import type { DaemonMetrics } from './metrics.js';
import type { PullOutcome } from './pulls.js';
import { logVerdict } from './verdicts.js';

/** Counts a settled pull and logs it once: `pull finished` with its phases, or `pull failed` with its code. */
export function logPullOutcome(log: Logger, metrics: DaemonMetrics, o: PullOutcome<PulledImage>): void {
  metrics.settled(o.durationMs, o.result?.timings, o.error, o.bytesFetched, o.priority, o.queueWaitMs);
  const verdict = logVerdict(log, metrics, o);
  const base = { event: 'pull', image: o.name, callers: o.callers, bytesFetched: o.bytesFetched, durationMs: Math.round(o.durationMs) };
  if (o.result) {
    const t = o.result.timings;
    const round = (n: number): number => Math.round(n * 10) / 10;
    log.info(
      {
        ...base,
        result: 'ok',
        manifest: o.result.image.manifest.digest,
        ...(verdict ? { signatures: verdict.outcome } : {}),
        layers: t.layers.length,
        layersFetched: t.layers.filter((l) => l.state === 'committed').length,
        totalMs: round(t.totalMs),
        phases: Object.fromEntries(Object.entries({ resolveMs: t.resolveMs, ...t.phases }).map(([k, v]) => [k, round(v)])),
      },
      'pull finished',
    );
  } else {
    const { code, message } = asFastpullError(o.error).toJSON();
    log[code === 'ABORTED' ? 'info' : 'warn']({ ...base, result: code === 'ABORTED' ? 'aborted' : 'error', code, err: message }, 'pull failed');
  }
}

/**
 * An observer of pull `image` that logs, at debug level, each unpack pass as it starts: the layer,
 * the kernel's id of its thread and the CPUs that thread may run on, and the pull's CPU budget then
 * (the threads to read in /proc/PID/task when a budget is in question).
 */
export function passLog(log: Logger, image: string, budget: PullCpuBudget | undefined): PullObserver {
  return {
    unpackPlaced: (layer, pass) =>
      log.debug({ image, layer, tid: pass.tid, cpus: pass.cpus.join(','), cpuBudget: budget?.cores ?? null }, 'unpack pass started'),
  };
}
