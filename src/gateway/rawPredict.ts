// rawPredict: bytes both ways, untouched and streamed. The request body goes to the model's predict
// route with its content type (any or none); the model's status, content type and body come back as
// they are, written straight into the client response. A model that resets mid-answer aborts the
// client connection (never a truncated 200). Bodies of known length up to BUFFER_BYTES are read
// whole first (one write upstream, like nginx's client body buffer); larger ones stream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { BodyView, checkDeclaredLength, readAll } from './bodyStream.js';
import { SMALL_BODY_BYTES, upstreamFailure } from './upstream.js';
import { vertexHeaders, type Call, type HandlerServices } from './call.js';
import type { Route, RouteDestination } from './routing.js';

const BUFFER_BYTES = SMALL_BODY_BYTES;
const PASSED_REQUEST_HEADERS = ['content-type', 'content-encoding', 'accept', 'accept-encoding'];
const PASSED_RESPONSE_HEADERS = ['content-type', 'content-encoding', 'content-length', 'content-disposition', 'cache-control'];

export async function handleRawPredict(req: IncomingMessage, res: ServerResponse, call: Call, route: Route, dest: RouteDestination, svc: HandlerServices): Promise<void> {
  checkDeclaredLength(req, dest.maxRequestBytes);
  const headers: Record<string, string> = { 'x-request-id': call.id };
  for (const h of PASSED_REQUEST_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  const declared = req.headers['content-length'];
  let body: Buffer | (() => Readable);
  let view: BodyView | undefined;
  if (declared !== undefined && Number(declared) <= BUFFER_BYTES) {
    body = await readAll(req, dest.maxRequestBytes);
    call.requestBytes = body.length;
  } else if (declared !== undefined) {
    // Known length (already checked against the limit; Node's parser holds the client to it): the
    // request itself is the body. The transport starts reading it only once connected, so a retry
    // after a refused connection finds it untouched.
    headers['content-length'] = declared;
    call.requestBytes = Number(declared);
    body = () => req;
  } else {
    // Chunked: a view that counts bytes and fails with 413 past the limit.
    body = () => (view = new BodyView(req, dest.maxRequestBytes));
  }

  const sentAt = process.hrtime.bigint();
  const extra = vertexHeaders(call, route, dest);
  try {
    await svc.upstream.stream(dest.upstreams, { path: dest.predictRoute, headers, body, timeoutMs: dest.timeoutMs }, (statusCode, answerHeaders) => {
      svc.metrics.upstream(dest.deployedModelId, Number(process.hrtime.bigint() - sentAt) / 1e9);
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
    if (view) call.requestBytes = view.bytes;
  }
}
