// Priorities among the pulls of one process. A pull that someone waits on (kubelet, through the CRI
// fast path) goes first; a background pull gives way. Three places decide who goes first: the
// scheduler of range requests and the unpack pool grant waiting work by priority first, and a
// background pull starts no new layer while a pull above it runs (its started layers go on). It
// never pauses inside a layer: a layer's unpack pass holds a worker while it follows its download,
// and a pass whose download stood still would keep that worker from the pull it gave way to.
import { FastpullError } from '../errors.js';

/** How urgent a pull is: `high` for one a container start waits on, `low` for one that gives way to every other. */
export type PullPriority = 'high' | 'normal' | 'low';

/** Every priority, highest first. */
export const PULL_PRIORITIES: readonly PullPriority[] = ['high', 'normal', 'low'];

const RANKS: Readonly<Record<PullPriority, number>> = { low: 0, normal: 1, high: 2 };

/**
 * The priority of one pull while it runs; it may be raised (a caller that waits joins a background
 * pull of the same image), never lowered. Its `rank` orders waiting work: higher goes first.
 * @example
 * const ticket = new PullTicket('low');
 * const pulling = pull(ref, { root, priority: ticket });
 * ticket.raise('high'); // kubelet now waits for the same image
 */
export class PullTicket {
  private current: PullPriority;
  private readonly listeners = new Set<() => void>();

  constructor(priority: PullPriority = 'normal') {
    this.current = parsePullPriority(priority, 'pull priority');
  }

  /** The priority now. */
  get priority(): PullPriority {
    return this.current;
  }

  /** 0 for low, 1 for normal, 2 for high. */
  get rank(): number {
    return RANKS[this.current];
  }

  /** Raises the priority to `priority` when that is higher; a lower one changes nothing. */
  raise(priority: PullPriority): void {
    if (RANKS[parsePullPriority(priority, 'pull priority')] <= this.rank) return;
    this.current = priority;
    for (const l of [...this.listeners]) l();
  }

  /** Calls `fn` whenever the priority rises; returns the undo. */
  onRaise(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  }
}

/**
 * A priority named by a user: `high`, `normal` or `low` (case-insensitive). INVALID_ARGUMENT naming
 * `what` otherwise.
 * @example parsePullPriority('low', '--priority') // 'low'
 */
export function parsePullPriority(value: unknown, what: string): PullPriority {
  const v = typeof value === 'string' ? value.trim().toLowerCase() : value;
  if (v === 'high' || v === 'normal' || v === 'low') return v;
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? typeof value;
  } catch {
    shown = typeof value;
  }
  throw new FastpullError('INVALID_ARGUMENT', `${what} ${shown}: want one of high, normal, low`);
}

/**
 * Which pulls of a process run, by priority: a low one waits before each layer it has not started
 * while a pull of higher priority runs, and goes on when none does (or when it is raised).
 * @example
 * const gate = new PriorityGate(); // one per test; pulls share sharedPriorityGate() by default
 * await pull(ref, { root, priority: 'low', priorityGate: gate });
 */
export class PriorityGate {
  private readonly running = new Map<PullTicket, number>();
  private readonly waiting = new Set<() => void>();

  /** A pull with `ticket` runs from now until the returned function is called. */
  enter(ticket: PullTicket): () => void {
    this.running.set(ticket, (this.running.get(ticket) ?? 0) + 1);
    const unwatch = ticket.onRaise(() => this.wake());
    let left = false;
    return () => {
      if (left) return;
      left = true;
      unwatch();
      const n = (this.running.get(ticket) ?? 1) - 1;
      if (n === 0) this.running.delete(ticket);
      else this.running.set(ticket, n);
      this.wake();
    };
  }

  /** Whether a pull with `ticket` may start a layer now: it is not low, or no pull above it runs. */
  mayStart(ticket: PullTicket): boolean {
    if (ticket.rank > RANKS.low) return true;
    for (const other of this.running.keys()) if (other.rank > ticket.rank) return false;
    return true;
  }

  /**
   * Resolves once a pull with `ticket` may start a layer; `onWait` is called first when it must wait.
   * Rejects with ABORTED when `signal` fires meanwhile.
   */
  async whenMayStart(ticket: PullTicket, signal?: AbortSignal, onWait?: () => void): Promise<void> {
    if (this.mayStart(ticket)) return;
    onWait?.();
    const unwatch = ticket.onRaise(() => this.wake());
    try {
      while (!this.mayStart(ticket)) {
        if (signal?.aborted) throw new FastpullError('ABORTED', 'waiting for pulls of higher priority: aborted', { cause: signal.reason });
        await new Promise<void>((resolve) => {
          const done = () => {
            this.waiting.delete(done);
            signal?.removeEventListener('abort', done);
            resolve();
          };
          this.waiting.add(done);
          signal?.addEventListener('abort', done, { once: true });
        });
      }
    } finally {
      unwatch();
    }
  }

  /** Pulls running now, by priority. */
  get counts(): Readonly<Record<PullPriority, number>> {
    const counts: Record<PullPriority, number> = { high: 0, normal: 0, low: 0 };
    for (const [t, n] of this.running) counts[t.priority] += n;
    return counts;
  }

  private wake(): void {
    for (const w of [...this.waiting]) w();
  }
}

let shared: PriorityGate | undefined;

/**
 * The process-wide gate that pulls share unless given their own.
 * @example sharedPriorityGate().counts // { high: 0, normal: 1, low: 2 } while three pulls run
 */
export function sharedPriorityGate(): PriorityGate {
  shared ??= new PriorityGate();
  return shared;
}
