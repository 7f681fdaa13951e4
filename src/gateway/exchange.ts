// One buffered exchange with a model: send a body, read the whole answer under the response limit,
// and turn transport failures and 4xx/5xx answers into the catalog's errors. predict and the
// HttpBody form of rawPredict share it; streamed rawPredict does not buffer and has its own path.
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';
import { upstreamErrorMessage } from '../payload/response.js';
import { readAll } from './bodyStream.js';
import { upstreamFailure } from './upstream.js';
import type { Call, HandlerServices } from './call.js';
import type { RouteDestination } from './routing.js';

export interface Exchanged {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** Sends `body`, returns a 2xx answer whole; anything else throws the matching ApiError. */
export async function exchange(dest: RouteDestination, call: Call, svc: HandlerServices, body: Buffer, headers: Record<string, string>, path = dest.predictRoute, method: 'GET' | 'POST' = 'POST'): Promise<Exchanged> {
  const sentAt = process.hrtime.bigint();
  let answer;
  let answerBody: Buffer;
  try {
    answer = await svc.upstream.send(dest.upstreams, { method, path, headers: { ...headers, 'x-request-id': call.id }, body, timeoutMs: dest.timeoutMs });
    svc.metrics.upstream(dest.deployedModelId, Number(process.hrtime.bigint() - sentAt) / 1e9);
    answerBody = await readAll(answer.body, svc.maxResponseBytes, 'destroy');
  } catch (err) {
    if (err instanceof ApiError && err.code === 'payload_too_large') {
      throw new ApiError('bad_upstream_response', `deployed model ${dest.deployedModelId} answered with more than ${svc.maxResponseBytes} bytes`);
    }
    throw upstreamFailure(err, dest.deployedModelId, dest.timeoutMs);
  }
  if (answer.statusCode >= 400) {
    const contentType = answer.headers['content-type'];
    throw new ApiError('upstream_error', upstreamErrorMessage(answer.statusCode, typeof contentType === 'string' ? contentType : undefined, answerBody, dest.deployedModelId), answer.statusCode);
  }
  if (answer.statusCode < 200 || answer.statusCode >= 300) {
    throw new ApiError('bad_upstream_response', `deployed model ${dest.deployedModelId} answered HTTP ${answer.statusCode}`);
  }
  return { statusCode: answer.statusCode, headers: answer.headers, body: answerBody };
}
