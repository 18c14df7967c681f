// The straggler watchdog of one range request: too slow over a window, or stalled mid-body, and the
// request is cancelled so that its remainder goes out again on a fresh connection.
import type { ChunkContext, Cursor } from './fetch-context.js';

/** Re-issues of one chunk's remainder for being too slow, on top of its error attempts. */
export const MAX_STRAGGLER_REISSUES = 8;
/**
 * The straggler floor: a range that receives fewer than this many bytes per second over a whole
 * window is cancelled and its remainder asked for again. Low enough that a slow but moving link is
 * left alone (16 connections at this floor is 256 KiB/s), high enough to catch a stalled one.
 */
export const DEFAULT_STRAGGLER_FLOOR = 16 * 1024;
/** The window over which the straggler floor is measured, in milliseconds. */
export const DEFAULT_STRAGGLER_WINDOW_MS = 10_000;

/**
 * A range whose body stops is re-issued after this long without a byte: a stalled connection
 * (a dead peer, a stuck proxy) is far likelier than a healthy one idle for seconds mid-body.
 */
export const DEFAULT_STALL_TIMEOUT_MS = 3_000;

/**
 * Watches one request: aborts it when its progress stays below the floor for a window, or when its
 * body stops for the stall timeout after bytes came.
 */
export class Watchdog {
  readonly floor: number;
  readonly windowMs: number;
  readonly stallMs: number;
  readonly signal: AbortSignal;
  fired = false;
  /** Fired by the stall timeout (else by the floor). */
  stalled = false;
  private readonly controller = new AbortController();
  private readonly timers: NodeJS.Timeout[] = [];
  private mark: number;

  constructor(ctx: ChunkContext, cursor: Cursor) {
    this.floor = ctx.options.stragglerFloor ?? DEFAULT_STRAGGLER_FLOOR;
    this.windowMs = ctx.options.stragglerWindowMs ?? DEFAULT_STRAGGLER_WINDOW_MS;
    this.stallMs = ctx.options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    this.signal = ctx.options.signal ? AbortSignal.any([ctx.options.signal, this.controller.signal]) : this.controller.signal;
    this.mark = cursor.pos;
    const fire = (stalled: boolean): void => {
      if (this.fired) return;
      this.fired = true;
      this.stalled = stalled;
      this.controller.abort(new Error(stalled ? 'stalled' : 'straggler'));
    };
    // The floor is judged over windows timed by finer ticks: a tick that comes late means this
    // thread was busy (bytes may be waiting unread), so that window proves nothing and starts again.
    const floorTickMs = Math.max(25, Math.min(1000, this.windowMs / 4));
    let windowAt = performance.now();
    let floorTickAt = windowAt;
    // Time the rate limit held the range back counts as a late tick: the registry was not slow.
    let floorHolds = cursor.holds;
    const held = (seen: number): boolean => cursor.holding || cursor.holds !== seen;
    this.timers.push(
      setInterval(() => {
        const now = performance.now();
        const late = now - floorTickAt > 2 * floorTickMs || held(floorHolds);
        floorHolds = cursor.holds;
        floorTickAt = now;
        if (!late && now - windowAt < this.windowMs) return;
        if (!late && cursor.pos - this.mark < (this.floor * (now - windowAt)) / 1000) fire(false);
        this.mark = cursor.pos;
        windowAt = now;
      }, floorTickMs),
    );
    if (this.stallMs > 0) {
      const start = cursor.pos;
      const tickMs = Math.max(25, Math.min(500, this.stallMs / 4));
      let last = cursor.pos;
      let movedAt = performance.now();
      let tickAt = movedAt;
      let stallHolds = cursor.holds;
      this.timers.push(
        setInterval(() => {
          const now = performance.now();
          // A tick that comes late means this thread was busy: bytes may be waiting unread, so
          // the silence proves nothing; start counting again.
          const late = now - tickAt > 2 * tickMs || held(stallHolds);
          stallHolds = cursor.holds;
          tickAt = now;
          if (cursor.pos !== last || late) {
            last = cursor.pos;
            movedAt = now;
          } else if (last > start && now - movedAt >= this.stallMs) {
            fire(true);
          }
        }, tickMs),
      );
    }
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
  }
}
