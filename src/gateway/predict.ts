// predict: read the body under the destination's limit, validate and adapt it for the model's
// framework (payload/prepare.ts, synchronous, so no parsed tree outlives it into the upstream await),
// forward it, check the answer has one prediction per instance and splice in deployedModelId & co.
import { preparePredict } from '../payload/prepare.js';
import { shapePredictAnswer } from '../payload/response.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import { sendJson } from './respond.js';
import type { EndpointCall } from './call.js';

export async function handlePredict(call: EndpointCall): Promise<void> {
  const { dest, svc } = call;
  const raw = await readRequestBody(call.req, dest.maxRequestBytes, call.lease, dest.timeoutMs);
  call.requestBytes = raw.length;
  const { body, shape } = preparePredict(raw, dest.framework, svc.maxJsonDepth);
  const answer = await exchange(call, dest, { body, headers: { 'content-type': 'application/json' } });
  const out = shapePredictAnswer(answer.body, shape, dest.responseFields, { maxDepth: svc.maxJsonDepth + 2, modelId: dest.deployedModelId });
  call.responseBytes = await sendJson(call.res, 200, out, dest.answerHeaders, svc.compression);
}
