// The health monitor with checks the test answers and a clock the test moves: each service follows
// the checks it depends on, changes are reported once, runs are one at a time, and a run that does
// not answer for a whole interval is reported as a reason of its own.
import { describe, expect, it } from 'vitest';
import { HealthMonitor, type Check, type CheckName, type HealthReport } from './health.js';

/** A check whose answers the test gives, one per run; it counts its runs. */
function gated(): Check & { runs: number; answer: (why: string | undefined) => void } {
  let pending: Array<(why: string | undefined) => void> = [];
  const check = Object.assign(
    () => {
      check.runs++;
      return new Promise<string | undefined>((resolve) => pending.push(resolve));
    },
    {
      runs: 0,
      answer(why: string | undefined) {
        const p = pending;
        pending = [];
        for (const resolve of p) resolve(why);
      },
    },
  );
  return check;
}

function monitor(checks: Partial<Record<CheckName, Check>>, intervalMs = 1000) {
  let now = 0;
  let tick: () => void = () => undefined;
  const changes: Array<{ report: HealthReport; previous: HealthReport | undefined }> = [];
  const m = new HealthMonitor({
    checks,
    services: { api: ['store_writable', 'disk_free'], snap: ['store_writable', 'snapshot_records'] },
    changed: (report, previous) => changes.push({ report, previous }),
    intervalMs,
    now: () => now,
    every: (_ms, t) => {
      tick = t;
      return () => (tick = () => undefined);
    },
  });
  return { m, changes, advance: (ms: number) => (now += ms), tick: () => tick() };
}

const statuses = (r: HealthReport): Record<string, string> => Object.fromEntries([...r.services].map(([s, h]) => [s, h.status]));

describe('HealthMonitor', () => {
  it('reports each service from the checks it depends on, "" from all of them', async () => {
    const { m } = monitor({ store_writable: async () => undefined, disk_free: async () => 'disk nearly full', snapshot_records: async () => undefined });
    const r = await m.check();
    expect(statuses(r)).toEqual({ '': 'NOT_SERVING', api: 'NOT_SERVING', snap: 'SERVING' });
    expect(r.services.get('api')!.reasons).toEqual(['disk nearly full']);
    expect(r.services.get('snap')!.reasons).toEqual([]);
    expect(m.serviceNames).toEqual(['', 'api', 'snap']);
  });

  it('a check this daemon lacks is left out, and a check that throws fails with its message', async () => {
    const { m } = monitor({ store_writable: async () => Promise.reject(new Error('EIO')) });
    const r = await m.check();
    expect([...r.checks.keys()]).toEqual(['store_writable']);
    expect(r.services.get('snap')!.reasons).toEqual(['store_writable: EIO']);
  });

  it('reports a change once: the same outcome again is no change, a check flipping is', async () => {
    const disk = gated();
    const { m, changes } = monitor({ disk_free: disk });
    let run = m.check();
    disk.answer(undefined);
    await run;
    expect(changes).toHaveLength(1);
    expect(changes[0]!.previous).toBeUndefined();
    run = m.check();
    disk.answer(undefined);
    await run;
    expect(changes).toHaveLength(1);
    run = m.check();
    disk.answer('full');
    await run;
    run = m.check();
    disk.answer('still full, other figures');
    await run;
    expect(changes).toHaveLength(2);
    expect(statuses(changes[1]!.report)).toMatchObject({ api: 'NOT_SERVING' });
  });

  it('runs one check at a time: a second ask joins the run in flight', async () => {
    const disk = gated();
    const { m } = monitor({ disk_free: disk });
    const a = m.check();
    const b = m.check();
    expect(disk.runs).toBe(1);
    disk.answer(undefined);
    expect(await a).toBe(await b);
    const c = m.check();
    expect(disk.runs).toBe(2);
    disk.answer(undefined);
    await c;
  });

  it('a run that has not answered for a whole interval makes every service NOT_SERVING, naming the check; its answer counts once it comes', async () => {
    const disk = gated();
    const { m, changes, advance, tick } = monitor({ disk_free: disk, store_writable: async () => undefined }, 1000);
    m.start();
    const first = m.check();
    // One turn of the event loop: the check that answers at once has answered.
    await new Promise((resolve) => setImmediate(resolve));
    advance(500);
    tick();
    expect(changes).toHaveLength(0);
    advance(600);
    tick();
    expect(changes).toHaveLength(1);
    const stalled = changes[0]!.report;
    expect(statuses(stalled)).toEqual({ '': 'NOT_SERVING', api: 'NOT_SERVING', snap: 'NOT_SERVING' });
    expect(stalled.services.get('snap')!.reasons).toEqual(['health checks disk_free have not answered for 1 s']);
    expect(disk.runs).toBe(1);
    disk.answer(undefined);
    await first;
    expect(statuses(m.report!)).toEqual({ '': 'SERVING', api: 'SERVING', snap: 'SERVING' });
    m.stop();
  });

  it('once stopped, reports nothing more', async () => {
    const disk = gated();
    const { m, changes } = monitor({ disk_free: disk });
    const run = m.check();
    m.stop();
    disk.answer('full');
    await run;
    expect(changes).toHaveLength(0);
  });
});
