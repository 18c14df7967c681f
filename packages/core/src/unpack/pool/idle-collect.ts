// What an unpack worker does once it has been idle a moment: gives back the memory its passes left.

/**
 * How long an unpack worker waits, once its last pass has ended, before it collects its heap and
 * gives the allocator's free memory back to the kernel. Back-to-back passes (24 small layers in a
 * row) never wait this long, so they pay nothing; a worker whose layers are done does it once.
 */
export const IDLE_COLLECT_MS = 50;

/**
 * Runs `collect` once a worker has run no task for `delayMs`: {@link busy} when a task (or any
 * message) arrives, {@link idle} when the last running task has ended. A worker's heap and its
 * allocator arena keep what its passes freed until V8 collects and glibc trims: with four layers
 * unpacked at once, the workers whose layers were done held it while the largest pass went on.
 * Collecting and trimming then lowers the peak in the same time; a collection without the trim
 * does less (docs/architecture.md, "Figures behind the defaults").
 * @example
 * const idle = new IdleCollector(() => { collectHeap('major'); trimAllocator(); });
 * port.on('message', () => idle.busy());
 * // when the last task settles:
 * idle.idle();
 */
export class IdleCollector {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly collect: () => void,
    private readonly delayMs: number = IDLE_COLLECT_MS,
  ) {}

  /** Work arrived: a collection not yet run waits for the next {@link idle}. */
  busy(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** No task runs now: collects after the delay unless {@link busy} comes first. */
  idle(): void {
    this.busy();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.collect();
    }, this.delayMs);
    // An idle worker must not keep its thread (or a test's process) alive for this.
    this.timer.unref?.();
  }

  /** Whether a collection waits to run. */
  get pending(): boolean {
    return this.timer !== undefined;
  }
}
