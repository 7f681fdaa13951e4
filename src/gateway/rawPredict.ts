// rawPredict: bytes both ways, untouched and streamed. The request body goes to the model's predict
// route with its content type (any or none); the model's status, content type and body come back as
// they are. A model that resets mid-answer aborts the client connection (never a truncated 200).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { BodyView, checkDeclaredLength } from './bodyStream.js';
import { upstreamFailure } from './upstream.js';
import { vertexHeaders, type Call, type HandlerServices } from './call.js';
import type { Route, RouteDestination } from './routing.js';

const PASSED_REQUEST_HEADERS = ['content-type', 'content-encoding', 'accept', 'accept-encoding'];
const PASSED_RESPONSE_HEADERS = ['content-type', 'content-encoding', 'content-length', 'content-disposition', 'cache-control'];

export async function handleRawPredict(req: IncomingMessage, res: ServerResponse, call: Call, route: Route, dest: RouteDestination, svc: HandlerServices): Promise<void> {
  checkDeclaredLength(req, dest.maxRequestBytes);
  const headers: Record<string, string> = { 'x-request-id': call.id };
  for (const h of PASSED_REQUEST_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  const cl = req.headers['content-length'];
  if (cl !== undefined) headers['content-length'] = cl;

  let view: BodyView | undefined;
  const sentAt = process.hrtime.bigint();
  let answer;
  try {
    answer = await svc.upstream.send(dest.upstreams, {
      path: dest.predictRoute,
      headers,
      body: () => (view = new BodyView(req, dest.maxRequestBytes)),
      timeoutMs: dest.timeoutMs,
    });
  } catch (err) {
    // A limit breach surfaces as the view's own 413 error.
    const viewError = view?.errored;
    throw upstreamFailure(viewError ?? err, dest.deployedModelId, dest.timeoutMs);
  }
  svc.metrics.upstream(dest.deployedModelId, Number(process.hrtime.bigint() - sentAt) / 1e9);
  call.requestBytes = view?.bytes ?? 0;

  res.statusCode = answer.statusCode;
  for (const h of PASSED_RESPONSE_HEADERS) {
    const v = answer.headers[h];
    if (v !== undefined) res.setHeader(h, v);
  }
  const extra = vertexHeaders(call, route, dest);
  for (const k in extra) res.setHeader(k, extra[k]);
  try {
    await pipeline(answer.body, res);
  } catch (err) {
    throw upstreamFailure(err, dest.deployedModelId, dest.timeoutMs);
  }
}
