// The no-progress timeout of a pull: measured across all its downloads, never one range alone.
import { FastpullError } from '../errors.js';

/**
 * With downloads running, a pull that receives no byte at all for this long, across all its ranges
 * of all its layers, fails. Straggling ranges are re-issued long before (after 10 s); this ends a
 * pull whose registry stopped answering altogether.
 */
export const DEFAULT_NO_PROGRESS_TIMEOUT_MS = 120_000;

/**
 * Calls `onTimeout` (with NETWORK_ERROR) when downloads are running and none of them received a
 * byte for `timeoutMs`; idle time between downloads (unpacking, waiting for a lock) does not count.
 */
export class ProgressWatch {
  private active = 0;
  private last = performance.now();
  private readonly timer: NodeJS.Timeout;

  /** @param held - whether the pull's own rate limit holds its reads back now (that time is no silence of the registry's). */
  constructor(
    private readonly timeoutMs: number,
    onTimeout: (e: FastpullError) => void,
    held?: () => boolean,
  ) {
    this.timer = setInterval(
      () => {
        if (held?.() === true) this.last = performance.now();
        if (this.active > 0 && performance.now() - this.last > this.timeoutMs) {
          onTimeout(
            new FastpullError('NETWORK_ERROR', `no bytes arrived for ${Math.round(this.timeoutMs / 1000)} s across all downloads of the pull`, {
              details: { timeoutMs: this.timeoutMs },
            }),
          );
          this.last = performance.now();
        }
      },
      Math.max(10, Math.min(1000, timeoutMs / 4)),
    );
    this.timer.unref();
  }

  /** A download starts; returns its end. */
  start(): () => void {
    if (this.active++ === 0) this.last = performance.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.active--;
    };
  }

  /** Bytes arrived on some download. */
  bytes(): void {
    this.last = performance.now();
  }

  /** Stops watching (the pull is over). */
  stop(): void {
    clearInterval(this.timer);
  }
}
