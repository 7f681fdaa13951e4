// The life of one prediction call, in one place: its request id, its body memory lease, its
// cancellation when the client leaves, the one error answer when it fails, its log line and its
// metrics; and the calls in flight that draining waits on, and answers when the drain runs out.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { ApiError, CATALOG, type Dialect } from '../errors.js';
import { sendError } from './respond.js';
import { UNRESOLVED, type CallMeter } from './metrics.js';
import type { CallContext, CallMethod, HandlerServices } from './call.js';
import type { Params } from './routes.js';
import { BodyWatcher, type PaceVerdict } from './bodyWatch.js';
import { cutBody } from './bodyStream.js';
import { StreamCut } from './stream/streamCall.js';

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** How a call starts: what the route table matched, and what serves it. */
export interface CallStart {
  params: Params;
  dialect: Dialect;
  method: CallMethod;
  /** It came through the gRPC surface (grpc/hop.ts). */
  viaGrpc: boolean;
  /** Resolves and handles the call; throws what went wrong. */
  serve(call: CallContext): Promise<void>;
}

/** Runs a gateway's calls, and counts those started and in flight (draining waits on them). */
export class Calls {
  draining = false;
  inFlight = 0;
  started = 0;
  private idle: (() => void) | null = null;
  private readonly live = new Set<CallContext>();
  /** Calls answered 503 by abandon(): their handlers' later outcome is not theirs to answer. */
  private readonly abandoned = new WeakSet<CallContext>();

  /** The pace of the request bodies being read. */
  readonly bodies: BodyWatcher;

  constructor(private readonly svc: HandlerServices) {
    this.bodies = new BodyWatcher(svc.clients.bodyTimeoutMs, svc.clients.bodyMinBytesPerSecond);
  }

  /** Resolves once no call is in flight, or when `wake` is called. */
  quiet(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.idle = resolve));
  }

  wake(): void {
    const idle = this.idle;
    this.idle = null;
    idle?.();
  }

  /** Draining begins: every answer not yet started (and every later one) carries Connection: close. */
  startDraining(): void {
    this.draining = true;
    for (const { res } of this.live) if (!res.headersSent) res.setHeader('Connection', 'close');
  }

  /**
   * The drain ran out: every call in flight whose answer has not started is answered now with 503
   * shutting_down (and its model call cancelled); a stream under way ends with an error event that
   * says so (and its model call is closed); any other answer under way is left to the connection's
   * end. Resolves once those answers are handed to the OS, or their connections closed.
   */
  abandon(): Promise<void> {
    const out: Promise<void>[] = [];
    const why = 'the gateway is shutting down and its drain time ran out';
    for (const call of this.live) {
      const { res } = call;
      if (res.destroyed) continue;
      if (res.headersSent) {
        if (!call.stream) continue;
        out.push(new Promise((resolve) => res.once('close', resolve)));
        call.stream.cut(new ApiError('shutting_down', `${why} before this stream ended; retry it`));
        continue;
      }
      this.abandoned.add(call);
      res.setHeader('Connection', 'close');
      sendError(res, new ApiError('shutting_down', `${why} before this call was answered; retry it`), call.dialect, call.id);
      out.push(new Promise((resolve) => res.once('close', resolve)));
      call.cancel.requested = true;
      call.cancel.onCancel?.();
    }
    return Promise.all(out).then(() => undefined);
  }

  /** Runs one call from its first byte to its answer. */
  async run(req: IncomingMessage, res: ServerResponse, start: CallStart): Promise<void> {
    const { svc } = this;
    const call = newCall(req, res, svc, start);
    // Metrics take the call in once both the handler and the answer are over: its duration runs
    // to the answer's last byte.
    const meter = svc.metrics.meter(call.startNs);
    followResponse(call, meter);
    res.setHeader('X-Request-Id', call.id);
    this.inFlight++;
    this.started++;
    this.live.add(call);
    const unwatch = req.complete ? undefined : this.bodies.watch({ req, cut: (verdict) => cutCall(call, verdict), slow: () => call.lease.slowRequest() });
    let status = 200;
    try {
      await start.serve(call);
      // An answer that could not be delivered (the client left first) counts as 499, not 200.
      status = res.destroyed && !res.writableFinished ? CATALOG.client_closed.http : res.statusCode;
    } catch (err) {
      status = this.abandoned.has(call) ? CATALOG.shutting_down.http : failed(call, err);
    } finally {
      this.live.delete(call);
      unwatch?.();
      meter.handlerOver(call, status);
      if (svc.logger.isLevelEnabled('debug')) {
        const ms = Math.round(Number(process.hrtime.bigint() - call.startNs) / 1e6);
        svc.logger.debug({ requestId: call.id, user: call.user, endpoint: call.endpoint, deployedModelId: call.deployedModelId, method: call.method, status, ms }, 'call');
      }
      call.lease.handlerOver();
      if (--this.inFlight === 0) this.wake();
    }
  }
}

/** Makes a call's context. */
function newCall(req: IncomingMessage, res: ServerResponse, svc: HandlerServices, { params, dialect, method, viaGrpc }: CallStart): CallContext {
  const header = req.headers['x-request-id'];
  return {
    req,
    res,
    svc,
    params,
    id: typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID(),
    user: '-',
    dialect,
    method,
    viaGrpc,
    endpoint: UNRESOLVED,
    modelKey: UNRESOLVED,
    deployedModelId: UNRESOLVED,
    startNs: process.hrtime.bigint(),
    requestBytes: 0,
    responseBytes: undefined,
    lease: svc.memory.lease(),
    cancel: { requested: false },
    route: undefined,
    dest: undefined,
    model: undefined,
    modelPath: undefined,
    cut: undefined,
    stream: undefined,
  };
}

/**
 * Ends the lease and the metrics' view of the response when it closes, and cancels the model call
 * when it closes before its answer was handed over.
 */
function followResponse(call: CallContext, meter: CallMeter): void {
  const { res } = call;
  // The lease (bodyMemory.ts) ends when both the handler and the response are over ('close'
  // follows 'finish' when the answer was handed over).
  res.once('close', () => {
    // Closed before the answer was handed over: the client left, or the gateway aborted a broken
    // answer (then its headers were out and the model call has failed already). A call still
    // waiting for memory or for the model's answer is cancelled.
    if (!res.writableFinished) {
      call.lease.clientLeft();
      if (!res.headersSent) {
        call.cancel.requested = true;
        call.cancel.onCancel?.();
      }
    }
    call.lease.responseOver(res.writableFinished);
    meter.responseOver(res.writableFinished);
  });
}

/**
 * Cuts a call whose body broke the pace: its reader fails with 408 client_timeout (which is then its
 * answer, with Connection: close), its model call is cancelled, and an answer already under way is
 * aborted.
 */
function cutCall(call: CallContext, verdict: Exclude<PaceVerdict, 'ok'>): void {
  const { clients } = call.svc;
  const seconds = clients.bodyTimeoutMs / 1000;
  const err = new ApiError('client_timeout', verdict === 'stalled'
    ? `the request body stopped arriving for ${seconds} s (BODY_TIMEOUT_SECONDS)`
    : `the request body arrived slower than ${clients.bodyMinBytesPerSecond} bytes a second over ${seconds} s (BODY_MIN_BYTES_PER_SECOND)`);
  err.headers = { Connection: 'close' };
  call.cut = err;
  cutBody(call.req, err);
  call.cancel.onCancel?.();
  if (call.res.headersSent) call.res.destroy();
}

/** Answers a failed call with its one error (or drops a client that left), logs it; returns the status. */
function failed(call: CallContext, err: unknown): number {
  const { req, res } = call;
  // A stream the gateway ended with an error event was answered already, with that outcome.
  const streamed = err instanceof StreamCut;
  if (!streamed && call.cut !== undefined && !call.cancel.requested) err = call.cut;
  // A client that left before its answer started (its model call then cancelled) is a 499,
  // whatever the cancelled call failed with; so is a client_closed from the transports, and
  // anything that is not an ApiError on a dead socket (a request body cut off).
  const clientGone = !streamed && (call.cancel.requested || (err instanceof ApiError ? err.code === 'client_closed' : req.socket.destroyed));
  let api: ApiError;
  if (err instanceof StreamCut) api = err.api;
  else if (clientGone) {
    api = new ApiError('client_closed', 'the client closed the connection before the answer was complete');
    res.destroy();
  } else api = sendError(res, err, call.dialect, call.id);
  const level = clientGone ? 'debug' : api.httpStatus >= 500 ? 'warn' : 'info';
  call.svc.logger[level]({ requestId: call.id, user: call.user, endpoint: call.endpoint, deployedModelId: call.deployedModelId, method: call.method, status: api.httpStatus, code: api.code, streamed: streamed || undefined, err: api.code === 'internal' ? err : undefined }, api.message);
  return api.httpStatus;
}
