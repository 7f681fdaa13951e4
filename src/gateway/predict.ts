// predict: read the body under the destination's limit, parse and validate it for the model's
// framework, adapt it, forward it, check the answer has one prediction per instance and splice in
// deployedModelId & co. The parse and validation run in one synchronous function so the parsed
// tree is garbage before the upstream await.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../errors.js';
import { parseJson, JsonSyntaxError } from '../payload/json.js';
import { validatePredictBody, type PredictShape } from '../payload/validate.js';
import { adaptPredictBody } from '../payload/adapt.js';
import { fastCheckPredict } from '../payload/fastCheck.js';
import { scanObject } from '../payload/scan.js';
import { shapePredictAnswer, upstreamErrorMessage } from '../payload/response.js';
import { readAll } from './bodyStream.js';
import { upstreamFailure } from './upstream.js';
import { sendJson } from './respond.js';
import { vertexHeaders, type Call, type HandlerServices } from './call.js';
import type { Route, RouteDestination } from './routing.js';

/**
 * Validates and adapts a predict body. Synchronous on purpose (see the file comment). The byte-level
 * fast check accepts the common valid body without building a tree; anything else goes through
 * JSON.parse and the tree validator, which accepts it or throws the precise error.
 */
export function preparePredict(raw: Buffer, dest: Pick<RouteDestination, 'framework'>, maxDepth: number): { body: Buffer; shape: PredictShape } {
  const fast = fastCheckPredict(raw, dest.framework, maxDepth);
  if (fast !== null) return { body: adaptPredictBody(raw, dest.framework, fast, maxDepth, fast.spans), shape: fast };
  checkNesting(raw, maxDepth);
  let parsed: unknown;
  try {
    parsed = parseJson(raw.toString('utf8'), true);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw new ApiError('invalid_json', err.message);
    throw err;
  }
  const shape = validatePredictBody(parsed, dest.framework, { maxDepth });
  return { body: adaptPredictBody(raw, dest.framework, shape, maxDepth), shape };
}

/**
 * Refuses a body nested deeper than the limit before JSON.parse builds it (an iterative byte scan:
 * a megabyte of `[[[[` costs no tree and no stack). Other syntax problems are left to JSON.parse,
 * whose message is the one callers get.
 */
function checkNesting(raw: Buffer, maxDepth: number): void {
  let i = 0;
  while (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09) i++;
  if (raw[i] === 0x5b) throw new ApiError('invalid_payload', 'body: expected a JSON object, got list');
  try {
    scanObject(raw, { allowNonFinite: true, maxDepth: maxDepth + 2 });
  } catch (err) {
    if (err instanceof JsonSyntaxError && err.message.includes('nesting')) {
      throw new ApiError('invalid_payload', `body: nesting deeper than ${maxDepth} levels`);
    }
  }
}

export async function handlePredict(req: IncomingMessage, res: ServerResponse, call: Call, route: Route, dest: RouteDestination, svc: HandlerServices): Promise<void> {
  const raw = await readAll(req, dest.maxRequestBytes);
  call.requestBytes = raw.length;
  const { body, shape } = preparePredict(raw, dest, svc.maxJsonDepth);

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
  call.responseBytes = out.reduce((n, part) => n + part.length, 0);
  sendJson(res, 200, out, vertexHeaders(call, route, dest));
}
