// explain (Vertex `:explain`): routed like predict, except that the body's `deployedModelId`, when
// given, picks the deployed model whatever the traffic split says. The body is checked by the predict
// rules, sent to the model's explain route, and the answer must hold one explanation per instance;
// deployedModelId & co. are spliced in as for predict.
import { ApiError } from '../errors.js';
import { splitExplain } from '../payload/explain.js';
import { preparePredict } from '../payload/prepare.js';
import { shapePredictAnswer } from '../payload/response.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import { sendJson } from './respond.js';
import { destinationById } from './routing.js';
import { sendTo, type EndpointCall } from './call.js';

export async function handleExplain(call: EndpointCall): Promise<void> {
  const { route, dest: picked, svc } = call;
  const raw = await readRequestBody(call.req, picked.maxRequestBytes, call.lease, picked.timeoutMs);
  call.requestBytes = raw.length;
  // The body may name the deployed model: its rules, its route and its adaptation apply, not the picked one's.
  const { body, deployedModelId } = splitExplain(raw, svc.maxJsonDepth);
  const dest = deployedModelId === undefined || deployedModelId === picked.deployedModelId ? picked : destinationById(route, deployedModelId, 'deployedModelId');
  sendTo(call, dest);
  if (dest.explainRoute === null) {
    throw new ApiError('explain_unsupported', `deployed model ${dest.deployedModelId} has no explain route (set containerSpec.explainRoute, or use a predictRoute ending in :predict)`);
  }
  const prepared = preparePredict(body, dest.framework, svc.maxJsonDepth);
  const answer = await exchange(call, dest, { body: prepared.body, headers: { 'content-type': 'application/json' }, path: dest.explainRoute });
  const out = shapePredictAnswer(answer.body, prepared.shape, dest.responseFields, { maxDepth: svc.maxJsonDepth + 2, modelId: dest.deployedModelId, listKey: 'explanations' });
  call.responseBytes = await sendJson(call.res, 200, out, dest.answerHeaders, svc.compression);
}
