// Young collections paced by the body bytes that go through the gateway. Every socket read is an
// off-heap buffer (up to 64 KB) that is dead as soon as its bytes are copied or written on. V8 frees
// dead ones in a young collection, but starts one for them only once 32 MB of young off-heap memory
// has piled up (twice its default semi-space size, a constant no flag changes), so under large bodies
// the pile is always there, on top of the live memory, and the allocator keeps its peak after. Asking
// V8 for a young collection every `everyBytes` of bodies keeps the pile that small. A young collection
// copies only the live young objects, well under a millisecond here (README, Performance: what it
// saved and cost). It needs V8's `gc` function (node --expose-gc, on the command's shebang line);
// without it the gateway runs with V8's own schedule.

type MinorCollect = () => void;

/** V8's young collection, when the process runs with --expose-gc. */
function v8MinorCollect(): MinorCollect | null {
  const gc = (globalThis as { gc?: (options: { type: 'minor' }) => void }).gc;
  return typeof gc === 'function' ? () => gc({ type: 'minor' }) : null;
}

export class YoungCollections {
  private passed = 0;
  private scheduled = false;
  private readonly collect: MinorCollect | null;

  /** `everyBytes` 0 turns pacing off; `collect` is V8's unless given (tests inject one; null: none). */
  constructor(private readonly everyBytes: number, collect: MinorCollect | null = v8MinorCollect()) {
    this.collect = everyBytes > 0 ? collect : null;
  }

  /** Whether collections are asked for (off without --expose-gc). */
  get active(): boolean {
    return this.collect !== null;
  }

  /**
   * `bytes` of bodies went through a call that is over. Past `everyBytes` since the last
   * collection, one is asked for on the next turn of the event loop (outside any call's stack, so
   * the buffers a handler still held are dead by then).
   */
  note(bytes: number): void {
    if (this.collect === null) return;
    this.passed += bytes;
    if (this.passed < this.everyBytes || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.passed = 0;
      this.collect!();
    });
  }
}
