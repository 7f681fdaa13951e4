// The undici transport: small buffered bodies, through undici's dispatch API (its documented
// low-level interface).
import { Agent, type Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import type { Writable } from 'node:stream';
import { WholeBody, declaredLength, overDeclared, tooLarge } from '../bodyStream.js';
import type { PoolOptions } from './transport.js';
import {
  HeldDeadline, Settlement, abortAnswer, followAnswer, onCancel, clientAborted, idleTimeoutError, timeoutError,
  type AnswerReading, type OpenResponse, type Transport, type UpstreamRequest, type WholeAnswer,
} from './transport.js';

/**
 * A call's deadline and cancellation, tied to its request once undici starts it: past the deadline
 * (queued or in flight, whatever trickled in) the call fails with the timeout error and is aborted.
 */
class Guard {
  private controller: Dispatcher.DispatchController | undefined;
  private readonly timer: NodeJS.Timeout;

  private expired = false;

  /**
   * `expire` fails the call (first, so that the abort does not read as the model's doing), and
   * says whether to abort the request now: not while its answer waits for body memory, whose own
   * limit then decides.
   */
  constructor(private readonly req: UpstreamRequest, expire: (err: Error) => boolean) {
    this.timer = setTimeout(() => {
      const err = timeoutError();
      this.expired = true;
      if (expire(err)) this.controller?.abort(err);
    }, req.timeoutMs);
  }

  /** onRequestStart: the request is on its way (or aborted at once when its time or its client is gone). */
  readonly started = (controller: Dispatcher.DispatchController): void => {
    this.controller = controller;
    if (this.expired) controller.abort(timeoutError());
    else onCancel(this.req.cancel, (err) => controller.abort(err));
  };

  /** The model's side is over (answered whole or failed). */
  done(): void {
    clearTimeout(this.timer);
  }
}

export class UndiciTransport implements Transport {
  private readonly agent: Agent;

  constructor(opts: PoolOptions) {
    this.agent = new Agent({ keepAliveTimeout: opts.keepAliveMs, keepAliveMaxTimeout: opts.keepAliveMs, connections: opts.connections, pipelining: 1, connect: { timeout: 5000 } });
  }

  /** undici's own timeouts stay as a backstop at the call's deadline; a streamed answer's pauses are held to idleTimeoutMs. */
  private options(origin: string, req: UpstreamRequest, bodyTimeout: number): Dispatcher.DispatchOptions {
    const method = req.method ?? 'POST';
    return { origin, path: req.path, method, headers: req.headers, body: method === 'GET' ? undefined : (req.body as Buffer), headersTimeout: req.timeoutMs, bodyTimeout };
  }

  private dispatch(origin: string, req: UpstreamRequest, handler: Dispatcher.DispatchHandler, bodyTimeout = req.timeoutMs): void {
    this.agent.dispatch(this.options(origin, req, bodyTimeout), handler);
  }

  /** A buffered call: the answer's chunks go straight into a WholeBody. */
  fetch(origin: string, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    return new Promise((resolve, reject) => {
      let statusCode = 0;
      let headers: IncomingHttpHeaders = {};
      let body: WholeBody | undefined;
      const call = new Settlement<WholeAnswer>(resolve, reject);
      const deadline = new HeldDeadline((err) => call.fail(err));
      const guard = new Guard(req, (err) => deadline.expire(err));
      this.dispatch(origin, req, {
        onRequestStart: guard.started,
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
          deadline.hold();
          hold.then(() => {
            const lapsed = deadline.release();
            if (lapsed) return controller.abort(lapsed);
            body = new WholeBody(reading.limit, reading.lease, declared);
            controller.resume();
          }, (err: Error) => {
            deadline.release();
            controller.abort(err);
          });
        },
        onResponseData(controller, chunk) {
          if (!(body as WholeBody).add(chunk)) controller.abort(tooLarge(reading.limit));
        },
        onResponseEnd() {
          guard.done();
          if (!call.done) call.ok({ statusCode, headers, body: (body as WholeBody).result(), upstream: origin });
        },
        onResponseError(_controller, err) {
          guard.done();
          call.fail(err);
        },
      });
    });
  }

  /** A streamed answer: each chunk is written into the writable, and the model is paused while that writable is full. */
  stream(origin: string, req: UpstreamRequest, open: OpenResponse): Promise<void> {
    return new Promise((resolve, reject) => {
      let out: Writable | undefined;
      const call = new Settlement<void>(resolve, reject);
      const fail = (err: Error): void => {
        if (call.done) return;
        if (out) abortAnswer(out, err);
        call.fail(err);
      };
      const guard = new Guard(req, (err) => (fail(err), true));
      const idleMs = req.idleTimeoutMs !== undefined && req.idleTimeoutMs < req.timeoutMs ? req.idleTimeoutMs : undefined;
      this.dispatch(origin, req, {
        onRequestStart: guard.started,
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
          guard.done();
          req.onAnswered?.();
          (out as Writable).end();
        },
        onResponseError(_controller, error) {
          guard.done();
          // A pause past idleMs is undici's body timeout.
          fail(idleMs !== undefined && (error as { code?: string }).code === 'UND_ERR_BODY_TIMEOUT' ? idleTimeoutError(idleMs) : error);
        },
      }, idleMs);
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
