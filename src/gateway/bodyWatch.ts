// The pace of request bodies: while the gateway reads a call's body (not while it holds it back
// itself: waiting for body memory, or a model that takes it slowly), the client must not pause longer
// than BODY_TIMEOUT_SECONDS and, in every window of that length, must send at least
// BODY_MIN_BYTES_PER_SECOND on average. A call that breaks either is cut (408 client_timeout, its
// model call cancelled). A large body arriving slower than MEMORY_PACE_BYTES_PER_SECOND gives the
// unread part of its body memory back (bodyMemory.ts), so a trickling client cannot hold the budget
// that other large calls wait for. One timer checks every watched call (BodyWatcher), running while
// there are any.
import type { IncomingMessage } from 'node:http';

/** A large body must arrive at least this fast to keep the body memory reserved for its unread part. */
export const MEMORY_PACE_BYTES_PER_SECOND = 64 * 1024;

export type PaceVerdict = 'ok' | 'stalled' | 'too_slow';

/** One body's pace, fed the bytes read so far at each check (pure: the clock is the caller's). */
export class BodyPace {
  private lastProgress: number;
  private lastBytes: number;
  private lastCheck: number;
  private windowStart: number;
  private windowBytes: number;
  /** The last check found the body arriving slower than MEMORY_PACE_BYTES_PER_SECOND. */
  slow = false;

  constructor(private readonly gapMs: number, private readonly minBytesPerSecond: number, now: number, bytes: number) {
    this.lastProgress = this.lastCheck = this.windowStart = now;
    this.lastBytes = this.windowBytes = bytes;
  }

  /** `reading`: the gateway wants the body's bytes now (a pause it causes itself does not count). */
  check(now: number, bytes: number, reading: boolean): PaceVerdict {
    const since = now - this.lastCheck;
    const got = bytes - this.lastBytes;
    this.lastCheck = now;
    this.lastBytes = bytes;
    if (!reading) {
      this.lastProgress = this.windowStart = now;
      this.windowBytes = bytes;
      this.slow = false;
      return 'ok';
    }
    this.slow = got < (MEMORY_PACE_BYTES_PER_SECOND * since) / 1000;
    if (got > 0) this.lastProgress = now;
    if (now - this.lastProgress >= this.gapMs) return 'stalled';
    const window = now - this.windowStart;
    if (this.minBytesPerSecond > 0 && window >= this.gapMs) {
      if (bytes - this.windowBytes < (this.minBytesPerSecond * window) / 1000) return 'too_slow';
      this.windowStart = now;
      this.windowBytes = bytes;
    }
    return 'ok';
  }
}

/** What the watcher is told about a watched body. */
export interface WatchedBody {
  req: IncomingMessage;
  /** The body broke the pace: the call is to be cut. */
  cut(verdict: Exclude<PaceVerdict, 'ok'>): void;
  /** The body arrives slower than MEMORY_PACE_BYTES_PER_SECOND. */
  slow(): void;
}

interface Entry {
  body: WatchedBody;
  pace: BodyPace;
}

/** Checks the pace of every body being read, on one timer running while there are any. */
export class BodyWatcher {
  private readonly entries = new Set<Entry>();
  private timer: NodeJS.Timeout | undefined;
  private readonly intervalMs: number;

  constructor(private readonly gapMs: number, private readonly minBytesPerSecond: number, private readonly now: () => number = () => performance.now()) {
    // Checked four times per pause allowed, at least once a second.
    this.intervalMs = Math.max(50, Math.min(1000, gapMs / 4));
  }

  /** Watches a body until it has arrived whole or `stop` is called. */
  watch(body: WatchedBody): () => void {
    const entry: Entry = { body, pace: new BodyPace(this.gapMs, this.minBytesPerSecond, this.now(), body.req.socket.bytesRead) };
    this.entries.add(entry);
    this.timer ??= setInterval(() => this.checkAll(), this.intervalMs).unref();
    return () => this.entries.delete(entry);
  }

  /** One round of checks (the timer's; tests may call it with their own clock). */
  checkAll(): void {
    const now = this.now();
    // The timer stops on a round with nothing to watch, not as each body ends: a call at a time
    // would otherwise start and stop it for every call.
    if (this.entries.size === 0) return this.stop();
    for (const entry of this.entries) {
      const { req } = entry.body;
      if (req.complete || req.socket.destroyed) {
        this.entries.delete(entry);
        continue;
      }
      const verdict = entry.pace.check(now, req.socket.bytesRead, req.readableFlowing === true);
      if (verdict !== 'ok') {
        this.entries.delete(entry);
        entry.body.cut(verdict);
      } else if (entry.pace.slow) {
        entry.body.slow();
      }
    }
  }

  private stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
