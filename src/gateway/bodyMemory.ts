// Memory for whole bodies (a predict-style call's request, and the model's answer it reads whole):
//  - admission by a byte budget: when the bodies being held add up to the budget, the next large
//    body waits (up to its call's timeout, then 503 overloaded) before it is read (TCP holds the
//    bytes meanwhile, on the client's side for a request, on the model's for an answer), so 64
//    clients sending a megabyte each cost a bounded amount of memory, not 64 MB plus answers. Answers
//    go before requests that wait (they finish calls, requests start new ones); small bodies never
//    wait, and every body is counted;
//  - a pool of large buffers reused across calls: a megabyte body read into a fresh buffer costs
//    page faults on first touch and pushes V8 into a full collection every dozen calls (external
//    memory); a kept buffer costs neither.
// A call's BodyLease holds its share of the budget and its buffers for one body at a time: the
// request's until the model has been sent all of it (requestSent), so a call waiting for its model
// holds nothing however slow the model is; then the answer's until the call is over: its handler
// returned (the gateway no longer uses them, even if the client left long before) and its answer was
// handed to the OS (then the buffers go back to the pool) or its connection closed (then they are
// dropped). The server tells the lease both (handlerOver, responseOver).
import { ApiError } from '../errors.js';

export const POOLED_MIN_BYTES = 256 * 1024;
/** Bodies larger than this are never read into pooled buffers (they are rare; keeping them costs RSS). */
const POOLED_MAX_BYTES = 16 * 1024 * 1024;

/** Pooled buffers are allocated in steps of this many bytes. */
const POOLED_STEP_BYTES = 64 * 1024;

/**
 * Kept buffers, handed out best fit: the smallest kept buffer that holds a body and is at most
 * twice its size, else a new one of the body's size rounded up to 64 KiB (so a steady stream of
 * same-sized calls cycles through the same few buffers, and the budget's reservations match them).
 * A buffer given back when the pool is full makes room by dropping the longest-kept ones, so the
 * pool keeps the sizes in current use.
 */
class BufferPool {
  /** Oldest first. */
  private readonly free: Buffer[] = [];
  private keptBytes = 0;

  constructor(private readonly maxKeptBytes: number) {}

  take(size: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const n = this.free[i].length;
      if (n >= size && n <= 2 * size && (best < 0 || n < this.free[best].length)) best = i;
    }
    if (best >= 0) {
      const buf = this.free.splice(best, 1)[0];
      this.keptBytes -= buf.length;
      return buf;
    }
    return Buffer.allocUnsafeSlow(Math.ceil(size / POOLED_STEP_BYTES) * POOLED_STEP_BYTES);
  }

  give(buf: Buffer): void {
    if (buf.length > this.maxKeptBytes) return;
    while (this.keptBytes + buf.length > this.maxKeptBytes) this.keptBytes -= this.free.shift()!.length;
    this.free.push(buf);
    this.keptBytes += buf.length;
  }
}

/** A call waiting for room; `granted` says whether the bytes were reserved for it. */
interface Waiter {
  bytes: number;
  /** A model's answer: queued ahead of the requests that wait. */
  answer: boolean;
  wake(granted: boolean): void;
}

export interface BodyMemoryStats {
  /** Bytes reserved by calls in flight. */
  reservedBytes: number;
  /** Calls waiting for the budget. */
  waiting: number;
}

/** The gateway's budget for bodies held whole, and its buffer pool. */
export class BodyMemory {
  private reserved = 0;
  /** Calls holding an admitted large body (small and chunked bodies never count here). */
  private admitted = 0;
  private readonly queue: Waiter[] = [];
  private readonly pool: BufferPool;

  /** `budgetBytes`: bodies held at once before large calls wait; also the most the pool keeps. */
  constructor(readonly budgetBytes: number) {
    this.pool = new BufferPool(budgetBytes);
  }

  stats(): BodyMemoryStats {
    return { reservedBytes: this.reserved, waiting: this.queue.length };
  }

  /** A lease for one call; it reserves nothing until the call reads a body. */
  lease(): BodyLease {
    return new BodyLease(this);
  }

  /**
   * Reserves `bytes` now and returns true when they fit (and nobody waits before), else queues
   * `waiter`, which is woken in arrival order once they fit. A call that does not fit goes once no
   * other large request body is held (small bodies and answers in flight never hold it back), so a
   * body near or over the whole budget waits but is not starved by small traffic.
   */
  reserveOrQueue(waiter: Waiter): boolean {
    if (this.queue.length === 0 && this.fits(waiter.bytes)) {
      this.reserved += waiter.bytes;
      this.admitted++;
      return true;
    }
    // An answer goes after the answers already waiting, before any request.
    const at = waiter.answer ? this.queue.findIndex((w) => !w.answer) : -1;
    if (at < 0) this.queue.push(waiter);
    else this.queue.splice(at, 0, waiter);
    return false;
  }

  /** Takes a waiter out of the queue (its call ended first) and wakes it ungranted. */
  cancel(waiter: Waiter): void {
    const i = this.queue.indexOf(waiter);
    if (i < 0) return;
    this.queue.splice(i, 1);
    waiter.wake(false);
    this.unreserve(0);
  }

  /** Reserves without waiting (a call that already holds memory must never wait on others). */
  reserveNow(bytes: number): void {
    this.reserved += bytes;
  }

  /** Gives `bytes` back; `admitted` when they were an admitted large request body. */
  unreserve(bytes: number, admitted = false): void {
    this.reserved -= bytes;
    if (admitted) this.admitted--;
    while (this.queue.length && this.fits(this.queue[0].bytes)) {
      const next = this.queue.shift()!;
      this.reserved += next.bytes;
      this.admitted++;
      next.wake(true);
    }
  }

  take(size: number): Buffer {
    return this.pool.take(size);
  }

  give(buf: Buffer): void {
    this.pool.give(buf);
  }

  private fits(bytes: number): boolean {
    return this.admitted === 0 || this.reserved + bytes <= this.budgetBytes;
  }
}

function clientGone(): ApiError {
  return new ApiError('client_closed', 'the client closed the connection while its call waited for memory');
}

/** One call's share of the body budget and its pooled buffers. */
export class BodyLease {
  /** Bytes reserved for the request body (admitted up front, or counted as it arrives). */
  private requestBytes = 0;
  /** Bytes of the request body that have arrived. */
  private requestReceived = 0;
  /** Bytes reserved for the model's answer (admitted, or counted as it arrives). */
  private answerBytes = 0;
  /** This call holds an admitted large body (its request's, or its answer's). */
  private admitted = false;
  private waiter: Waiter | undefined;
  /** The client left: a waiting admission is cancelled, later ones refused. */
  private gone = false;
  /** The request body has gone to the model (requestSent): its share and buffers are given back. */
  private requestOver = false;
  /** Pooled buffers of the body held now (the request's, then the answer's). */
  private readonly buffers: Buffer[] = [];
  /** Buffers being written to a model (made on first use): back to the pool only once the write has completed. */
  private sending: Set<Buffer> | undefined;
  private handlerDone = false;
  /** undefined while the answer is on its way; then whether it was handed to the OS whole. */
  private delivered: boolean | undefined;
  private ended = false;

  constructor(private readonly memory: BodyMemory) {}

  /**
   * Admits a request body of `declared` bytes (its Content-Length; undefined when chunked). Small
   * and chunked bodies go at once (chunked ones are counted as they arrive, see cover); a large one
   * once it fits in the budget, in arrival order. A call that waits `waitMs` is refused as
   * overloaded, so an upload holding the budget (a slow client) stalls the others for a bounded time.
   */
  admitRequest(declared: number | undefined, waitMs: number): Promise<void> {
    return this.admit(declared, waitMs, false) ?? Promise.resolve();
  }

  /**
   * Admits the model's answer of `declared` bytes, once the request was sent (requestSent): like a
   * request, but ahead of the requests that wait. Until then the answer stays unread. Undefined when
   * the answer was counted at once (a small one): only a large one is awaited.
   */
  admitAnswer(declared: number | undefined, waitMs: number): Promise<void> | undefined {
    return this.admit(declared, waitMs, true);
  }

  /**
   * Admits the `bytes` a gzip request body inflates to, once its compressed bytes were read (they
   * stay counted): a small one at once, a large one once it fits, like a request body. While it
   * waits, the compressed body no longer counts as a large body held (its bytes still count), so
   * that the call holds back no other call's turn, its own included.
   */
  admitInflated(bytes: number, waitMs: number): Promise<void> {
    if (this.gone) return Promise.reject(clientGone());
    if (bytes < POOLED_MIN_BYTES) {
      this.cover(this.requestReceived + bytes);
      return Promise.resolve();
    }
    if (this.admitted) {
      this.admitted = false;
      this.memory.unreserve(0, true);
    }
    return this.waitForRoom(bytes, waitMs, false);
  }

  /** Small and chunked bodies are counted at once (undefined, no turn of the event loop); a large one waits for room. */
  private admit(declared: number | undefined, waitMs: number, answer: boolean): Promise<void> | undefined {
    if (this.gone) return Promise.reject(clientGone());
    if (declared === undefined || declared < POOLED_MIN_BYTES) {
      this.cover(declared ?? 0);
      return undefined;
    }
    return this.waitForRoom(declared, waitMs, answer);
  }

  private async waitForRoom(declared: number, waitMs: number, answer: boolean): Promise<void> {
    let wake!: (granted: boolean) => void;
    const woken = new Promise<boolean>((resolve) => (wake = resolve));
    const waiter: Waiter = { bytes: declared, answer, wake };
    if (!this.memory.reserveOrQueue(waiter)) {
      this.waiter = waiter;
      const timer = setTimeout(() => this.memory.cancel(waiter), waitMs);
      const granted = await woken;
      clearTimeout(timer);
      this.waiter = undefined;
      if (!granted) {
        if (this.gone) throw clientGone();
        throw new ApiError('overloaded', `the gateway's memory for request and answer bodies (BUFFERED_BODY_BYTES, ${this.memory.budgetBytes} bytes) stayed full for ${waitMs / 1000} s; retry later`);
      }
      if (this.gone) {
        // Granted just as the client left: give the room to the next call.
        this.memory.unreserve(declared, true);
        throw clientGone();
      }
    }
    if (answer) this.answerBytes += declared;
    else this.requestBytes += declared;
    this.admitted = true;
  }

  /** The client closed the connection: a waiting admission gives up (its call then fails as client_closed). */
  clientLeft(): void {
    this.gone = true;
    if (this.waiter) this.memory.cancel(this.waiter);
  }

  /**
   * A buffer for a body of `size` bytes that this call reads whole, or undefined when the body is
   * small (the caller concatenates as usual). The bytes are counted by admitRequest and cover.
   */
  bufferFor(size: number): Buffer | undefined {
    if (this.ended || size < POOLED_MIN_BYTES || size > POOLED_MAX_BYTES) return undefined;
    const buf = this.memory.take(size);
    this.buffers.push(buf);
    return buf;
  }

  /**
   * Grows the reservation of the body being read (the request's, or once it was sent the
   * answer's) to `bytes` (never waits).
   */
  cover(bytes: number): void {
    if (this.ended) return;
    if (!this.requestOver) this.requestReceived = bytes;
    const held = this.requestOver ? this.answerBytes : this.requestBytes;
    if (bytes <= held) return;
    this.memory.reserveNow(bytes - held);
    if (this.requestOver) this.answerBytes = bytes;
    else this.requestBytes = bytes;
  }

  /**
   * The request body arrives slowly (bodyWatch.ts): the share admitted for its unread part goes back
   * to the budget, where it may admit a waiting call; the rest of the body is counted as it arrives,
   * like a chunked body's. A trickling client thus holds only what it has sent.
   */
  slowRequest(): void {
    if (!this.admitted || this.requestOver || this.ended) return;
    const unread = this.requestBytes - this.requestReceived;
    this.admitted = false;
    this.requestBytes = this.requestReceived;
    this.memory.unreserve(unread, true);
  }

  /**
   * `body` is being written to a model. True when it is (a view of) one of this lease's pooled
   * buffers: then sendingDone must follow once the write has completed.
   */
  sendingStarted(body: Buffer): boolean {
    const own = this.own(body);
    if (own) (this.sending ??= new Set()).add(own);
    return own !== undefined;
  }

  /** The write of `body` to the model has completed. */
  sendingDone(body: Buffer): void {
    const own = this.own(body);
    if (own) this.sending?.delete(own);
  }

  /**
   * The request body has gone to the model (all of it, or the model answered first): the call no
   * longer needs it. Its share goes back to the budget, where it may admit a waiting call, and its
   * pooled buffers to the pool; a buffer still being written is dropped instead.
   */
  requestSent(): void {
    if (this.requestOver || this.ended) return;
    this.requestOver = true;
    this.releaseBuffers(true);
    const admitted = this.admitted;
    this.admitted = false;
    if (this.requestBytes || admitted) this.memory.unreserve(this.requestBytes, admitted);
    this.requestBytes = 0;
  }

  /**
   * A streamed answer's bytes the gateway holds now (taken from the model, not yet taken by the
   * client's socket), counted in the budget as they rise and fall; never waits (the stream's own
   * bound keeps them small: stream/relay.ts). Only once the request was sent.
   */
  streamHeld(bytes: number): void {
    if (this.ended || !this.requestOver || bytes === this.answerBytes) return;
    if (bytes > this.answerBytes) this.memory.reserveNow(bytes - this.answerBytes);
    else this.memory.unreserve(this.answerBytes - bytes);
    this.answerBytes = bytes;
  }

  /** The call's handler has returned: the gateway no longer uses the buffers. */
  handlerOver(): void {
    this.handlerDone = true;
    this.endIfOver();
  }

  /** The response is over: its answer was handed to the OS whole (`delivered`), or the connection closed first. */
  responseOver(delivered: boolean): void {
    this.delivered = delivered;
    this.endIfOver();
  }

  private endIfOver(): void {
    if (this.handlerDone && this.delivered !== undefined) this.end(this.delivered);
  }

  /**
   * Gives the budget back, and the buffers to the pool when `recycle` (nothing refers to them any
   * more). Buffers still being sent to a model are dropped.
   */
  private end(recycle: boolean): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiter) this.memory.cancel(this.waiter);
    this.releaseBuffers(recycle);
    const held = this.requestBytes + this.answerBytes;
    if (held || this.admitted) this.memory.unreserve(held, this.admitted);
    this.requestBytes = this.answerBytes = 0;
    this.admitted = false;
  }

  /** Lets go of the held buffers: to the pool when `recycle`, except those still being written. */
  private releaseBuffers(recycle: boolean): void {
    if (recycle) for (const b of this.buffers) if (!this.sending?.has(b)) this.memory.give(b);
    this.buffers.length = 0;
  }

  private own(view: Buffer): Buffer | undefined {
    return this.buffers.find((b) => b.buffer === view.buffer);
  }
}
