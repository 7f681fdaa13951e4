// The one interface both model transports implement (node:http, undici), the request and answer
// shapes they share, and the settling rules they share: a call settles once, a streamed call is tied
// to the writable its answer goes into, and a caller's cancellation ends the call as the client leaving.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable, Writable } from 'node:stream';
import type { BodyLease } from '../bodyMemory.js';

/** How both transports pool their connections to model replicas. */
export interface PoolOptions {
  keepAliveMs: number;
  connections: number;
}

export interface UpstreamRequest {
  /** Default POST; a GET sends no body. */
  method?: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** A buffer, or a factory of a fresh stream view per attempt (see bodyStream.ts). */
  body: Buffer | (() => Readable);
  /** The call's deadline: from sending to the answer's last byte, however it trickles in. */
  timeoutMs: number;
  /** Streamed answers: the longest pause between two parts of the answer once it has started (at most timeoutMs). */
  idleTimeoutMs?: number;
  /** Called once the body has been handed to the OS whole, when the transport can tell (node:http). */
  onSent?: () => void;
  /** Lets the caller cancel the call while it is in flight. */
  cancel?: Cancellation;
  /** Called once the model's answer has come to its last byte (streamed calls). */
  onAnswered?: () => void;
  /**
   * The answer may stream for minutes (a generation): the call goes over the streams' own
   * connections, so long streams neither wait behind the other calls' connection cap nor hold it.
   */
  long?: boolean;
  /** The prompt's prefix keys (affinity.ts): a load-aware pick prefers the replica that holds the longest. */
  prefix?: readonly string[];
}

/**
 * A call's way to give up on its model call when its client leaves before the answer started. A
 * plain object rather than an AbortController, which costs more per call than a small predict's
 * budget allows (docs/performance.md). Every transport honours it the same way: a call cancelled
 * before or while it is in flight fails as client_closed and its model connection is closed.
 */
export interface Cancellation {
  /** Set by the caller when its client has left. */
  requested: boolean;
  /** Set by whoever holds the call while it waits (the transport in flight, the admission queue before): ends the wait as client_closed. */
  onCancel?: () => void;
}

/** A model's answer read whole (Transport.fetch). */
export interface WholeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Base URL of the replica that answered. */
  upstream: string;
}

/** How a transport reads an answer whole. */
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

/** Opens the client's answer once the model's status and headers are known; the body is written into it. */
export type OpenResponse = (statusCode: number, headers: IncomingHttpHeaders, upstream: string) => Writable;

/** One way of calling a model replica at `origin` (a base URL). Errors are raw: map them with upstreamFailure. */
export interface Transport {
  /** Sends a call and reads its answer whole. */
  fetch(origin: string, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer>;
  /**
   * Sends a call and writes the answer's body into the writable `open` returns. Resolves once that
   * writable has finished; a model failing mid-answer destroys it when its headers are out (else the
   * caller answers with the error); a writable closed first (the client left) aborts the call.
   */
  stream(origin: string, req: UpstreamRequest, open: OpenResponse): Promise<void>;
  close(): Promise<void>;
}

/** Code of the error a transport ends a call with when its client left (request body broke off, or cancelled). */
export const CLIENT_ABORTED = 'CLIENT_ABORTED';

/** The error a transport ends a call with when its caller cancels it (the client left). */
export function clientAborted(): Error {
  return Object.assign(new Error('the client left before the answer'), { code: CLIENT_ABORTED });
}

/** Ties a cancellation to the call now in flight: `abort` ends it, at once if the client has left already. */
export function onCancel(cancel: Cancellation | undefined, abort: (err: Error) => void): void {
  if (!cancel) return;
  cancel.onCancel = () => abort(clientAborted());
  if (cancel.requested) cancel.onCancel();
}

/**
 * A call's promise, settled once: a streamed answer's end and its failures (the model's, the
 * client's) race, and only the first counts.
 */
export class Settlement<T> {
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
export function followAnswer(out: Writable, call: Settlement<void>, tearDown: () => void): boolean {
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
export function abortAnswer(out: Writable, err: Error): void {
  if ((out as Writable & { headersSent?: boolean }).headersSent !== false) out.destroy(err);
}

/**
 * A buffered call's deadline passing while its answer waits for body memory (AnswerReading.onHead's
 * hold): that wait has its own limit and its own error (overloaded), so the deadline is told only
 * once the wait is over. Both transports' fetch use it.
 */
export class HeldDeadline {
  private holding = false;
  private lapsed: Error | undefined;

  constructor(private readonly fail: (err: Error) => void) {}

  /** The deadline passed: fails the call now (true), or once the hold is over (false). */
  expire(err: Error): boolean {
    if (this.holding) {
      this.lapsed = err;
      return false;
    }
    this.fail(err);
    return true;
  }

  hold(): void {
    this.holding = true;
  }

  /** The hold is over: the deadline's error when it passed meanwhile. */
  release(): Error | undefined {
    this.holding = false;
    return this.lapsed;
  }
}

/** The error a transport ends a call with when the model's answer was not in whole by the call's deadline. */
export function timeoutError(): Error {
  return Object.assign(new Error('upstream timeout'), { code: 'UPSTREAM_TIMEOUT' });
}

/** The error a transport ends a streamed call with when the model's answer paused longer than `idleMs`. */
export function idleTimeoutError(idleMs: number): Error {
  return Object.assign(new Error(`the answer paused for ${idleMs / 1000} s`), { code: 'UPSTREAM_IDLE_TIMEOUT', idleMs });
}
