// Forwarding to model containers: pooled keep-alive connections per replica, per-request deadlines,
// and the retry policy: a call is retried once on another replica only when the connection could not
// be made (nothing was sent), never once the body may have reached a model. Pooled connections are
// retired by age (maxAgeMs), so calls move off a replica that left a Service's endpoints.
//
// Two transports, chosen per call by body size, because each wins where the other loses (measured,
// CPU µs per call through a minimal proxy, README "Performance"): undici for small bodies (about
// 40% less CPU than node:http on small JSON), node:http for large and streamed ones (undici's WASM
// parser copies every byte: 2x the CPU of node:http on 400 KB-1 MB bodies).
import { Agent as UndiciAgent } from './undiciCore.js';
import type { Dispatcher } from 'undici';
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Duplex, Readable, Writable } from 'node:stream';
import type { Socket } from 'node:net';
import { ApiError } from '../errors.js';
import { WholeBody, declaredLength, discard, overDeclared, readAll, tooLarge } from './bodyStream.js';
import type { BodyLease } from './bodyMemory.js';

export interface UpstreamRequest {
  /** Default POST; a GET sends no body. */
  method?: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** A buffer, or a factory of a fresh stream view per attempt (see bodyStream.ts). */
  body: Buffer | (() => Readable);
  timeoutMs: number;
  /** Called once a Buffer body has been handed to the OS whole (node:http transport only). */
  onSent?: () => void;
  /** Lets the caller cancel the call while it is in flight (node:http transport only). */
  cancel?: Cancellation;
  /** Called once the model's answer has come to its last byte (streamed calls, both transports). */
  onAnswered?: () => void;
}

/**
 * A call's way to give up on its model call when its client leaves before the answer started.
 * A plain object, not an AbortController: creating one of those costs about 3 µs per call, a few
 * percent of a small predict call. Only node:http calls (bodies over SMALL_BODY_BYTES, streamed
 * rawPredict) are cancelled; a small undici call runs to its end.
 */
export interface Cancellation {
  /** Set by the caller when its client has left. */
  requested: boolean;
  /** Set by the transport while a request is in flight: ends it as client_closed. */
  onCancel?: () => void;
}

/** A model's answer read whole (UpstreamPool.fetch). */
export interface WholeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Base URL of the replica that answered. */
  upstream: string;
}

/** How UpstreamPool.fetch reads an answer whole. */
export interface AnswerReading {
  /** Most bytes the answer may have: past them (or a Content-Length over them) the call fails with payload_too_large and the model's connection is cut. */
  limit: number;
  /** The call's body memory: reserves the bytes as they come, and lends a pooled buffer for a large answer of known length. */
  lease?: BodyLease;
  /**
   * Sees the status and headers before any of the body is read. A promise it returns holds the
   * reading until it settles (the model's socket holds the answer meanwhile); a rejection, or a
   * throw, ends the call with that error and cuts the model's connection.
   */
  onHead?(statusCode: number, headers: IncomingHttpHeaders): Promise<void> | undefined;
}

export type OpenResponse = (statusCode: number, headers: IncomingHttpHeaders, upstream: string) => Writable;

export interface UpstreamOptions {
  keepAliveMs: number;
  connections: number;
  /** Pooled connections are retired once this old (0 or absent: no limit). */
  maxAgeMs?: number;
  /** Clock of the age checks (tests inject one). */
  now?: () => number;
}

/**
 * node:http's agent with connections retired by age. A call that ends on a socket `maxAgeMs` old
 * closes it (NodeHttpTransport marks the request not keep-alive, which also covers a socket Node
 * hands straight to a queued call); a socket that goes back to the pool idles at most until that age.
 */
class AgingAgent extends HttpAgent {
  private readonly born = new WeakMap<object, number>();

  constructor(opts: ConstructorParameters<typeof HttpAgent>[0], private readonly maxAgeMs: number, private readonly now: () => number) {
    super(opts);
  }

  override createConnection(...args: Parameters<HttpAgent['createConnection']>): ReturnType<HttpAgent['createConnection']> {
    const socket = super.createConnection(...args);
    if (socket) this.born.set(socket, this.now());
    return socket;
  }

  /** Milliseconds the socket may still be used for (Infinity without an age limit). */
  private timeLeft(socket: object): number {
    if (this.maxAgeMs <= 0) return Infinity;
    let born = this.born.get(socket);
    if (born === undefined) this.born.set(socket, (born = this.now()));
    return this.maxAgeMs - (this.now() - born);
  }

  isOld(socket: object | null): boolean {
    return socket !== null && this.timeLeft(socket) <= 0;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    const left = this.timeLeft(socket);
    if (left <= 0) return false;
    const kept = (super.keepSocketAlive as (s: Duplex) => boolean)(socket);
    // Idle in the pool past its age, the agent's socket timeout closes it.
    const s = socket as Socket;
    if (kept && left < (s.timeout || Infinity)) s.setTimeout(Math.ceil(left));
    return kept;
  }
}

/** Bodies up to this size go through undici; larger and streamed ones through node:http. */
export const SMALL_BODY_BYTES = 32 * 1024;

// Errors that only happen while connecting (EHOSTUNREACH and the like can also hit an established
// socket after the body went out, so they are not here: such a call is never re-sent).
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);
const UNREACHABLE = new Set([...CONNECT_FAILURES, 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UPSTREAM_TIMEOUT']);

/** Code of the error a transport raises when the client's request body broke off. */
const CLIENT_ABORTED = 'CLIENT_ABORTED';

/** The error a transport ends a call with when its caller cancels it (the client left). */
function clientAborted(): Error {
  return Object.assign(new Error('the client left before the answer'), { code: CLIENT_ABORTED });
}

/**
 * A call's promise, settled once: a streamed answer's end and its failures (the model's, the
 * client's) race, and only the first counts.
 */
class Settlement<T> {
  done = false;

  constructor(private readonly resolve: (value: T) => void, private readonly reject: (err: Error) => void) {}

  ok(value: T): void {
    if (this.done) return;
    this.done = true;
    this.resolve(value);
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.reject(err);
  }
}

/**
 * Ties a streamed call to the writable its answer goes into: the call is over once the writable
 * has finished. A writable closed first, or already closed when the model's headers came (the
 * client left while the model worked: no event would tell), fails the call as the client leaving,
 * and `tearDown` ends the model's side. False when it was closed already.
 */
function followAnswer(out: Writable, call: Settlement<void>, tearDown: () => void): boolean {
  const left = (): void => {
    if (call.done) return;
    call.fail(Object.assign(new Error('client closed the connection'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    tearDown();
  };
  if (out.destroyed) {
    left();
    return false;
  }
  out.on('close', () => {
    if (!out.writableFinished) left();
  });
  out.on('finish', () => call.ok());
  return true;
}

/** A model failed mid-answer: with nothing sent yet the caller can still answer with an error; else the client's answer is aborted. */
function abortAnswer(out: Writable, err: Error): void {
  if ((out as Writable & { headersSent?: boolean }).headersSent !== false) out.destroy(err);
}

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

export function isConnectFailure(err: unknown): boolean {
  return CONNECT_FAILURES.has(errorCode(err) ?? '');
}

/** Maps a transport failure (after any retry) to the catalog. */
export function upstreamFailure(err: unknown, modelId: string, timeoutMs: number): ApiError {
  if (err instanceof ApiError) return err;
  const code = errorCode(err);
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === CLIENT_ABORTED) {
    // The client left (its request broke off, or the response we streamed into closed first).
    return new ApiError('client_closed', `the client closed the connection while deployed model ${modelId} was answering`);
  }
  if (TIMEOUTS.has(code ?? '')) {
    return new ApiError('upstream_timeout', `deployed model ${modelId} did not answer within ${timeoutMs / 1000} s`);
  }
  if (UNREACHABLE.has(code ?? '')) {
    return new ApiError('model_unreachable', `deployed model ${modelId} is unreachable (${code}); no replica accepted a connection`);
  }
  return new ApiError('upstream_reset', `deployed model ${modelId} closed the connection before answering (${code ?? (err instanceof Error ? err.message : 'error')})`);
}

function timeoutError(): Error {
  return Object.assign(new Error('upstream timeout'), { code: 'UPSTREAM_TIMEOUT' });
}

/** node:http transport: large and streamed bodies. */
class NodeHttpTransport {
  private readonly agent: AgingAgent;
  private readonly targets = new Map<string, { host: string; port: number }>();

  constructor(opts: UpstreamOptions) {
    // `timeout` closes idle pooled sockets (Node also honours a shorter server Keep-Alive hint).
    this.agent = new AgingAgent({ keepAlive: true, maxSockets: opts.connections, timeout: opts.keepAliveMs, scheduling: 'lifo' }, opts.maxAgeMs ?? 0, opts.now ?? performance.now.bind(performance));
  }

  private target(origin: string): { host: string; port: number } {
    let t = this.targets.get(origin);
    if (!t) {
      const u = new URL(origin);
      t = { host: u.hostname, port: Number(u.port || 80) };
      this.targets.set(origin, t);
    }
    return t;
  }

  /** Sends the request; the body starts flowing only once the socket is connected (so a refused connection consumed nothing). */
  private start(origin: string, req: UpstreamRequest, onResponse: (res: import('node:http').IncomingMessage) => void, onError: (err: Error) => void): void {
    const { host, port } = this.target(origin);
    const r = httpRequest({ host, port, method: req.method ?? 'POST', path: req.path, headers: req.headers, agent: this.agent }, (res) => {
      // Too old: closed once this call is over rather than handed to the next one.
      if (this.agent.isOld(r.socket)) r.shouldKeepAlive = false;
      onResponse(res);
    });
    r.setTimeout(req.timeoutMs, () => r.destroy(timeoutError()));
    r.on('error', onError);
    if (req.cancel) {
      req.cancel.onCancel = () => r.destroy(clientAborted());
      if (req.cancel.requested) req.cancel.onCancel();
    }
    if (Buffer.isBuffer(req.body)) {
      if (req.onSent) r.once('finish', req.onSent);
      r.end(req.body);
      return;
    }
    const factory = req.body;
    r.once('socket', (socket) => {
      const go = (): void => {
        const body = factory();
        // A body that fails fails the call: a size-limit ApiError as it is; anything else means
        // the client's request broke off, which is the client's doing, not the model's.
        body.once('error', (err) => r.destroy(err instanceof ApiError ? err : Object.assign(new Error(`the client's request body broke off (${err.message})`), { code: CLIENT_ABORTED })));
        body.pipe(r);
      };
      if ((socket as { connecting?: boolean }).connecting) socket.once('connect', go);
      else go();
    });
  }

  async fetch(origin: string, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => this.start(origin, req, resolve, reject));
    const statusCode = res.statusCode ?? 502;
    try {
      const hold = reading.onHead?.(statusCode, res.headers);
      if (hold) await hold;
    } catch (err) {
      discard(res);
      throw err;
    }
    const body = await readAll(res, reading.limit, { overflow: 'destroy', lease: reading.lease, declared: declaredLength(res.headers) });
    return { statusCode, headers: res.headers, body, upstream: origin };
  }

  stream(origin: string, req: UpstreamRequest, open: OpenResponse): Promise<void> {
    return new Promise((resolve, reject) => {
      const call = new Settlement<void>(resolve, reject);
      this.start(origin, req, (res) => {
        const out = open(res.statusCode ?? 502, res.headers, origin);
        if (!followAnswer(out, call, () => res.destroy())) return;
        const fail = (err: Error): void => {
          if (call.done) return;
          res.unpipe(out);
          abortAnswer(out, err);
          call.fail(err);
        };
        res.on('error', fail);
        res.on('aborted', () => fail(Object.assign(new Error('upstream aborted the answer'), { code: 'ECONNRESET' })));
        if (req.onAnswered) res.once('end', req.onAnswered);
        res.pipe(out);
      }, (err) => call.fail(err));
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * undici transport: small buffered bodies. Connections are retired by age a whole agent at a time:
 * once the current agent is `maxAgeMs` old, new calls go to a fresh one and the old one closes its
 * connections when the calls it carries are over (undici's own clientTtl can leave a call queued
 * forever when the pool is full of expired connections). So every `maxAgeMs` all of them reconnect
 * at once, and while an old agent drains a replica may have up to twice `connections` open.
 */
class UndiciTransport {
  private agent: UndiciAgent;
  private born: number;
  private readonly now: () => number;
  private readonly retiring = new Set<Promise<void>>();
  private closed = false;

  constructor(private readonly opts: UpstreamOptions) {
    this.now = opts.now ?? performance.now.bind(performance);
    this.agent = this.makeAgent();
    this.born = this.now();
  }

  private makeAgent(): UndiciAgent {
    const { keepAliveMs, connections } = this.opts;
    return new UndiciAgent({ keepAliveTimeout: keepAliveMs, keepAliveMaxTimeout: keepAliveMs, connections, pipelining: 1, connect: { timeout: 5000 } });
  }

  /** The agent for a new call: a fresh one once the current one is too old. */
  private current(): UndiciAgent {
    const maxAge = this.opts.maxAgeMs ?? 0;
    if (maxAge > 0 && !this.closed && this.now() - this.born >= maxAge) {
      const old = this.agent;
      this.agent = this.makeAgent();
      this.born = this.now();
      const closing: Promise<void> = old.close().catch(() => undefined).finally(() => this.retiring.delete(closing));
      this.retiring.add(closing);
    }
    return this.agent;
  }

  private options(origin: string, req: UpstreamRequest) {
    const method = req.method ?? 'POST';
    return { origin, path: req.path, method, headers: req.headers, body: method === 'GET' ? undefined : (req.body as Buffer), headersTimeout: req.timeoutMs, bodyTimeout: req.timeoutMs };
  }

  /**
   * A buffered call through undici's dispatch API: the answer's chunks go straight into a
   * WholeBody, without the Readable, the promise and the async context of its request() API
   * (measured in the gateway under small-JSON predict load: README "Performance").
   */
  fetch(origin: string, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    return new Promise((resolve, reject) => {
      let statusCode = 0;
      let headers: IncomingHttpHeaders = {};
      let body: WholeBody | undefined;
      const call = new Settlement<WholeAnswer>(resolve, reject);
      const handler: Dispatcher.DispatchHandler = {
        // Required by undici to tell this handler API from the older one.
        onRequestStart() {},
        onResponseStart(controller, status, answerHeaders) {
          // An interim answer (103 Early Hints and the like) is not the answer: node:http skips them too.
          if (status < 200) return;
          statusCode = status;
          headers = answerHeaders as IncomingHttpHeaders;
          let hold: Promise<void> | undefined;
          try {
            hold = reading.onHead?.(statusCode, headers);
          } catch (err) {
            controller.abort(err as Error);
            return;
          }
          const declared = declaredLength(headers);
          const refused = overDeclared(reading.limit, declared);
          if (refused) {
            controller.abort(refused);
            return;
          }
          if (!hold) {
            body = new WholeBody(reading.limit, reading.lease, declared);
            return;
          }
          // Held: the pooled buffer is taken only once the hold is over (the memory it waits for).
          controller.pause();
          hold.then(() => {
            body = new WholeBody(reading.limit, reading.lease, declared);
            controller.resume();
          }, (err: Error) => controller.abort(err));
        },
        onResponseData(controller, chunk) {
          if (!(body as WholeBody).add(chunk)) controller.abort(tooLarge(reading.limit));
        },
        onResponseEnd() {
          if (!call.done) call.ok({ statusCode, headers, body: (body as WholeBody).result(), upstream: origin });
        },
        onResponseError(_controller, err) {
          call.fail(err);
        },
      };
      this.current().dispatch(this.options(origin, req), handler);
    });
  }

  /**
   * A streamed answer through undici's dispatch API: each chunk is written into the writable that
   * `open` returns, and the model's side is paused while that writable is full. Settles as the
   * node:http transport's stream does: resolved once the writable has finished; a model that fails
   * mid-answer destroys it when its headers are out (else the caller answers with the error); a
   * writable closed first (the client left) aborts the call.
   */
  stream(origin: string, req: UpstreamRequest, open: OpenResponse): Promise<void> {
    return new Promise((resolve, reject) => {
      let out: Writable | undefined;
      const call = new Settlement<void>(resolve, reject);
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart() {},
        onResponseStart(controller, statusCode, headers) {
          if (statusCode < 200) return; // interim answers: see fetch
          let w: Writable;
          try {
            w = out = open(statusCode, headers as IncomingHttpHeaders, origin);
          } catch (err) {
            controller.abort(err as Error);
            return;
          }
          if (!followAnswer(w, call, () => controller.abort(clientAborted()))) return;
          w.on('drain', () => controller.resume());
          w.on('error', (err) => {
            call.fail(err);
            controller.abort(err);
          });
        },
        onResponseData(controller, chunk) {
          if (!(out as Writable).write(chunk)) controller.pause();
        },
        onResponseEnd() {
          req.onAnswered?.();
          (out as Writable).end();
        },
        onResponseError(_controller, err) {
          if (call.done) return;
          if (out) abortAnswer(out, err);
          call.fail(err);
        },
      };
      this.current().dispatch(this.options(origin, req), handler);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([this.agent.close(), ...this.retiring]);
  }
}

export class UpstreamPool {
  private readonly undici: UndiciTransport;
  private readonly http: NodeHttpTransport;
  private next = 0;

  constructor(opts: UpstreamOptions) {
    this.undici = new UndiciTransport(opts);
    this.http = new NodeHttpTransport(opts);
  }

  private transport(req: UpstreamRequest): UndiciTransport | NodeHttpTransport {
    return Buffer.isBuffer(req.body) && req.body.length <= SMALL_BODY_BYTES ? this.undici : this.http;
  }

  /** Tries one replica (round robin), and the next one once if the first refused the connection. */
  private async withRetry<T>(upstreams: readonly string[], attempt: (origin: string) => Promise<T>): Promise<T> {
    const first = this.next++ % upstreams.length;
    try {
      return await attempt(upstreams[first]);
    } catch (err) {
      if (upstreams.length < 2 || !isConnectFailure(err)) throw err;
      return await attempt(upstreams[(first + 1) % upstreams.length]);
    }
  }

  /** Sends a call and reads its answer whole (see AnswerReading). Throws the raw error: map it with upstreamFailure. */
  fetch(upstreams: readonly string[], req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    const t = this.transport(req);
    return this.withRetry(upstreams, (origin) => t.fetch(origin, req, reading));
  }

  /**
   * Sends a call and writes the answer's body straight into the writable that `open` returns once
   * the status and headers are known. Resolves when the body has been written; a failure after
   * `open` has destroyed that writable (the client connection is aborted, never cleanly ended).
   */
  stream(upstreams: readonly string[], req: UpstreamRequest, open: OpenResponse): Promise<void> {
    const t = this.transport(req);
    return this.withRetry(upstreams, (origin) => t.stream(origin, req, open));
  }

  async close(): Promise<void> {
    this.http.close();
    await this.undici.close();
  }
}
