// predict: read the body under the destination's limit, validate and adapt it for the model's
// framework (payload/prepare.ts, synchronous, so no parsed tree outlives it into the upstream await),
// forward it, check the answer has one prediction per instance and splice in deployedModelId & co.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../errors.js';
import { preparePredict } from '../payload/prepare.js';
import { shapePredictAnswer, upstreamErrorMessage } from '../payload/response.js';
import { readAll } from './bodyStream.js';
import { upstreamFailure } from './upstream.js';
import { sendJson } from './respond.js';
import { vertexHeaders, type Call, type HandlerServices } from './call.js';
import type { Route, RouteDestination } from './routing.js';

export async function handlePredict(req: IncomingMessage, res: ServerResponse, call: Call, route: Route, dest: RouteDestination, svc: HandlerServices): Promise<void> {
  const raw = await readAll(req, dest.maxRequestBytes);
  call.requestBytes = raw.length;
  const { body, shape } = preparePredict(raw, dest.framework, svc.maxJsonDepth);

  const sentAt = process.hrtime.bigint();
  let answer;
  let answerBody: Buffer;
  try {
    answer = await svc.upstream.send(dest.upstreams, {
      path: dest.predictRoute,
      headers: { 'content-type': 'application/json', 'x-request-id': call.id },
      body,
      timeoutMs: dest.timeoutMs,
    });
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
  const out = shapePredictAnswer(answerBody, shape, dest.responseFields, { maxDepth: svc.maxJsonDepth + 2, modelId: dest.deployedModelId });
  call.responseBytes = sendJson(res, 200, out, vertexHeaders(call, route, dest));
}
