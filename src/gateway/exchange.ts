// One buffered exchange with a model: send a body, read the whole answer under the response limit,
// and turn transport failures and 4xx/5xx answers into the catalog's errors. predict and the
// HttpBody form of rawPredict share it; streamed rawPredict does not buffer and has its own path.
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';
import { upstreamErrorMessage } from '../payload/response.js';
import { declaredLength } from './bodyStream.js';
import { upstreamFailure } from './upstream/index.js';
import type { CallContext } from './call.js';
import type { RouteDestination } from './routing.js';

export interface Exchanged {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Outgoing {
  body: Buffer;
  /** A fresh object per call: exchange adds x-request-id to it. */
  headers: Record<string, string>;
  /** Default: the model's predict route. */
  path?: string;
  /** Default: POST. */
  method?: 'GET' | 'POST';
}

/** Sends a call, returns a 2xx answer whole; anything else throws the matching ApiError. */
export async function exchange(call: CallContext, dest: RouteDestination, out: Outgoing): Promise<Exchanged> {
  const { svc } = call;
  out.headers['x-request-id'] = call.id;
  const sentAt = process.hrtime.bigint();
  let answer;
  // The request body's memory goes back once the model has been sent all of it (or, on the small
  // bodies' transport, which does not say when, once the answer came): the wait for the model
  // holds none. The body is the call's request or made from it; handlers do not use either after.
  const pooled = call.lease.sendingStarted(out.body);
  try {
    answer = await svc.upstream.fetch(dest, {
      method: out.method,
      path: out.path ?? dest.predictRoute,
      headers: out.headers,
      body: out.body,
      timeoutMs: dest.timeoutMs,
      onSent: () => {
        if (pooled) call.lease.sendingDone(out.body);
        call.lease.requestSent();
      },
      cancel: call.cancel,
    }, {
      limit: svc.maxResponseBytes,
      lease: call.lease,
      onHead: (_status, headers) => {
        call.lease.requestSent();
        svc.metrics.upstreamHeaders(dest, Number(process.hrtime.bigint() - sentAt) / 1e9);
        // A large answer waits for room before it is read (the model's socket holds it meanwhile).
        const length = declaredLength(headers);
        return length !== undefined && length <= svc.maxResponseBytes ? call.lease.admitAnswer(length, dest.timeoutMs) : undefined;
      },
    });
  } catch (err) {
    if (err instanceof ApiError && err.code === 'payload_too_large') {
      throw new ApiError('bad_upstream_response', `deployed model ${dest.deployedModelId} answered with more than ${svc.maxResponseBytes} bytes`);
    }
    throw upstreamFailure(err, dest.deployedModelId, dest.timeoutMs);
  }
  // The answer is in whole, error answers included.
  svc.metrics.upstreamDone(dest, Number(process.hrtime.bigint() - sentAt) / 1e9);
  if (answer.statusCode >= 400) {
    const contentType = answer.headers['content-type'];
    throw new ApiError('upstream_error', upstreamErrorMessage(answer.statusCode, typeof contentType === 'string' ? contentType : undefined, answer.body, dest.deployedModelId), answer.statusCode);
  }
  if (answer.statusCode < 200 || answer.statusCode >= 300) {
    throw new ApiError('bad_upstream_response', `deployed model ${dest.deployedModelId} answered HTTP ${answer.statusCode}`);
  }
  return answer;
}
