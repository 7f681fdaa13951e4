// predict on a graphstorm deployed model: the gs-realtime-v0.1 payload is checked against the spec
// (payload/graphstorm.ts), forwarded unchanged to the container's /invocations (or its predictRoute),
// and the answer is GraphStorm's response body with the gateway's request id as request_uid. The
// call speaks the `graphstorm` dialect, so its errors are GraphStorm bodies too (errors.ts).
import { ApiError } from '../errors.js';
import { checkGraphStormPayload, shapeGraphStormAnswer } from '../payload/graphstorm.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import { sendJson } from './respond.js';
import type { EndpointCall } from './call.js';

export async function handleGraphStorm(call: EndpointCall): Promise<void> {
  const { dest, svc } = call;
  // Routing only offers valid models, and a valid graphstorm model has its task.
  if (!dest.gmlTask) throw new ApiError('internal', `deployed model ${dest.deployedModelId} has no gmlTask`);
  const raw = await readRequestBody(call.req, dest.maxRequestBytes, call.lease, dest.timeoutMs);
  call.requestBytes = raw.length;
  const { targets } = checkGraphStormPayload(raw, dest.gmlTask, svc.maxJsonDepth);
  const answer = await exchange(call, dest, { body: raw, headers: { 'content-type': 'application/json' } });
  const out = shapeGraphStormAnswer(answer.body, targets, call.id, dest.deployedModelId);
  call.responseBytes = await sendJson(call.res, 200, out, dest.answerHeaders, svc.compression);
}
