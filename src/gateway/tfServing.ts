// The TF Serving surface of one tensorflow DeployedModel, at `/tfserving/{namespace}/{name}` + a
// TF Serving REST path under /v1/models/ (normalised: no dot segments, encoded or doubled slashes,
// or backslashes, which a model server might resolve elsewhere): model status and metadata (GET),
// `:predict` (checked by the same rules as Vertex predict, row or columnar), `:classify` and
// `:regress` (checked against TF Serving's request shape), `/versions/N` and `/labels/L`. The
// body goes to the model unchanged and its answer comes back unchanged (status, content type, bytes:
// NaN and Infinity included), so TF Serving clients see TF Serving. Gateway errors use TF's
// `{"error": "..."}`; the model's own errors keep their code and message.
import { ApiError } from '../errors.js';
import { preparePredict } from '../payload/prepare.js';
import { checkExamplesBody } from '../payload/tfExamples.js';
import { readRequestBody } from './bodyStream.js';
import { exchange } from './exchange.js';
import { sendWhole } from './respond.js';
import type { ModelCall } from './call.js';

export async function handleTfServing(call: ModelCall): Promise<void> {
  const { req, res, model, modelPath: path, svc } = call;
  if (model.framework !== 'tensorflow') {
    throw new ApiError('invalid_request', `deployed model ${model.deployedModelId} is a ${model.framework} model; the TF Serving surface serves tensorflow models only`);
  }
  const dest = model.destination;
  if (!dest) throw new ApiError('no_ready_destination', `deployed model ${model.deployedModelId} ${model.notReady ?? 'is not Ready'}`);
  const method = req.method === 'GET' ? 'GET' : 'POST';
  let body: Buffer = Buffer.alloc(0);
  if (method === 'POST') {
    // An unknown verb is refused before the body is read.
    const verb = postVerb(path);
    body = await readRequestBody(req, dest.maxRequestBytes, call.lease, dest.timeoutMs);
    call.requestBytes = body.length;
    // The gateway's checks for predict (the same rules as Vertex predict for tensorflow), and for
    // classify and regress TF Serving's shape of tf.Example features.
    if (verb === 'predict') preparePredict(body, 'tensorflow', svc.maxJsonDepth);
    else checkExamplesBody(body, verb, svc.maxJsonDepth);
  } else {
    req.resume();
  }
  const answer = await exchange(call, dest, { body, headers: method === 'POST' ? { 'content-type': 'application/json' } : {}, path, method });
  const contentType = answer.headers['content-type'];
  call.responseBytes = await sendWhole(res, answer.statusCode, typeof contentType === 'string' ? contentType : 'application/json', answer.body, { 'X-Vertex-AI-Deployed-Model-Id': dest.deployedModelId }, svc.compression);
}

const PREFIX = '/tfserving/';

/**
 * The TF Serving path and query of a request to `/tfserving/{namespace}/{name}/...` (its URL as the
 * client sent it), checked: a path under /v1/models/ with no `.` or `..` segment (percent-encoded or
 * not), no encoded slash or backslash (`%2f`, `%5c`), no backslash and no empty segment. Throws a 400
 * saying what is wrong; the model is sent exactly the path returned.
 */
export function tfServingPath(url: string): string {
  // After `/tfserving/{namespace}/{name}` (the route matched those two segments).
  const afterNs = url.indexOf('/', PREFIX.length);
  const rest = url.slice(url.indexOf('/', afterNs + 1));
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  const refuse = (why: string): never => {
    throw new ApiError('invalid_request', `the TF Serving path ${JSON.stringify(path)} ${why}; it must be a plain path under /v1/models/`);
  };
  if (path.includes('\\')) refuse('has a backslash');
  if (/%(2f|5c)/i.test(path)) refuse('has an encoded slash or backslash (%2F, %5C)');
  const segments = path.split('/').slice(1);
  if (segments.some((s) => s === '')) refuse('has an empty segment (a doubled or trailing slash)');
  for (const seg of segments) {
    let decoded = seg;
    try {
      decoded = decodeURIComponent(seg);
    } catch {
      refuse('has a malformed percent-escape');
    }
    if (decoded === '.' || decoded === '..') refuse(`has a ${JSON.stringify(decoded)} segment${decoded !== seg ? ` (written ${JSON.stringify(seg)})` : ''}`);
  }
  if (segments.length < 3 || segments[0] !== 'v1' || segments[1] !== 'models') refuse('names no model');
  return rest;
}

const VERBS = ['predict', 'classify', 'regress'] as const;

/** The verb of a POST (`:predict`, `:classify`, `:regress` at the end of the path); a 400 for any other. */
function postVerb(pathAndQuery: string): (typeof VERBS)[number] {
  const path = pathAndQuery.split('?')[0];
  const last = path.slice(path.lastIndexOf('/') + 1);
  const colon = last.lastIndexOf(':');
  if (colon < 0) throw new ApiError('invalid_request', `POST ${path} has no verb; TF Serving takes POST .../v1/models/{model}[/versions/{n}|/labels/{label}]:predict, :classify or :regress`);
  const verb = last.slice(colon + 1).toLowerCase();
  const known = VERBS.find((v) => v === verb);
  if (!known) throw new ApiError('invalid_request', `unknown TF Serving verb :${last.slice(colon + 1)}; POST takes :predict, :classify or :regress`);
  return known;
}
