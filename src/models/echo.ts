// The bundled `echo` model: a TorchServe-style server speaking the KServe v1 envelope.
// Owns: GET /ping and GET /v1/models/echo; predict at POST /v1/models/echo:predict and
// /predictions/echo. A JSON body whose `instances` are all `{"data": ...}` objects (or `{"body":
// ...}`, which TorchServe's default handler reads when there is no `data`) is answered
// `{"predictions": [each data]}` (a 400 when they nest too deeply to be written back); any other
// body comes back unchanged (same bytes, same content type), streamed, so rawPredict of large
// binary payloads can be tested end to end. Explain at
// POST /v1/models/echo:explain (KServe v1): the envelope is answered with one explanation per
// instance, the whole output attributed to its `data` feature; anything else is a 400.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { parseJson, stringifyJson } from '../payload/json.js';

export const ECHO_MODEL_NAME = 'echo';
export const ECHO_PREDICT_PATH = '/v1/models/echo:predict';
export const ECHO_HEALTH_PATH = '/ping';
export const ECHO_EXPLAIN_PATH = '/v1/models/echo:explain';
const PREDICT_PATHS = new Set([ECHO_PREDICT_PATH, '/predictions/echo']);

/** Bodies that start like a JSON object are held up to this size to look for the envelope. */
const MAX_ENVELOPE_BYTES = 16 * 1024 * 1024;
const OPEN_BRACE = 0x7b;

function sendJson(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** Handles one request. Never throws. */
export function handleEcho(req: IncomingMessage, res: ServerResponse): void {
  const method = req.method ?? 'GET';
  const path = (req.url ?? '/').split('?')[0];
  if (PREDICT_PATHS.has(path)) {
    if (method === 'POST') {
      predict(req, res);
      return;
    }
    req.resume();
    sendJson(res, 405, JSON.stringify({ error: `method ${method} not allowed on ${path}; use POST` }));
    return;
  }
  if (path === ECHO_EXPLAIN_PATH && method === 'POST') {
    explain(req, res);
    return;
  }
  req.resume();
  if (method === 'GET' && path === ECHO_HEALTH_PATH) {
    sendJson(res, 200, JSON.stringify({ status: 'Healthy' }));
  } else if (method === 'GET' && path === `/v1/models/${ECHO_MODEL_NAME}`) {
    sendJson(res, 200, JSON.stringify({ name: ECHO_MODEL_NAME, ready: true }));
  } else {
    sendJson(res, 404, JSON.stringify({ error: `no route for ${method} ${path}` }));
  }
}

/** Index of the first byte that is not JSON whitespace, or -1. */
function firstSignificant(chunk: Buffer): number {
  for (let i = 0; i < chunk.length; i++) {
    const c = chunk[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
  }
  return -1;
}

/** The `data` (or else `body`) of every instance when the body is the envelope with every instance `{"data": ...}` or `{"body": ...}`. */
function envelopeData(body: Buffer): unknown[] | null {
  let doc: unknown;
  try {
    doc = parseJson(body.toString('utf8'), true);
  } catch {
    return null;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return null;
  const instances: unknown = (doc as Record<string, unknown>).instances;
  if (!Object.hasOwn(doc, 'instances') || !Array.isArray(instances)) return null;
  const data: unknown[] = [];
  for (const item of instances) {
    // TorchServe's default handler reads each instance's `data`, or else its `body`.
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return null;
    const key = Object.hasOwn(item, 'data') ? 'data' : Object.hasOwn(item, 'body') ? 'body' : null;
    if (key === null) return null;
    data.push((item as Record<string, unknown>)[key]);
  }
  return data;
}

/**
 * Answers 200 with the JSON `write` makes; 400 when the data nests too deeply to be written
 * (JSON.stringify recurses: a RangeError), 500 for any other failure. Never throws.
 */
function answerWith(res: ServerResponse, write: () => string): void {
  let text: string;
  try {
    text = write();
  } catch (err) {
    if (err instanceof RangeError) sendJson(res, 400, JSON.stringify({ error: 'the instances nest too deeply to be answered' }));
    else sendJson(res, 500, JSON.stringify({ error: 'internal error' }));
    return;
  }
  sendJson(res, 200, text);
}

/** Explain: for the envelope, each prediction with its whole output attributed to `data`. */
function explain(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('error', () => res.destroy());
  req.on('end', () => {
    const data = envelopeData(Buffer.concat(chunks));
    if (data === null) {
      sendJson(res, 400, JSON.stringify({ error: 'explain takes {"instances": [{"data": ...}, ...]}' }));
      return;
    }
    const explanations = data.map((d) => ({ attributions: [{ outputIndex: [0], featureAttributions: { data: 1 }, instanceOutputValue: typeof d === 'number' ? d : null }] }));
    answerWith(res, () => stringifyJson({ explanations, predictions: data }));
  });
}

/**
 * Reads the body only as far as needed: a body that cannot be a JSON object (first significant
 * byte is not `{`) or outgrows MAX_ENVELOPE_BYTES is piped straight back; a small JSON object is
 * buffered, checked for the envelope, and answered or sent back unchanged.
 */
function predict(req: IncomingMessage, res: ServerResponse): void {
  const contentType = req.headers['content-type'];
  const echoHeaders = (length: number | undefined): OutgoingHttpHeaders => {
    const headers: OutgoingHttpHeaders = {};
    if (contentType !== undefined) headers['Content-Type'] = contentType;
    if (length !== undefined) headers['Content-Length'] = length;
    return headers;
  };
  const declared = req.headers['content-length'];
  const declaredLength = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;

  const chunks: Buffer[] = [];
  let size = 0;
  let sawBrace: boolean | null = null; // null: only whitespace so far

  const stream = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.pause();
    res.writeHead(200, echoHeaders(declaredLength));
    for (const c of chunks) res.write(c);
    chunks.length = 0;
    req.pipe(res);
  };
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    size += chunk.length;
    if (sawBrace === null) {
      const i = firstSignificant(chunk);
      if (i >= 0) sawBrace = chunk[i] === OPEN_BRACE;
    }
    if (sawBrace === false || size > MAX_ENVELOPE_BYTES) stream();
  };
  const onEnd = (): void => {
    const body = Buffer.concat(chunks);
    const data = sawBrace ? envelopeData(body) : null;
    if (data !== null) {
      answerWith(res, () => stringifyJson({ predictions: data }));
      return;
    }
    res.writeHead(200, echoHeaders(body.length));
    res.end(body);
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', () => res.destroy());
  res.on('error', () => req.destroy());
}
