// In-order priority among one download's ranges: the bytes the unpacker follows come first.

/**
 * Default `FetchOptions.orderLead` (fetch-context.ts): four chunks. A 1 GiB layer of fp16-like weights pulled
 * from a loopback registry, caches dropped, 2 cores: without it 13 of the first 16 ranges got 8 MiB/s
 * each while three others fetched far ahead, so the bytes from offset 0 (what the unpacker follows)
 * stalled (docs/architecture.md, "Figures behind the defaults").
 */
export const DEFAULT_ORDER_LEAD = 64 * 1024 * 1024;

/**
 * The longest a range waits for the earliest one before reading its next piece of body: a range
 * that yields still moves (a 64 KiB piece per wait is 1.3 MB/s), far above the straggler floor, so
 * yielding never makes a range look stalled, and a slow earliest range cannot stop the others.
 */
const ORDER_MAX_WAIT_MS = 50;
/** How often a yielding range looks again. */
const ORDER_TICK_MS = 5;

export /** A request of a range under way, as {@link RangeOrder} sees it. */
interface RunningRange {
  /** Where this request's body starts. */
  readonly from: number;
  /** Where its next byte lands. */
  readonly cursor: { readonly pos: number };
}

/**
 * In-order priority among one download's ranges. The unpacker follows the bytes landed from offset 0,
 * so a byte at the earliest range in flight is worth more than one far past it; yet ranges in
 * parallel share the reading thread and the path, and one that got ahead tends to stay ahead (its
 * connection's window grew while the others' did not). So a range that is more than `lead` bytes past
 * the earliest range's next byte, and has received more bytes than that range since their requests
 * went out, waits a little before reading each piece of its body (at most ORDER_MAX_WAIT_MS, less
 * once it is no longer ahead): what it leaves unread goes to the earliest range. Ranges that move at
 * the same pace never wait, so a download whose connections are each capped (the usual reason for
 * parallel ranges) keeps them all busy.
 */
export class RangeOrder {
  private readonly running = new Set<RunningRange>();

  /** @param lead - bytes a range may run past the earliest one's next byte without yielding. */
  constructor(readonly lead: number) {}

  /** Counts a request from now until the returned function is called. */
  enter(range: RunningRange): () => void {
    this.running.add(range);
    return () => void this.running.delete(range);
  }

  /** Whether `range` is to yield now: far past the earliest range in flight, and gaining on it. */
  ahead(range: RunningRange): boolean {
    let first: RunningRange | undefined;
    for (const r of this.running) if (first === undefined || r.from < first.from) first = r;
    if (first === undefined || first === range) return false;
    if (range.cursor.pos - first.cursor.pos <= this.lead) return false;
    return range.cursor.pos - range.from > first.cursor.pos - first.from;
  }

  /** Waits while `range` is {@link ahead}, at most ORDER_MAX_WAIT_MS; resolves at once otherwise. */
  async yieldFor(range: RunningRange): Promise<number> {
    if (!this.ahead(range)) return 0;
    const started = performance.now();
    let waited = 0;
    do {
      await new Promise<void>((resolve) => setTimeout(resolve, ORDER_TICK_MS));
      waited = performance.now() - started;
    } while (waited < ORDER_MAX_WAIT_MS && this.ahead(range));
    return waited;
  }
}
