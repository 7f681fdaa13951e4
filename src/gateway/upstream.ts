// Forwarding to model containers: one undici Agent (pooled keep-alive connections per replica),
// per-request deadlines, and the retry policy: a call is retried once on another replica only when
// the connection could not be made (nothing was sent), never once the body may have reached a model.
import { Agent } from 'undici';
import type { Readable } from 'node:stream';
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';

export interface UpstreamRequest {
  path: string;
  headers: Record<string, string>;
  /** A buffer, or a factory of a fresh stream view per attempt (see bodyStream.ts). */
  body: Buffer | (() => Readable);
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface UpstreamAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Readable & { dump(opts?: { limit: number }): Promise<void> };
  /** Base URL of the replica that answered. */
  upstream: string;
}

export interface UpstreamOptions {
  keepAliveMs: number;
  connections: number;
}

const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

export function isConnectFailure(err: unknown): boolean {
  return CONNECT_FAILURES.has(errorCode(err) ?? '');
}

/** Maps an undici failure (after any retry) to the catalog. Abort errors pass through unchanged. */
export function upstreamFailure(err: unknown, modelId: string, timeoutMs: number): unknown {
  const code = errorCode(err);
  if (code === 'UND_ERR_ABORTED' || (err instanceof Error && err.name === 'AbortError')) return err;
  if (err instanceof ApiError) return err;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new ApiError('upstream_timeout', `deployed model ${modelId} did not answer within ${timeoutMs / 1000} s`);
  }
  if (isConnectFailure(err)) {
    return new ApiError('model_unreachable', `deployed model ${modelId} is unreachable (${code}); no replica accepted a connection`);
  }
  return new ApiError('upstream_reset', `deployed model ${modelId} closed the connection before answering (${code ?? (err instanceof Error ? err.message : 'error')})`);
}

export class UpstreamPool {
  private readonly agent: Agent;
  private next = 0;

  constructor(opts: UpstreamOptions) {
    this.agent = new Agent({
      keepAliveTimeout: opts.keepAliveMs,
      keepAliveMaxTimeout: opts.keepAliveMs,
      connections: opts.connections,
      pipelining: 1,
      connect: { timeout: 5000 },
    });
  }

  /**
   * Sends one request to one of `upstreams` (round robin), retrying once on the next replica when
   * the first could not be connected to. Throws the raw undici error; map it with upstreamFailure.
   */
  async send(upstreams: readonly string[], req: UpstreamRequest): Promise<UpstreamAnswer> {
    const first = this.next++ % upstreams.length;
    try {
      return await this.attempt(upstreams[first], req);
    } catch (err) {
      if (upstreams.length < 2 || !isConnectFailure(err) || req.signal?.aborted) throw err;
      return await this.attempt(upstreams[(first + 1) % upstreams.length], req);
    }
  }

  private async attempt(origin: string, req: UpstreamRequest): Promise<UpstreamAnswer> {
    const res = await this.agent.request({
      origin,
      path: req.path,
      method: 'POST',
      headers: req.headers,
      body: typeof req.body === 'function' ? req.body() : req.body,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
      signal: req.signal,
    });
    return { statusCode: res.statusCode, headers: res.headers as IncomingHttpHeaders, body: res.body, upstream: origin };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
