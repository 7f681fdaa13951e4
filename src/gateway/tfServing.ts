// The TF Serving surface of one tensorflow DeployedModel, at `/tfserving/{namespace}/{name}` + any
// TF Serving REST path: model status and metadata (GET), `:predict` (checked by the same rules as
// Vertex predict, row or columnar), `:classify` and `:regress`, `/versions/N` and `/labels/L`. The
// body goes to the model unchanged and its answer comes back unchanged (status, content type, bytes:
// NaN and Infinity included), so TF Serving clients see TF Serving. Gateway errors use TF's
// `{"error": "..."}`; the model's own errors keep their code and message.
import { ApiError } from '../errors.js';
import { preparePredict } from '../payload/prepare.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import type { ModelCall } from './call.js';

export async function handleTfServing(call: ModelCall): Promise<void> {
  const { req, res, model, modelPath: path, svc } = call;
  if (model.framework !== 'tensorflow') {
    throw new ApiError('invalid_request', `deployed model ${model.deployedModelId} is a ${model.framework} model; the TF Serving surface serves tensorflow models only`);
  }
  const dest = model.destination;
  if (!dest) throw new ApiError('no_ready_destination', `deployed model ${model.deployedModelId} is not Ready`);
  const method = req.method === 'GET' ? 'GET' : 'POST';
  let body: Buffer = Buffer.alloc(0);
  if (method === 'POST') {
    body = await readRequestBody(req, dest.maxRequestBytes, call.lease, dest.timeoutMs);
    call.requestBytes = body.length;
    // The gateway's checks for predict (the same rules as Vertex predict for tensorflow); classify
    // and regress carry tf.Example features, which TF Serving checks itself.
    if (/:predict$/i.test(path.split('?')[0])) preparePredict(body, 'tensorflow', svc.maxJsonDepth);
  } else {
    req.resume();
  }
  const answer = await exchange(call, dest, { body, headers: method === 'POST' ? { 'content-type': 'application/json' } : {}, path, method });
  res.statusCode = answer.statusCode;
  const contentType = answer.headers['content-type'];
  res.setHeader('Content-Type', typeof contentType === 'string' ? contentType : 'application/json');
  res.setHeader('X-Vertex-AI-Deployed-Model-Id', dest.deployedModelId);
  res.setHeader('Content-Length', answer.body.length);
  res.end(answer.body);
  call.responseBytes = answer.body.length;
}
