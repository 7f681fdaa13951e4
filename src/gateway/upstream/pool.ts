// The gateway's way to call a model: picks the transport by body size, picks the replica, and
// retries once on another replica only when the connection could not be made (nothing was sent),
// never once the body may have reached a model.
//
// Two transports because each is cheaper where the other is not (docs/performance.md): undici
// for small buffered bodies, node:http for large and streamed ones.
import { NodeHttpTransport } from './nodeHttp.js';
import type { PoolOptions } from './transport.js';
import { UndiciTransport } from './undici.js';
import { isConnectFailure } from './failures.js';
import { clientAborted, type AnswerReading, type OpenResponse, type Transport, type UpstreamRequest, type WholeAnswer } from './transport.js';

/** Bodies up to this size go through undici; larger and streamed ones through node:http. */
export const SMALL_BODY_BYTES = 32 * 1024;

export class UpstreamPool {
  private readonly small: Transport;
  private readonly large: Transport;
  private next = 0;

  constructor(opts: PoolOptions) {
    this.small = new UndiciTransport(opts);
    this.large = new NodeHttpTransport(opts);
  }

  private transport(req: UpstreamRequest): Transport {
    return Buffer.isBuffer(req.body) && req.body.length <= SMALL_BODY_BYTES ? this.small : this.large;
  }

  /** Tries one replica (round robin), and the next one once if the first refused the connection. */
  private async withRetry<T>(upstreams: readonly string[], req: UpstreamRequest, attempt: (origin: string, req: UpstreamRequest) => Promise<T>): Promise<T> {
    const first = this.next++ % upstreams.length;
    const sentAt = performance.now();
    try {
      if (req.cancel?.requested) throw clientAborted();
      return await attempt(upstreams[first], req);
    } catch (err) {
      if (upstreams.length < 2 || !isConnectFailure(err) || req.cancel?.requested) throw err;
      // The deadline is the call's, not the attempt's.
      const left = Math.max(1, req.timeoutMs - (performance.now() - sentAt));
      return await attempt(upstreams[(first + 1) % upstreams.length], { ...req, timeoutMs: left });
    }
  }

  /** Sends a call and reads its answer whole (see AnswerReading). Throws the raw error: map it with upstreamFailure. */
  fetch(upstreams: readonly string[], req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    const t = this.transport(req);
    return this.withRetry(upstreams, req, (origin, r) => t.fetch(origin, r, reading));
  }

  /**
   * Sends a call and writes the answer's body straight into the writable that `open` returns once
   * the status and headers are known. Resolves when the body has been written; a failure after
   * `open` has destroyed that writable (the client connection is aborted, never cleanly ended).
   */
  stream(upstreams: readonly string[], req: UpstreamRequest, open: OpenResponse): Promise<void> {
    const t = this.transport(req);
    return this.withRetry(upstreams, req, (origin, r) => t.stream(origin, r, open));
  }

  async close(): Promise<void> {
    await Promise.all([this.large.close(), this.small.close()]);
  }
}
