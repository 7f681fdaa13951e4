// rawPredict: bytes both ways, untouched and streamed. The request body goes to the model's predict
// route with its content type (any or none); the model's status, content type and body come back as
// they are, written straight into the client response. A model that resets mid-answer aborts the
// client connection (never a truncated 200). Bodies of known length up to BUFFER_BYTES are read
// whole first (one write upstream, like nginx's client body buffer); larger ones stream.
// The official client libraries' REST form (`?$alt=json`) wraps the bytes as a google.api.HttpBody
// in JSON: that form is unwrapped, forwarded as raw bytes, and the answer wrapped the same way.
import type { Readable } from 'node:stream';
import { BodyView, checkDeclaredLength, readAll, readRequestBody } from './bodyStream.js';
import { SMALL_BODY_BYTES, upstreamFailure } from './upstream/index.js';
import type { EndpointCall } from './call.js';
import { exchange } from './exchange.js';
import { sendJson } from './respond.js';
import { httpBodyAnswer, parseHttpBodyRequest, type HttpBody } from '../payload/httpBody.js';

const BUFFER_BYTES = SMALL_BODY_BYTES;
const PASSED_REQUEST_HEADERS = ['content-type', 'content-encoding', 'accept', 'accept-encoding'];
const PASSED_RESPONSE_HEADERS = ['content-type', 'content-encoding', 'content-length', 'content-disposition', 'cache-control'];

/** Whether the URL asks for proto3 JSON (`$alt=json`, as gax's REST transport sends: `?$alt=json%3Benum-encoding=int`). */
export function wantsProtoJson(url: string): boolean {
  const q = url.indexOf('?');
  if (q < 0) return false;
  const alt = new URLSearchParams(url.slice(q + 1)).get('$alt');
  return alt !== null && alt.split(';')[0] === 'json';
}

/** The HttpBody of a `$alt=json` request (rawPredict's, streamRawPredict's), read whole and unwrapped. */
export async function readHttpBodyRequest(call: EndpointCall): Promise<HttpBody> {
  const { dest } = call;
  // base64 in JSON is 4/3 of the bytes; the decoded size is held to maxRequestBytes itself.
  const raw = await readRequestBody(call.req, Math.ceil((dest.maxRequestBytes * 4) / 3) + 64 * 1024, call.lease, dest.timeoutMs);
  const request = parseHttpBodyRequest(raw, dest.maxRequestBytes);
  call.requestBytes = request.data.length;
  return request;
}

/** rawPredict as google.api.HttpBody in JSON: unwrap, forward the bytes, wrap the model's answer. */
async function handleHttpBodyRawPredict(call: EndpointCall): Promise<void> {
  const { dest } = call;
  const request = await readHttpBodyRequest(call);
  const answer = await exchange(call, dest, { body: request.data, headers: request.contentType ? { 'content-type': request.contentType } : {} });
  const contentType = answer.headers['content-type'];
  call.responseBytes = await sendJson(call.res, 200, httpBodyAnswer(typeof contentType === 'string' ? contentType : undefined, answer.body), dest.answerHeaders, call.svc.compression);
}

/** A raw body on its way to the model: its headers, and the bytes or a fresh view of them per attempt. */
export interface RawBody {
  headers: Record<string, string>;
  body: Buffer | (() => Readable);
  /** The bytes of a chunked body, counted as it streams (set once it started). */
  view(): BodyView | undefined;
}

/**
 * The client's request as the body of a call to the model, with its content headers. Bodies of
 * known length up to BUFFER_BYTES are read whole first; larger ones stream, held to the limit.
 */
export async function rawBody(call: EndpointCall): Promise<RawBody> {
  const { req, dest } = call;
  const declared = checkDeclaredLength(req, dest.maxRequestBytes);
  const headers: Record<string, string> = { 'x-request-id': call.id };
  for (const h of PASSED_REQUEST_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  if (declared !== undefined && declared <= BUFFER_BYTES) {
    const body = await readAll(req, dest.maxRequestBytes, { declared });
    call.requestBytes = body.length;
    return { headers, body, view: () => undefined };
  }
  if (declared !== undefined) {
    // Known length (already checked against the limit; Node's parser holds the client to it): the
    // request itself is the body. The transport starts reading it only once connected, so a retry
    // after a refused connection finds it untouched.
    headers['content-length'] = String(declared);
    call.requestBytes = declared;
    return { headers, body: () => req, view: () => undefined };
  }
  // Chunked: a view that counts bytes and fails with 413 past the limit.
  let view: BodyView | undefined;
  return { headers, body: () => (view = new BodyView(req, dest.maxRequestBytes)), view: () => view };
}

export async function handleRawPredict(call: EndpointCall): Promise<void> {
  const { req, res, dest, svc } = call;
  if (wantsProtoJson(req.url ?? '')) return handleHttpBodyRawPredict(call);
  const { headers, body, view } = await rawBody(call);
  const sentAt = process.hrtime.bigint();
  const extra = dest.answerHeaders;
  try {
    const answered = (): void => svc.metrics.upstreamDone(dest, Number(process.hrtime.bigint() - sentAt) / 1e9);
    await svc.upstream.stream(dest, { path: dest.predictRoute, headers, body, timeoutMs: dest.timeoutMs, idleTimeoutMs: svc.idleTimeoutMs, cancel: call.cancel, onAnswered: answered }, (statusCode, answerHeaders) => {
      svc.metrics.upstreamHeaders(dest, Number(process.hrtime.bigint() - sentAt) / 1e9);
      res.statusCode = statusCode;
      for (const h of PASSED_RESPONSE_HEADERS) {
        const v = answerHeaders[h];
        if (v !== undefined) res.setHeader(h, v);
      }
      for (const k in extra) res.setHeader(k, extra[k]);
      return res;
    });
  } catch (err) {
    // A limit breach while streaming arrives as the view's own 413 ApiError.
    throw upstreamFailure(err, dest.deployedModelId, dest.timeoutMs);
  } finally {
    const v = view();
    if (v) call.requestBytes = v.bytes;
  }
}
