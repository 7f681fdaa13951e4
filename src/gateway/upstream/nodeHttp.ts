// The node:http transport: large and streamed bodies, over node:http's keep-alive agent.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import type { Writable } from 'node:stream';
import type { Socket } from 'node:net';
import { ApiError } from '../../errors.js';
import { declaredLength, discard, readAll } from '../bodyStream.js';
import {
  CLIENT_ABORTED, HeldDeadline, Settlement, abortAnswer, followAnswer, idleTimeoutError, onCancel, timeoutError,
  type AnswerReading, type OpenResponse, type PoolOptions, type Transport, type UpstreamRequest, type WholeAnswer,
} from './transport.js';

export class NodeHttpTransport implements Transport {
  private readonly agent: HttpAgent;
  private readonly targets = new Map<string, { host: string; port: number }>();

  constructor(opts: PoolOptions) {
    // `timeout` closes idle pooled sockets (Node also honours a shorter server Keep-Alive hint).
    this.agent = new HttpAgent({ keepAlive: true, maxSockets: opts.connections, timeout: opts.keepAliveMs, scheduling: 'lifo' });
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

  /**
   * Sends the request; a streamed body starts flowing only once the socket is connected (so a
   * refused connection consumed nothing). The call's deadline runs from here to the answer's last
   * byte, whatever trickles in meanwhile: when it passes, `expired` gets the timeout error and the
   * request and its answer are destroyed.
   */
  private start(origin: string, req: UpstreamRequest, onResponse: (res: IncomingMessage) => void, onError: (err: Error) => void, expired: (err: Error) => void): void {
    const { host, port } = this.target(origin);
    let answer: IncomingMessage | undefined;
    const r = httpRequest({ host, port, method: req.method ?? 'POST', path: req.path, headers: req.headers, agent: this.agent }, (res) => {
      answer = res;
      onResponse(res);
    });
    const deadline = setTimeout(() => {
      // The call fails first: destroying an answer also reports it as aborted, which is not what happened.
      const err = timeoutError();
      expired(err);
      if (answer) discard(answer);
      r.destroy(err);
    }, req.timeoutMs);
    // 'close': the answer came whole, or the request was destroyed.
    r.once('close', () => clearTimeout(deadline));
    r.on('error', onError);
    onCancel(req.cancel, (err) => r.destroy(err));
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
      if ((socket as Socket).connecting) socket.once('connect', go);
      else go();
    });
  }

  fetch(origin: string, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    return new Promise((resolve, reject) => {
      const call = new Settlement<WholeAnswer>(resolve, reject);
      const fail = (err: Error): void => call.fail(err);
      const deadline = new HeldDeadline(fail);
      this.start(origin, req, (res) => {
        const statusCode = res.statusCode ?? 502;
        const read = (): void => {
          const lapsed = deadline.release();
          if (lapsed) return fail(lapsed);
          readAll(res, reading.limit, { overflow: 'destroy', lease: reading.lease, declared: declaredLength(res.headers) })
            .then((body) => call.ok({ statusCode, headers: res.headers, body, upstream: origin }), fail);
        };
        let hold: Promise<void> | undefined;
        try {
          hold = reading.onHead?.(statusCode, res.headers);
        } catch (err) {
          discard(res);
          return fail(err as Error);
        }
        if (!hold) return read();
        deadline.hold();
        hold.then(read, (err: Error) => {
          deadline.release();
          discard(res);
          fail(err);
        });
      }, fail, (err) => void deadline.expire(err));
    });
  }

  stream(origin: string, req: UpstreamRequest, open: OpenResponse): Promise<void> {
    return new Promise((resolve, reject) => {
      const call = new Settlement<void>(resolve, reject);
      let answer: { res: IncomingMessage; out: Writable } | undefined;
      const fail = (err: Error): void => {
        if (call.done) return;
        if (answer) {
          answer.res.unpipe(answer.out);
          abortAnswer(answer.out, err);
        }
        call.fail(err);
      };
      this.start(origin, req, (res) => {
        const out = open(res.statusCode ?? 502, res.headers, origin);
        if (!followAnswer(out, call, () => res.destroy())) return;
        answer = { res, out };
        const idleMs = req.idleTimeoutMs;
        if (idleMs !== undefined && idleMs < req.timeoutMs) {
          res.setTimeout(idleMs, () => {
            fail(idleTimeoutError(idleMs));
            discard(res);
          });
        }
        res.on('error', fail);
        res.on('aborted', () => fail(Object.assign(new Error('upstream aborted the answer'), { code: 'ECONNRESET' })));
        if (req.onAnswered) res.once('end', req.onAnswered);
        res.pipe(out);
      }, fail, fail);
    });
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}
