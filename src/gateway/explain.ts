// explain (Vertex `:explain`): routed like predict, except that the body's `deployedModelId`, when
// given, picks the deployed model whatever the traffic split says. The body is checked by the predict
// rules, sent to the model's explain route, and the answer must hold one explanation per instance;
// deployedModelId & co. are spliced in as for predict.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../errors.js';
import { prepareExplain } from '../payload/explain.js';
import { shapePredictAnswer } from '../payload/response.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import { sendJson } from './respond.js';
import { destinationById, type Route, type RouteDestination } from './routing.js';
import { vertexHeaders, type Call, type HandlerServices } from './call.js';

export async function handleExplain(req: IncomingMessage, res: ServerResponse, call: Call, route: Route, picked: RouteDestination, svc: HandlerServices): Promise<void> {
  const raw = await readRequestBody(req, picked.maxRequestBytes, call.lease, picked.timeoutMs);
  call.requestBytes = raw.length;
  const first = prepareExplain(raw, picked.framework, svc.maxJsonDepth);
  let dest = picked;
  let prepared = first;
  if (first.deployedModelId !== undefined && first.deployedModelId !== picked.deployedModelId) {
    dest = destinationById(route, first.deployedModelId, 'deployedModelId');
    call.deployedModelId = dest.deployedModelId;
    // Another model may have another framework (and so other rules and adaptation).
    if (dest.framework !== picked.framework) prepared = prepareExplain(raw, dest.framework, svc.maxJsonDepth);
  }
  if (dest.explainRoute === null) {
    throw new ApiError('explain_unsupported', `deployed model ${dest.deployedModelId} has no explain route (set containerSpec.explainRoute, or use a predictRoute ending in :predict)`);
  }
  const answer = await exchange(dest, call, svc, { body: prepared.body, headers: { 'content-type': 'application/json' }, path: dest.explainRoute });
  const out = shapePredictAnswer(answer.body, prepared.shape, dest.responseFields, { maxDepth: svc.maxJsonDepth + 2, modelId: dest.deployedModelId, listKey: 'explanations' });
  call.responseBytes = sendJson(res, 200, out, vertexHeaders(call, route, dest));
}
